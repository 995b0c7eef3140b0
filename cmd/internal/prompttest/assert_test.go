package prompttest

import (
	"strings"
	"testing"
)

func TestParseAssertion(t *testing.T) {
	cases := []struct {
		text    string
		op      Op
		arg     string
		wantErr string
	}{
		{`contains "covered"`, OpContains, "covered", ""},
		{`not contains "gold: cover"`, OpNotContains, "gold: cover", ""},
		{`matches /CLM-\d{6}/`, OpMatches, `CLM-\d{6}`, ""},
		{`judge "answers in one sentence"`, OpJudge, "answers in one sentence", ""},
		{`resembles "x"`, "", "", "expected contains"},
		{`contains covered`, "", "", "contains takes a quoted text"},
		{`contains ""`, "", "", "not empty"},
		{`matches CLM`, "", "", "between slashes"},
		{`matches /(/`, "", "", "matches: error parsing regexp"},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			a, err := parseAssertion(Line{N: 3, Kind: Assert, Who: "Elen", Text: c.text})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || a.Op != c.op || a.Arg != c.arg {
				t.Fatalf("got %q %q, %v; want %q %q", a.Op, a.Arg, err, c.op, c.arg)
			}
		})
	}
}

func TestAssertionCheck(t *testing.T) {
	posts := []string{"CLM-123456 is covered.", "Anything else?"}
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{`contains "covered"`, true},
		{`contains "refused"`, false},
		{`not contains "refused"`, true},
		{`not contains "else"`, false},
		{`matches /^CLM-\d{6}\b/`, true},
		{`matches /^Anything$/`, false},
	} {
		a, err := parseAssertion(Line{Who: "Elen", Text: c.text})
		if err != nil {
			t.Fatal(err)
		}
		if got := a.check(posts); (got == "") != c.ok {
			t.Errorf("%s: holds %v, want %v (%s)", c.text, got == "", c.ok, got)
		}
	}
}

func TestReadVerdict(t *testing.T) {
	for _, c := range []struct {
		reply  string
		pass   bool
		reason string
		bad    bool
	}{
		{"PASS: it names the cover.", true, "it names the cover.", false},
		{"**fail** - too long", false, "too long", false},
		{"  Pass", true, "", false},
		{"Maybe: hard to say", false, "", true},
		{"", false, "", true},
	} {
		v, err := readVerdict(c.reply)
		if (err != nil) != c.bad || err == nil && (v.pass != c.pass || v.reason != c.reason) {
			t.Errorf("%q: %+v, %v", c.reply, v, err)
		}
	}
}

// A "?" line parses into its step; without a step before it, it is an
// error naming the line.
func TestParseAssertLines(t *testing.T) {
	s, err := Parse("t.chat", strings.NewReader("> Ada: hi\n? Elen: contains \"hello\"\n"))
	if err != nil || len(s.Steps) != 1 || len(s.Steps[0].Asserts) != 1 || s.Steps[0].Asserts[0].String() != `? Elen: contains "hello"` {
		t.Fatalf("%+v, %v", s, err)
	}
	if _, err := Parse("t.chat", strings.NewReader("? Elen: contains \"hello\"\n> Ada: hi\n")); err == nil || !strings.Contains(err.Error(), "t.chat:1: an assertion before the first person's line") {
		t.Errorf("err = %v", err)
	}
}
