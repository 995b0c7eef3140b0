package bot

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// testNames is a directory for normalisation tests.
func testNames(kind byte, id string) (string, bool) {
	names := map[string]string{"@U1": "Ada Lovelace", "@UBOT": "conclave", "#C2": "claims"}
	name, ok := names[string(kind)+id]
	return name, ok
}

func TestNormalizeText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello world", "hello world"},
		{"user", "hi <@U1>!", "hi @Ada Lovelace!"},
		{"own bot", "<@UBOT> help", "@conclave help"},
		{"user with label, unknown", "<@U2|bob> there", "@bob there"},
		{"user unknown", "<@U3>", "@U3"},
		{"channel with name", "see <#C1|general>", "see #general"},
		{"channel looked up", "see <#C2>", "see #claims"},
		{"channel unknown", "see <#C9>", "see #C9"},
		{"link with label", "read <https://example.com/a|the docs>", "read the docs (https://example.com/a)"},
		{"bare link", "<https://example.com/a>", "https://example.com/a"},
		{"auto-linked host", "go to <http://example.com|example.com>", "go to example.com"},
		{"auto-linked agent name", "ask <http://elen.acme.137.protocol6022.eth|elen.acme.137.protocol6022.eth>",
			"ask elen.acme.137.protocol6022.eth"},
		{"mailto", "<mailto:ada@example.com|ada@example.com>", "ada@example.com"},
		{"disguised link", "<http://evil.example|safe.example>", "safe.example (http://evil.example)"},
		{"entities in link", "<https://x.example/?a=1&amp;b=2|A &amp; B>", "A & B (https://x.example/?a=1&b=2)"},
		{"here", "<!here> look", "@here look"},
		{"channel ping", "<!channel>", "@channel"},
		{"everyone", "<!everyone>", "@everyone"},
		{"user group", "<!subteam^S1|@claims-team> please", "@claims-team please"},
		{"user group without label", "<!subteam^S1>", "@S1"},
		{"date", "<!date^1392734382^{date_num}|2014-02-18>", "2014-02-18"},
		{"entities", "a &amp; b &lt;c&gt;", "a & b <c>"},
		{"entities once", "&amp;lt;", "&lt;"},
		{"other entities kept", "&quot;hi&quot;", "&quot;hi&quot;"},
		{"stray open", "x <y", "x <y"},
		{"escaped then markup", "1 &lt; 2 <@U1>", "1 < 2 @Ada Lovelace"},
		{"nested open", "a <b <@U1>", "a <b @Ada Lovelace"},
		{"newline inside", "a <b\nc> d", "a <b\nc> d"},
		{"empty markup", "a <> b", "a <> b"},
		{"template braces stay", "{{ .Secret }} &amp; {{end}}", "{{ .Secret }} & {{end}}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeText(tt.in, testNames); got != tt.want {
				t.Errorf("normalizeText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEscapeSlack(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"channel ping", "hey <!channel>", "hey &lt;!channel&gt;"},
		{"here ping", "<!here|here>", "&lt;!here|here&gt;"},
		{"user ping", "ask <@U123>", "ask &lt;@U123&gt;"},
		{"user group", "<!subteam^S1>", "&lt;!subteam^S1&gt;"},
		{"disguised link", "<http://evil|safe>", "&lt;http://evil|safe&gt;"},
		{"ampersand", "R&D &amp; more", "R&amp;D &amp;amp; more"},
		{"comparison", "x > y and a < b", "x &gt; y and a &lt; b"},
		{"quote kept", "> quoted <x>", "> quoted &lt;x&gt;"},
		{"nested quote kept", "> > deeper", "> > deeper"},
		{"indented quote kept", "  >> deeper", "  >> deeper"},
		{"indented code is not a quote", "    > code", "    &gt; code"},
		{"quote marker inside a fence", "```\n> a <b>\n```", "```\n&gt; a &lt;b&gt;\n```"},
		{"nothing to do", "plain text", "plain text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := escapeSlack(tt.in)
			if got != tt.want {
				t.Errorf("escapeSlack(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if strings.Contains(got, "<") {
				t.Errorf("escaped text %q still has '<'", got)
			}
			if back := normalizeText(got, testNames); back != tt.in {
				t.Errorf("normalising the escaped text gives %q, want the original %q", back, tt.in)
			}
		})
	}
}

func TestSpellOutLinks(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"disguised", "see [safe](http://evil.example)", "see safe (http://evil.example)"},
		{"image", "![logo](https://x.example/a.png)", "logo (https://x.example/a.png)"},
		{"label is the url", "[https://x.example](https://x.example)", "https://x.example"},
		{"label is the host", "[x.example](https://x.example)", "https://x.example"},
		{"empty label", "[](https://x.example)", "https://x.example"},
		{"title", `[docs](https://x.example "The docs")`, "docs (https://x.example)"},
		{"angle url", "[a](<https://x.example/a b>)", "a (https://x.example/a b)"},
		{"two links", "[a](http://a.example) and [b](http://b.example)", "a (http://a.example) and b (http://b.example)"},
		{"inline code not spelled out, but not a link either", "`[a](http://a.example)` and [b](http://b.example)", "`[a] (http://a.example)` and b (http://b.example)"},
		{"double backtick code", "``x [a](http://a.example) ` y``", "``x [a] (http://a.example) ` y``"},
		{"unclosed backtick", "`[a](http://a.example)", "`a (http://a.example)"},
		{"fence kept", "```\n[a](http://a.example)\n```\n[b](http://b.example)", "```\n[a](http://a.example)\n```\nb (http://b.example)"},
		{"not a link", "arr[0](x y)", "arr[0] (x y)"},
		// Forms the spelling-out does not parse are broken apart instead,
		// so the target shows.
		{"brackets in the label", "[a [b]](http://evil.example)", "[a [b]] (http://evil.example)"},
		{"parentheses in the url", "[safe](http://evil.example/a(b))", "[safe] (http://evil.example/a(b))"},
		{"code in the label", "[`x`](http://evil.example)", "[`x`] (http://evil.example)"},
		{"label over two lines", "[safe\nlabel](http://evil.example)", "[safe\nlabel] (http://evil.example)"},
		{"reference link", "[safe][1]\n\n[1]: http://evil.example", "[safe][1]\n\n[1] : http://evil.example"},
		{"shortcut reference", "[safe]\n\n  [safe]: <http://evil.example>", "[safe]\n\n  [safe] : <http://evil.example>"},
		{"definition in a quote", "[safe]\n\n> [safe]: http://evil.example", "[safe]\n\n> [safe] : http://evil.example"},
		// A fence only one reading of Markdown sees protects nothing.
		{"fence closed inside a list item", "- ```\n  x\n  ```\n[safe](http://evil.example)\n```",
			"- ```\n  x\n  ```\nsafe (http://evil.example)\n```"},
		{"backticks inside a tilde fence", "~~~\n```\n~~~\n[safe](http://evil.example)\n```",
			"~~~\n```\n~~~\nsafe (http://evil.example)\n```"},
		{"tilde fence is not code", "~~~\n[safe](http://evil.example)\n~~~", "~~~\nsafe (http://evil.example)\n~~~"},
		{"fence in a quote is not code", "> ```\n> [safe](http://evil.example)\n> ```", "> ```\n> safe (http://evil.example)\n> ```"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spellOutLinks(tt.in); got != tt.want {
				t.Errorf("spellOutLinks(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNameUsers(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"known user", "thanks <@U1>!", "thanks @Ada Lovelace!"},
		{"own bot", "<@UBOT> will note it", "@conclave will note it"},
		{"label when unknown", "ask <@U2|bob>", "ask @bob"},
		{"id when unknown", "ask <@W9>", "ask @W9"},
		{"not a user", "<!here> <#C2> <@ x> <@u1>", "<!here> <#C2> <@ x> <@u1>"},
		{"in inline code", "`<@U1>`", "`@Ada Lovelace`"},
		{"fenced code kept", "```\n<@U1>\n```\n<@U1>", "```\n<@U1>\n```\n@Ada Lovelace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nameUsers(tt.in, testNames); got != tt.want {
				t.Errorf("nameUsers(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSplitText(t *testing.T) {
	para := func(c string, n int) string { return strings.Repeat(c, n) }
	words := func(n int) string { return strings.TrimSpace(strings.Repeat("word ", n)) }
	fence := "```go\n" + strings.Repeat("fmt.Println(\"a line of code that is long enough\")\n", 60) + "```"
	tests := []struct {
		name string
		in   string
		max  int
		want []string // nil: only the invariants are checked
	}{
		{"short", "hello", 100, []string{"hello"}},
		{"blank", " \n\n ", 100, nil},
		{"paragraphs", para("a", 400) + "\n\n" + para("b", 400) + "\n\n" + para("c", 400), 1000,
			[]string{para("a", 400) + "\n\n" + para("b", 400), para("c", 400)}},
		{"lines", para("a", 400) + "\n" + para("b", 400) + "\n" + para("c", 400), 1000,
			[]string{para("a", 400) + "\n" + para("b", 400), para("c", 400)}},
		{"late line beats early paragraph", para("a", 100) + "\n\n" + para("b", 700) + "\n" + para("c", 400), 1000,
			[]string{para("a", 100) + "\n\n" + para("b", 700), para("c", 400)}},
		{"sentences", strings.Repeat("This is one sentence. ", 60), 500, nil},
		{"no spaces", para("x", 2500), 1000, []string{para("x", 1000), para("x", 1000), para("x", 500)}},
		{"entities stay whole", strings.Repeat("&amp;", 300), 998, nil},
		{"characters stay whole", strings.Repeat("é", 1000), 999, nil},
		{"fence that fits is not cut", para("a", 600) + "\n\n```\ncode line\nmore code\n```\n" + para("b", 600), 1000,
			[]string{para("a", 600), "```\ncode line\nmore code\n```\n" + para("b", 600)}},
		{"long fence is closed and reopened", "Intro.\n\n" + fence + "\n\nOutro.", 1000, nil},
		{"unterminated fence", "```\n" + strings.Repeat("code code code\n", 200), 1000, nil},
		{"words", words(600), 1000, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitText(tt.in, tt.max)
			checkSplit(t, tt.in, got, tt.max)
			if tt.want != nil {
				if len(got) != len(tt.want) {
					t.Fatalf("got %d parts %q, want %d", len(got), abbreviate(got), len(tt.want))
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Errorf("part %d = %q, want %q", i, abbreviate(got[i:i+1]), abbreviate(tt.want[i:i+1]))
					}
				}
			}
		})
	}
}

// checkSplit holds for every split: checkParts, code fences kept balanced,
// and the parts together say what the text said.
func checkSplit(t *testing.T, in string, parts []string, limit int) {
	t.Helper()
	checkParts(t, in, parts, limit)
	for i, p := range parts {
		if !endsInFence(in) && endsInFence(p) {
			t.Errorf("part %d leaves a code fence open", i)
		}
	}
	if got, want := contentOf(strings.Join(parts, "\n")), contentOf(in); got != want {
		t.Errorf("the parts do not say what the text said:\n got %q\nwant %q", abbreviate([]string{got}), abbreviate([]string{want}))
	}
}

// checkParts holds for any text: parts fit, are not blank, and keep whole
// characters and entities.
func checkParts(t *testing.T, in string, parts []string, limit int) {
	t.Helper()
	for i, p := range parts {
		if len(p) > limit {
			t.Errorf("part %d is %d bytes, over %d", i, len(p), limit)
		}
		if strings.TrimSpace(p) == "" {
			t.Errorf("part %d is blank", i)
		}
		if utf8.ValidString(in) && !utf8.ValidString(p) {
			t.Errorf("part %d splits a character", i)
		}
		if strings.Count(in, "&") == strings.Count(in, "&amp;") && strings.Count(p, "&") != strings.Count(p, "&amp;") {
			t.Errorf("part %d splits an entity: …%q", i, p[max(0, len(p)-8):])
		}
	}
}

func endsInFence(s string) bool {
	lines := scanLines(s)
	return lines[len(lines)-1].openAfter
}

// contentOf is a text without white space and without fence delimiter
// lines (which a split may add).
func contentOf(s string) string {
	var b strings.Builder
	for _, ln := range scanLines(s) {
		line := s[ln.start:ln.end]
		if _, _, ok := fenceLine(line, false); ok {
			continue
		}
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	return b.String()
}

func abbreviate(parts []string) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		if len(p) > 60 {
			p = p[:30] + "…" + p[len(p)-30:]
		}
		out[i] = p
	}
	return out
}

func TestSplitLongFenceReopensWithLanguage(t *testing.T) {
	code := strings.Repeat("x := compute(a, b) // a line of Go code\n", 80)
	parts := splitText("```go\n"+code+"```", 1000)
	if len(parts) < 3 {
		t.Fatalf("got %d parts, want the fence split in several", len(parts))
	}
	for i, p := range parts {
		if !strings.HasPrefix(p, "```go\n") {
			t.Errorf("part %d does not open the block again: %q", i, abbreviate([]string{p}))
		}
		if !strings.HasSuffix(p, "\n```") {
			t.Errorf("part %d does not close the block: %q", i, abbreviate([]string{p}))
		}
	}
}

func BenchmarkNormalizeText(b *testing.B) {
	msg := "Hi <@U1>, can <http://elen.acme.137.protocol6022.eth|elen.acme.137.protocol6022.eth> look at claim C45653 " +
		"in <#C2>? Details: <https://x.example/claims?id=1&amp;v=2|the claim> &amp; the scan."
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		normalizeText(msg, testNames)
	}
}

func BenchmarkPrepareReply(b *testing.B) {
	var sb strings.Builder
	for i := range 60 {
		sb.WriteString("A paragraph about the claim, with a [link](https://x.example/a) and a < b & c. ")
		sb.WriteString(strings.Repeat("More words follow here. ", 15))
		sb.WriteString("\n\n")
		if i%20 == 0 {
			sb.WriteString("```go\n" + strings.Repeat("if a < b && c > d { return }\n", 20) + "```\n\n")
		}
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		splitText(escapeMarkdown(spellOutLinks(text)), blockLimit)
	}
}

// Code in a markdown block shows its characters as written (Markdown
// decodes no entity in code); everything outside code is escaped, and in
// code only what would open a Slack control sequence is broken, invisibly.
func TestEscapeMarkdownKeepsCode(t *testing.T) {
	const zw = "\u200b"
	tests := []struct {
		name, in, want string
	}{
		{"fenced code as written", "```go\nif a < b && c > d {}\n```", "```go\nif a < b && c > d {}\n```"},
		{"html in a fence", "```\n<!DOCTYPE html>\n<p class=\"x\">a &amp; b</p>\n```", "```\n<!DOCTYPE html>\n<p class=\"x\">a &amp; b</p>\n```"},
		{"inline code as written", "use `a < b && c > d` here", "use `a < b && c > d` here"},
		{"generics inline", "a `map<string, int>` & more", "a `map<string, int>` &amp; more"},
		{"prose around code escaped", "x < y `<b>` z > w", "x &lt; y `<b>` z &gt; w"},
		{"double backticks", "``a ` <b>`` <c>", "``a ` <b>`` &lt;c&gt;"},
		{"ping in a fence broken", "```\n<!channel> <!here|h> <!subteam^S1>\n```", "```\n<" + zw + "!channel> <" + zw + "!here|h> <" + zw + "!subteam^S1>\n```"},
		{"mention in inline code broken", "see `<@U1>` and `<#C1|x>`", "see `<" + zw + "@U1>` and `<" + zw + "#C1|x>`"},
		{"disguised link in code broken", "`<http://evil|safe>` `<mailto:a@b>`", "`<" + zw + "http://evil|safe>` `<" + zw + "mailto:a@b>`"},
		{"nested token broken", "`<<@U1>>`", "`<<" + zw + "@U1>>`"},
		{"token closed after the span broken", "`<http`://evil|x> y", "`<" + zw + "http`://evil|x&gt; y"},
		{"tilde fence is not surely code", "~~~\n<x> & y\n~~~", "~~~\n&lt;x&gt; &amp; y\n~~~"},
		{"fence in a list item is not surely code", "- ```\n  <x>\n  ```", "- ```\n  &lt;x&gt;\n  ```"},
		{"unclosed inline code is prose", "a `b <c>", "a `b &lt;c&gt;"},
		{"info string escaped", "```<x>\ncode <y>\n```", "```&lt;x&gt;\ncode <y>\n```"},
		{"quote kept outside code", "> quoted `<x>` <y>", "> quoted `<x>` &lt;y&gt;"},
		{"prose pings escaped", "hey <!channel> <@U1>", "hey &lt;!channel&gt; &lt;@U1&gt;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := escapeMarkdown(tt.in)
			if got != tt.want {
				t.Errorf("escapeMarkdown(%q)\n = %q\nwant %q", tt.in, got, tt.want)
			}
			checkNoSlackToken(t, got)
			fallback := escapeLeftovers(got)
			if strings.Contains(fallback, "<") {
				t.Errorf("fallback %q holds '<'", fallback)
			}
			// The fallback reads as the text did (an entity the model wrote
			// in code reads as its character there).
			back := strings.ReplaceAll(normalizeText(fallback, testNames), zw, "")
			if back != unescapeEntities.Replace(tt.in) {
				t.Errorf("the fallback %q reads %q, want the original %q", fallback, back, tt.in)
			}
		})
	}
}

// checkNoSlackToken fails when a Slack control sequence could form in s:
// every '<' that would open one must be followed by a zero-width space.
func checkNoSlackToken(t testing.TB, s string) {
	t.Helper()
	for _, loc := range slackToken.FindAllStringIndex(s, -1) {
		if !strings.HasPrefix(s[loc[0]+1:], "\u200b") {
			t.Errorf("a Slack control sequence %q can form in %q", s[loc[0]:loc[1]], s)
		}
	}
}
