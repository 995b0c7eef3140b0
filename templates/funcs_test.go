package templates

import (
	"errors"
	"strings"
	"testing"
)

// TestStringFunctions runs the functions of the second pass on the
// built-in fixture, on values present, missing and empty.
func TestStringFunctions(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"contains", `{{contains "water" .InitialRequest.Content}} {{contains "fire" .InitialRequest.Content}}`, "true false"},
		{"contains missing", `{{contains "no" .Nothing}} {{.Nothing | contains "value"}}`, "false false"},
		{"prefix and suffix", `{{hasPrefix "Cust" .InitialRequest.Content}} {{hasSuffix "done?" .InitialRequest.Content}} {{hasSuffix "x" .InitialRequest.Content}}`, "true true false"},
		{"replace", `{{replace "a" "4" "banana"}} {{replace "x" "y" .Nothing}}`, "b4n4n4 <no value>"},
		{"split", `{{len (split "," "a,b,,c")}} {{len (split "," .Nothing)}} {{index (split ", " "x, y") 1}}`, "4 0 y"},
		{"matches", `{{matches "^C\\d{5}$" .MemorySessionId}} {{matches "^CLM" .MemorySessionId}} {{matches "." .Nothing}}`, "true false false"},
		{"first and last", `{{first .KnownSessions}} {{last .KnownSessions}} {{first "héllo"}}{{last "héllo"}} {{first (split "," "")}}`, "C45653 ACME Corp ho"},
		{"first of nothing", `{{first .Nothing}}|{{last .ChannelMembers}}`, "<no value>|Alice Martin"},
		{"toJSON", `{{toJSON .KnownSessions}} {{toJSON .Nothing}} {{toJSON 3}}`, `["C45653","C44120","ACME Corp"] null 3`},
		{"toJSON member", `{{toJSON .InitialRequest.Author}}`, `{"IsAgent":false,"Name":"Alice Martin","SessionFormat":"","StandsFor":""}`},
		{"toJSON message", `{{toJSON (index .Messages 0)}}`, `{"Author":{"IsAgent":false,"Name":"Alice Martin","SessionFormat":"","StandsFor":""},"Content":"Customer C45653 reports water damage in the kitchen. Is it covered, and what has already been done?","InExchange":true,"Time":"2025-03-14T09:12:00Z"}`},
		{"required present", `{{required "id" .MemorySessionId}} {{required "count" 0}} {{required "flag" false}}`, "C45653 0 false"},
		{"messages", `{{range .Messages}}{{.Author}}/{{.InExchange}};{{end}} {{.ExchangeMessageCount}} {{(last .Messages).Author.EnsDomain}}`, "Alice Martin/true;Elen/true; 2 elen.acme.137.protocol6022.eth"},
		{"vars", `{{.Vars.company}} {{.Vars.missing}} {{.Vars.company.deeper}}`, "Acme Insurance <no value> <no value>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := renderExample(t, c.src); got != c.want {
				t.Errorf("%s\nrenders %q\nwant    %q", c.src, got, c.want)
			}
		})
	}
}

// TestRequiredFails: required fails the render on each kind of empty
// value, with the author's message and the file and line.
func TestRequiredFails(t *testing.T) {
	for _, src := range []string{
		"ok\n{{required \"the customer\" .Nothing}}",
		"ok\n{{required \"the customer\" \"  \"}}",
		"ok\n{{required \"the customer\" .Vars.missing}}",
		"ok\n{{.ChannelDescription | required \"the customer\" | printf \"%s\"}}{{required \"the customer\" (split \",\" .Nothing)}}",
	} {
		got := renderExample(t, src)
		if want := "error: example.tmpl:2: the customer"; got != want {
			t.Errorf("%q renders %q, want %q", src, got, want)
		}
	}
}

// TestMatchesBadExpression: an invalid regular expression fails the
// render naming the function.
func TestMatchesBadExpression(t *testing.T) {
	got := renderExample(t, `{{matches "(" .MemorySessionId}}`)
	if !strings.HasPrefix(got, "error: example.tmpl:1:") || !strings.Contains(got, "matches: error parsing regexp") {
		t.Errorf("got %q", got)
	}
}

// TestRequiredErrorType: the error of a failed required is an *Error
// a caller can read file and line from.
func TestRequiredErrorType(t *testing.T) {
	r := buildRepo(map[string]fileData{"expert/system.tmpl": {body: []byte("\n\n{{required \"a key\" .MemorySessionId}}")}}, func(s string) string { return s }, funcMap(FixedClock))
	d := BuiltinFixture().Data
	d.MemorySessionId = ""
	_, err := execute(r.prompts["expert/system.tmpl"].tmpl, 10, &d)
	var e *Error
	if !errors.As(err, &e) || e.File != "expert/system.tmpl" || e.Line != 3 || e.Message != "a key" {
		t.Fatalf("err = %#v", err)
	}
}
