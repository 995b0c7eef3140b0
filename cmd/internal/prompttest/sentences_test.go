package prompttest

import (
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
)

func TestSplitSentences(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"one sentence", "You are Elen.", "You are Elen."},
		{"two sentences", "You are Elen. You run the thread.", "You are Elen.\n  You run the thread."},
		{"question and exclamation", "Covered? Yes! Good.", "Covered?\n  Yes!\n  Good."},
		{"after a closing bracket", "You are Elen (elen.eth). You run it.", "You are Elen (elen.eth).\n  You run it."},
		{"after a closing quote", `Ada asks: "Covered?" Then answer.`, "Ada asks: \"Covered?\"\n  Then answer."},
		{"before a quote", `Read it. "Covered" is the word.`, "Read it.\n  \"Covered\" is the word."},
		{"before a digit", "Steps follow. 2 are left.", "Steps follow.\n  2 are left."},
		{"before an emoji", "Start each message with it. 🧭 is the mark.", "Start each message with it.\n  🧭 is the mark."},
		{"lower case after the stop", "It is done. then more.", "It is done. then more."},
		{"two spaces kept on the line", "With dates.  Today is Friday.", "With dates.  Today is Friday."},
		{"decimal", "The rate is 1.5 percent. It holds.", "The rate is 1.5 percent.\n  It holds."},
		{"URL", "See https://example.com/a.b?x=1. It explains.", "See https://example.com/a.b?x=1.\n  It explains."},
		{"e.g.", "Use a name, e.g. Claudine, to call.", "Use a name, e.g. Claudine, to call."},
		{"e.g. before a capital", "Call one, e.g. Claudine. Then wait.", "Call one, e.g. Claudine.\n  Then wait."},
		{"i.e. in brackets", "One expert (i.e. Claudine) answers.", "One expert (i.e. Claudine) answers."},
		{"title", "Ask Dr. Smith. He knows.", "Ask Dr. Smith.\n  He knows."},
		{"initial", "Ask J. Smith now.", "Ask J. Smith now."},
		{"list number", "Rules: 1. Be brief. 2. Be kind.", "Rules: 1. Be brief.\n  2. Be kind."},
		{"year ends a sentence", "Since March 2021. It covers water.", "Since March 2021.\n  It covers water."},
		{"lines kept", "First. Second.\nThird.", "First.\n  Second.\nThird."},
		{"empty lines kept", "One.\n\nTwo.", "One.\n\nTwo."},
		{"indented line escaped", "Rules:\n  - Be brief. Always.", "Rules:\n\\  - Be brief.\n  Always."},
		{"backslash line escaped", `\n is a newline.`, `\\n is a newline.`},
		{"trailing stop and space", "Done. ", "Done. "},
		{"empty", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SplitSentences(c.in)
			if got != c.want {
				t.Errorf("SplitSentences(%q) = %q, want %q", c.in, got, c.want)
			}
			if back := JoinSentences(got); back != c.in {
				t.Errorf("JoinSentences(%q) = %q, want %q", got, back, c.in)
			}
		})
	}
}

// TestSplitSentencesIsInjective: contents that differ only where a break,
// a line break or an indent could hide the difference still give different
// golden text, each joined back to itself.
func TestSplitSentencesIsInjective(t *testing.T) {
	contents := []string{
		"One. Two.",
		"One.\nTwo.",
		"One.\n  Two.",
		"One.\n Two.",
		"One.\n\\  Two.",
		"One.\n\\ Two.",
		"One.\\\n  Two.",
		"One.  Two.",
		"One.\n   Two.",
		" One. Two.",
		"\\ One. Two.",
		"  One.\nTwo.",
	}
	seen := make(map[string]string, len(contents))
	for _, c := range contents {
		text := SplitSentences(c)
		if other, ok := seen[text]; ok {
			t.Errorf("%q and %q both give %q", other, c, text)
		}
		seen[text] = c
		if back := JoinSentences(text); back != c {
			t.Errorf("JoinSentences(SplitSentences(%q)) = %q", c, back)
		}
	}
}

func FuzzSplitSentences(f *testing.F) {
	for _, s := range []string{"One. Two.", "One.\n  Two.", "\\ x. Y", "e.g. A. B? C! \"D\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if back := JoinSentences(SplitSentences(s)); back != s {
			t.Errorf("JoinSentences(SplitSentences(%q)) = %q", s, back)
		}
	})
}

// TestOneWordEditIsOneLineDiff: a word changed in one sentence of a long
// system prompt changes one line of the golden text.
func TestOneWordEditIsOneLineDiff(t *testing.T) {
	prompt := "You are Elen (elen.eth). You run this thread. Never invent an id, an amount or a date. Keep every message under 1500 characters. Start each message with 🧭."
	request := func(content string) string {
		return RenderRequest(llm.Request{Agent: "elen.eth", Role: "facilitator", Prompt: "default",
			Messages: []llm.Message{{Role: llm.RoleSystem, Content: content}}})
	}
	before, after := request(prompt), request(strings.Replace(prompt, "an amount", "a sum", 1))
	var removed, added []string
	for _, line := range strings.Split(UnifiedDiff("before", before, "after", after), "\n") {
		switch {
		case strings.HasPrefix(line, "---"), strings.HasPrefix(line, "+++"):
		case strings.HasPrefix(line, "-"):
			removed = append(removed, line)
		case strings.HasPrefix(line, "+"):
			added = append(added, line)
		}
	}
	if len(removed) != 1 || len(added) != 1 || added[0] != "+  Never invent an id, a sum or a date." {
		t.Errorf("removed %q, added %q", removed, added)
	}
}
