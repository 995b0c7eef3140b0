package templates

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCollapseControls(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"a\nb", "a b"},
		{"a\r\n\t\tb", "a b"},
		{"a \n b", "a   b"},
		{"a\u2028b\u2029c", "a b c"},
		{"a\x00\x1f\x7f\u0080\u009fb", "a b"},
		{"\nedges\n", " edges "},
		{"bad \xff\xfe utf-8\n", "bad \xff\xfe utf-8 "},
		{"no-break\u00a0space and\u200bzero-width", "no-break\u00a0space and\u200bzero-width"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := collapseControls(tt.in); got != tt.want {
				t.Errorf("collapseControls(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// Inside actions, control characters the parser would refuse become
// spaces; literals, comments, text and line breaks are left as they are.
func TestBlankActionControls(t *testing.T) {
	tests := []struct{ in, want string }{
		{"text\f{{.A}}\f", "text\f{{.A}}\f"},
		{"{{\f.A\v|\u2028lower\u0085}}", "{{ .A | lower }}"},
		{"{{-\f.A\f-}}", "{{- .A -}}"},
		{"{{.A}}\n{{\n.B\t}}", "{{.A}}\n{{\n.B\t}}"},
		{"{{\"}}\f\" \f`\f}}` '\f'}}", "{{\"}}\f\"  `\f}}` '\f'}}"},
		{"{{\"esc\\\"\f\"\f}}", "{{\"esc\\\"\f\" }}"},
		{"{{/* \f}} */\f}}", "{{/* \f}} */ }}"},
		{"{{- /* \f */ -}}", "{{- /* \f */ -}}"},
		{"{{\"open\n\f}}", "{{\"open\n }}"},
		{"{{.A\f", "{{.A "},
		{"no actions\f", "no actions\f"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := blankActionControls(tt.in); got != tt.want {
				t.Errorf("blankActionControls(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFunctions(t *testing.T) {
	members := []any{Person("Ann").templateView(), Agent(AgentInfo{Name: "Bo"}).templateView()}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"join members", must(join(", ", members)), "Ann, Bo"},
		{"join strings", must(join("-", []string{"a", "b"})), "a-b"},
		{"join any", must(join(" ", []any{1, "x", nil})), "1 x <no value>"},
		{"join string", must(join(",", "solo")), "solo"},
		{"join nothing", must(join(",", nil)), noValue},
		{"truncate", truncate(3, "abcdef"), "abc"},
		{"truncate runes", truncate(2, "éèà"), "éè"},
		{"truncate from the end", truncate(-2, "abcdef"), "ef"},
		{"truncate longer", truncate(10, "abc"), "abc"},
		{"truncate longer from the end", truncate(-10, "abc"), "abc"},
		{"truncate zero", truncate(0, "abc"), ""},
		{"truncate a number", truncate(2, 12345), "12"},
		{"truncate nothing", truncate(2, nil), noValue},
		{"default on nil", defaultValue("d", nil), "d"},
		{"default on empty string", defaultValue("d", ""), "d"},
		{"default on zero", defaultValue("d", 0), "d"},
		{"default on false", defaultValue("d", false), "d"},
		{"default on empty list", defaultValue("d", []any{}), "d"},
		{"default on value", defaultValue("d", "v"), "v"},
		{"default on true", defaultValue("d", true), true},
		// A member, a request or the data is a value, whatever it holds.
		{"default on a view", defaultValue("d", personFields{}) != "d", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
	if _, err := join(",", 3); err == nil || !strings.Contains(err.Error(), "join needs a list") {
		t.Errorf("join of a number: %v", err)
	}
	clock := func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }
	if got := funcMap(clock)["now"].(func() time.Time)(); !got.Equal(clock()) {
		t.Errorf("now = %v, want the injected clock", got)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// The function set is closed: nothing reads files, the network or the
// environment. index replaces the built-in one (lenient on missing keys,
// attribute keys matched whatever their case).
func TestFunctionSet(t *testing.T) {
	var names []string
	for name := range funcMap(time.Now) {
		names = append(names, name)
	}
	if got, want := strings.Join(slices.Sorted(slices.Values(names)), " "), "contains default first hasPrefix hasSuffix index join last lower matches now replace required split toJSON trim truncate upper"; got != want {
		t.Errorf("functions %q, want %q", got, want)
	}
}

// A member copied into a template keeps what it was built with, whatever
// the caller does to its maps afterwards.
func TestAgentCopiesItsMaps(t *testing.T) {
	attrs := map[string]string{"role": "expert"}
	m := Agent(AgentInfo{Name: "A", EnsDomain: "a.eth", Attributes: attrs})
	attrs["role"] = "changed"
	if got := m.templateView().(agentView)["Attributes"].(attributes); got["role"] != "expert" {
		t.Errorf("attributes %v", got)
	}
}

// A huge message with control characters and template syntax is data: it
// is inserted whole, exactly as it came (cutting it to the input budget is
// the engine's job).
func TestHugeMessageIsData(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/expert/system.tmpl", "Latest:\n{{.LatestRequest.Content}}\nEnd.")
	content := strings.Repeat("{{.ConversationId}}\x00\n\t\u2028{{template \"x\"}} é ", 1200)
	content = string([]rune(content)[:40000])
	d := BuiltinFixture().Data
	d.LatestRequest.Content = content
	got, err := open(t, dir).Current().Render(testAgent, RoleExpert, PromptSystem, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Latest: " + content + " End."; got != want {
		t.Errorf("the message was changed: got %d bytes, want %d", len(got), len(want))
	}
}

// A template that loops into megabytes fails its render, naming the file,
// instead of filling memory; a large but sane prompt is fine.
func TestRenderOutputIsCapped(t *testing.T) {
	tests := []struct {
		name, src, wantErr string
	}{
		{"runaway loop", `{{range 200000}}0123456789{{end}}`, "loop.tmpl: the prompt renders to more than 1048576 bytes"},
		{"large prompt", `{{range 90000}}0123456789{{end}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := parseFile("loop.tmpl", tt.src, funcMap(FixedClock))
			if err != nil {
				t.Fatal(err)
			}
			d := BuiltinFixture().Data
			out, err := execute(tmpl, 0, &d)
			switch {
			case tt.wantErr == "" && (err != nil || len(out) != 900000):
				t.Errorf("%d bytes, error %v", len(out), err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
