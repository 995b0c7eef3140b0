package agents

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conclavehq/conclave/agents/turn"
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
		low := turn.LowerASCII(text)
		last := -1
		for _, a := range got {
			if seen[a] {
				t.Fatalf("%q found twice", a)
			}
			seen[a] = true
			first := -1
			for _, f := range forms {
				if f.Agent != a {
					continue
				}
				for from := 0; ; {
					i := strings.Index(low[from:], f.Form)
					if i < 0 {
						break
					}
					i += from
					if mentionStarts(low, i) && mentionEnds(low, i+len(f.Form)) {
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
		if got := turn.CapText(tt.in, tt.max); got != tt.want {
			t.Errorf("CapText(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
	huge := strings.Repeat("x", 40000)
	if got := turn.CapText(huge, 12000); utf8.RuneCountInString(got) != 12000+utf8.RuneCountInString(truncatedMark) {
		t.Errorf("40,000 runes capped to %d", utf8.RuneCountInString(got))
	}
}
