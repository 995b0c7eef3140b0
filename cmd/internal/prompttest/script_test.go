package prompttest

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	src := "# a comment\n\n> Ada: Is CLM-1 covered?\n< Elen: Asking.\\nTwo lines.\n< elen: 🧭 :end:\n= elen: covered: yes\n> Ada in thread: thanks\n> Bea In Thread: ok\n> Carl: a new thread\n"
	s, err := Parse("t.chat", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{
			Say: Line{N: 3, Kind: Say, Who: "Ada", Text: "Is CLM-1 covered?"},
			Replies: []Line{
				{N: 4, Kind: Reply, Who: "Elen", Text: "Asking.\nTwo lines."},
				{N: 5, Kind: Reply, Who: "elen", Text: "🧭 :end:"},
			},
			Expects: []Line{{N: 6, Kind: Expect, Who: "elen", Text: "covered: yes"}},
		},
		{Say: Line{N: 7, Kind: Say, Who: "Ada", Text: "thanks", InThread: true}},
		{Say: Line{N: 8, Kind: Say, Who: "Bea", Text: "ok", InThread: true}},
		{Say: Line{N: 9, Kind: Say, Who: "Carl", Text: "a new thread"}},
	}
	if s.Path != "t.chat" || !reflect.DeepEqual(s.Steps, want) {
		t.Errorf("steps:\n%+v\nwant:\n%+v", s.Steps, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"a line of no kind", "> Ada: hi\nhello\n", []string{`t.chat:2: expected "> Name: text", "> Name in thread: text", "< agent: reply", "= agent: text", "? agent: contains \"text\"", "# comment" or a blank line; got "hello"`}},
		{"no colon", "> Ada: hi\n< elen hello\n", []string{`t.chat:2: expected a colon after the name, as in "< agent: reply"; got "< elen hello"`}},
		{"no name", "> Ada: hi\n= : covered\n", []string{`t.chat:2: expected a name before the colon, as in "= agent: text"`}},
		{"no text", "> Ada:\n", []string{`t.chat:1: expected text after the colon, as in "> Name: text"`}},
		{"in thread first", "> Ada in thread: hi\n", []string{`t.chat:1: a reply in thread before any message`}},
		{"an expectation first", "= elen: hi\n> Ada: hi\n", []string{`t.chat:1: an expected post before the first person's line`}},
		{"every bad line is listed", "> Ada: hi\nx\ny\n", []string{`t.chat:2: expected`, `t.chat:3: expected`}},
		{"a long line is cut", "> Ada: hi\n" + strings.Repeat("x", 100) + "\n", []string{`got "` + strings.Repeat("x", 60) + `…"`}},
		{"nothing to run", "# only a comment\n", []string{`t.chat: no person's line ("> Name: text"): nothing to run`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.chat", strings.NewReader(tt.src))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
