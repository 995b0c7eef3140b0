package agents

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Names of the claims desk (as in the behaviour tests' harness) that the
// white-box tests of parsing and of the view use.
const (
	elen = "elen.acme.137.protocol6022.eth"
	cora = "cora.acme.137.protocol6022.eth"
	tina = "tina.acme.137.protocol6022.eth"
)

// TestConversationID: the id is the UUIDv5 of team/channel/thread_ts in
// the URL namespace; the pinned value is what earlier releases stored, so
// it must never change.
func TestConversationID(t *testing.T) {
	a := ConversationID("T1", "C1", "1700000000.000100")
	if a != ConversationID("T1", "C1", "1700000000.000100") || a == ConversationID("T1", "C1", "1700000000.000200") {
		t.Error("conversation ids are not stable per thread")
	}
	if want := "9cf046f1-17d8-5e07-a917-f702880e0f23"; a != want {
		t.Errorf("ConversationID(T1, C1, 1700000000.000100) = %s, want %s (UUIDv5 of team/channel/thread_ts)", a, want)
	}
}

func TestGroupSessionID(t *testing.T) {
	sum := sha256.Sum256([]byte("a.acme.1.6022.eth\nb.acme.1.6022.eth"))
	want := "grp-" + hex.EncodeToString(sum[:])[:32]
	tests := []struct {
		name  string
		names []string
	}{
		{"sorted", []string{"a.acme.1.6022.eth", "b.acme.1.6022.eth"}},
		{"unsorted", []string{"b.acme.1.6022.eth", "a.acme.1.6022.eth"}},
		{"case and duplicates", []string{"B.acme.1.6022.eth", "a.acme.1.6022.eth", "b.ACME.1.6022.eth", " a.acme.1.6022.eth "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GroupSessionID(tt.names); got != want {
				t.Errorf("GroupSessionID(%q) = %s, want %s", tt.names, got, want)
			}
		})
	}
	if len(want) != 36 {
		t.Errorf("id length %d, want 36", len(want))
	}
}

func testForms() []nameForm {
	e := New(Options{}, Deps{})
	return e.forms([]string{elen, cora, "alice.eth"})
}

func TestFindMentions(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"hi " + cora, []string{cora}},
		{"@" + cora + " hi", []string{cora}},
		{"HI CORA.ACME.137.PROTOCOL6022.ETH!", []string{cora}},
		{"short name cora does not count", nil},
		{"cora.acme.137.6022.eth, the other base", []string{cora}},
		{"<https://x.example/" + cora + "|link>", []string{cora}},
		{"label (" + cora + ")", []string{cora}},
		{"|" + cora + ">", []string{cora}},
		{"\"" + cora + "\"", []string{cora}},
		{cora + ".", []string{cora}},
		{cora + "...", []string{cora}},
		{cora + ":", []string{cora}},
		{cora + "_x", []string{cora}},
		{cora + "s", nil},
		{cora + "-x", nil},
		{cora + ".com", nil},
		{cora + ".é", nil},
		{"x" + cora, nil},
		{"x." + cora, nil},
		{"x-" + cora, nil},
		{"x_" + cora, nil},
		{"é" + cora, nil},
		{"💬" + cora, []string{cora}},
		{cora + " and " + elen + " and " + cora, []string{cora, elen}},
		{elen + " then " + cora, []string{elen, cora}},
		{cora + "s but later " + cora, []string{cora}},
		{"ask @alice.eth", []string{"alice.eth"}},
		{"ask alice.eth.", []string{"alice.eth"}},
		{"ask malice.eth", nil},
		{"\u212a" + "ora.acme.137.protocol6022.eth", nil}, // Kelvin sign is not k
		{"", nil},
	}
	forms := testForms()
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := findMentions(tt.text, forms); !slices.Equal(got, tt.want) {
				t.Errorf("findMentions(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestAttemptedNames(t *testing.T) {
	bases := []string{"protocol6022.eth", "6022.eth"}
	tests := []struct {
		text string
		want []string
	}{
		{"ask zed.acme.137.protocol6022.eth please", []string{"zed.acme.137.protocol6022.eth"}},
		{"ask Zed.Acme.80002.6022.eth", []string{"zed.acme.80002.6022.eth"}},
		{"ask @bob.eth", []string{"bob.eth"}},
		{"ask bob.eth", nil},
		{"zed.acme.x1.protocol6022.eth", nil},
		{"a.zed.acme.137.protocol6022.eth", nil},
		{"zed.acme.137.protocol6022.eth.com", nil},
		{"@bob.eth and @bob.eth", []string{"bob.eth"}},
		{"mail bob@bob.eth", nil},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := attemptedNames(tt.text, bases); !slices.Equal(got, tt.want) {
				t.Errorf("attemptedNames(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func FuzzFindMentions(f *testing.F) {
	for _, s := range []string{"hi " + cora, "<@U1|x> " + elen + ".", cora + cora, "@alice.eth", "é" + cora, cora + ".é"} {
		f.Add(s)
	}
	forms := testForms()
	f.Fuzz(func(t *testing.T, text string) {
		got := findMentions(text, forms)
		seen := map[string]bool{}
		low := lowerASCII(text)
		last := -1
		for _, a := range got {
			if seen[a] {
				t.Fatalf("%q found twice", a)
			}
			seen[a] = true
			first := -1
			for _, f := range forms {
				if f.agent != a {
					continue
				}
				for from := 0; ; {
					i := strings.Index(low[from:], f.form)
					if i < 0 {
						break
					}
					i += from
					if mentionStarts(low, i) && mentionEnds(low, i+len(f.form)) {
						if first < 0 || i < first {
							first = i
						}
						break
					}
					from = i + 1
				}
			}
			if first < 0 {
				t.Fatalf("%q reported but not at a boundary in %q", a, text)
			}
			if first < last {
				t.Fatalf("mentions out of order in %q: %q", text, got)
			}
			last = first
		}
		// A name set apart by spaces is always found.
		if !slices.Contains(findMentions(text+" "+cora+" ", forms), cora) {
			t.Fatalf("%q not found after %q", cora, text)
		}
		attemptedNames(text, []string{"protocol6022.eth", "6022.eth"})
	})
}

func TestParseThreading(t *testing.T) {
	tests := []struct {
		name, raw string
		want      threadingReply
		outcome   string
	}{
		{"direct", `{"session": "C45653", "message": "on it"}`, threadingReply{"C45653", "on it"}, threadingOK},
		{"fenced", "```json\n{\"session\": \"C1\", \"message\": \"\"}\n```", threadingReply{Session: "C1"}, threadingOK},
		{"bare fence", "```\n{\"session\": \"C1\"}\n```", threadingReply{Session: "C1"}, threadingOK},
		{"prose around", "Sure! Here it is:\n{\"session\": \"C1\", \"message\": \"hi\"}\nHope this helps.", threadingReply{"C1", "hi"}, threadingOK},
		{"prose before a fence", "Here is the JSON:\n```json\n{\"session\": \"C1\"}\n```", threadingReply{Session: "C1"}, threadingOK},
		{"braces inside strings", `{"session": "C1", "message": "use {x} and }"}`, threadingReply{"C1", "use {x} and }"}, threadingOK},
		{"trailing comma", `{"session": "C1", "message": "hi",}`, threadingReply{"C1", "hi"}, threadingRepaired},
		{"single quotes", `{'session': 'C1'}`, threadingReply{Session: "C1"}, threadingRepaired},
		{"truncated", `{"session": "C45653", "message": "Looking at the cla`, threadingReply{"C45653", "Looking at the cla"}, threadingRepaired},
		{"truncated in a fence", "```json\n{\"session\": \"C2\", \"message\": \"x", threadingReply{"C2", "x"}, threadingRepaired},
		{"number session", `{"session": 45653, "message": null}`, threadingReply{Session: "45653"}, threadingOK},
		{"exponent session", `{"session": 1e3}`, threadingReply{Session: "1000"}, threadingOK},
		{"null session", `{"session": null, "message": "who?"}`, threadingReply{Message: "who?"}, threadingOK},
		{"extra keys", `{"session": "C1", "confidence": 0.9}`, threadingReply{Session: "C1"}, threadingOK},
		{"array root", `[{"session": "C1"}]`, threadingReply{Session: "C1"}, threadingOK},
		{"bool session", `{"session": true}`, threadingReply{}, threadingFailed},
		{"object message", `{"session": "C1", "message": {"text": "x"}}`, threadingReply{}, threadingFailed},
		{"plain text", "I cannot help with that.", threadingReply{}, threadingFailed},
		{"empty", "", threadingReply{}, threadingFailed},
		{"string root", `"C1"`, threadingReply{}, threadingFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, outcome, err := parseThreading(tt.raw)
			if outcome != tt.outcome {
				t.Fatalf("outcome %q (err %v), want %q", outcome, err, tt.outcome)
			}
			if (err != nil) != (tt.outcome == threadingFailed) {
				t.Errorf("err = %v with outcome %q", err, outcome)
			}
			if got != tt.want {
				t.Errorf("reply %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseThreading(f *testing.F) {
	for _, s := range []string{
		`{"session": "C1", "message": "x"}`, "```json\n{\"session\": 1}\n```", `{"session": "C1",`,
		"text {\"a\": [1, {\"b\": \"}\"}]} more", `{'session': None}`, "{{{{", `"\u0000"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, outcome, err := parseThreading(raw)
		switch outcome {
		case threadingOK, threadingRepaired:
			if err != nil {
				t.Fatalf("outcome %q with error %v", outcome, err)
			}
		case threadingFailed:
			if err == nil || r != (threadingReply{}) {
				t.Fatalf("failed outcome with reply %+v, err %v", r, err)
			}
		default:
			t.Fatalf("unknown outcome %q", outcome)
		}
		if !utf8.ValidString(raw) {
			return
		}
		if outcome == threadingOK && strings.TrimSpace(raw) != "" {
			if _, err := decodeThreading(strings.TrimSpace(raw)); err == nil && outcome != threadingOK {
				t.Fatal("valid JSON not read as ok")
			}
		}
	})
}

func TestMatchSession(t *testing.T) {
	existing := []string{"C45653", "claim-7781", "ACME Corp", "acme-corp", "Dupont SA", "C45654"}
	tests := []struct {
		key, want, kind string
	}{
		{"C45653", "C45653", matchExact},
		{"c45653", "C45653", matchCase},
		{"acme corp", "ACME Corp", matchCase},
		{"Claim 7781", "claim-7781", matchFuzzy},
		{"C-45653", "C45653", matchFuzzy},
		{"C45655", "", ""},
		{"C4565", "", ""},
		{"Dupond SA", "Dupont SA", matchFuzzy},
		{"Acme_Corp", "ACME Corp", matchFuzzy}, // tie at 1.0: alphabetical
		{"something else", "", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, kind, _ := matchSession(tt.key, existing, 0.75)
			if got != tt.want || kind != tt.kind {
				t.Errorf("matchSession(%q) = %q (%s), want %q (%s)", tt.key, got, kind, tt.want, tt.kind)
			}
		})
	}
}

func TestCapText(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello!", 5, "hello … [truncated]"},
		{"héllo wörld", 4, "héll … [truncated]"},
		{"abc", 0, "abc"},
	}
	for _, tt := range tests {
		if got := capText(tt.in, tt.max); got != tt.want {
			t.Errorf("capText(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
	huge := strings.Repeat("x", 40000)
	if got := capText(huge, 12000); utf8.RuneCountInString(got) != 12000+utf8.RuneCountInString(truncatedMark) {
		t.Errorf("40,000 runes capped to %d", utf8.RuneCountInString(got))
	}
}

func TestStripEnd(t *testing.T) {
	tests := []struct {
		in, want string
		had      bool
	}{
		{"Thanks all :end:", "Thanks all", true},
		{":end:", "", true},
		{":end::end:", "", true},
		{"Thanks all :end: :end:", "Thanks all", true},
		{"Done.:end:", "Done.", true},
		{"  keep   inner  spacing ", "  keep   inner  spacing ", false},
		// A token, not a substring (SPEC §14.7): in any case, wrapped in
		// emphasis, code or quotes, last or alone on its line.
		{"All settled. :END:", "All settled.", true},
		{"All settled. **:end:**", "All settled.", true},
		{"All settled. `:end:`", "All settled.", true},
		{"All settled. \":End:\"", "All settled.", true},
		{"All settled. _:end:_ 🧭", "All settled. 🧭", true},
		{"All settled.\n:end:\n— Elen", "All settled.\n— Elen", true},
		{"line one\n  *:end:*  \nline two", "line one\nline two", true},
		{"no :end: yet, Cora is checking", "no :end: yet, Cora is checking", false},
		{"Done. :end: Bye", "Done. :end: Bye", false},
		{"a:end:b", "a:end:b", false},
		{"Done :end:, thanks", "Done :end:, thanks", false},
		{"line one\n:end: line two", "line one\n:end: line two", false},
		{":END: is not the token here", ":END: is not the token here", false},
		{"x:end:", "x:end:", false},
	}
	for _, tt := range tests {
		got, had := stripEnd(tt.in)
		if got != tt.want || had != tt.had {
			t.Errorf("stripEnd(%q) = %q, %v; want %q, %v", tt.in, got, had, tt.want, tt.had)
		}
	}
}

// What is left of an :end: reply is posted only when it says something: a
// lone signature is not.
func TestHasWords(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", false},
		{"🧭", false},
		{"👍 ✅ …", false},
		{"🧭 —", false},
		{"🧭 Done.", true},
		{"C1", true},
		{"é", true},
		{"٣", true},
	}
	for _, tt := range tests {
		if got := hasWords(tt.in); got != tt.want {
			t.Errorf("hasWords(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
