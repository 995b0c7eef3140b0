package agents

import (
	"strings"
	"unicode"

	"github.com/conclavehq/conclave/agents/clip"
)

// endToken is the literal, case-sensitive token that asks for a conclusion.
const endToken = ":end:"

// truncatedMark ends a text cut to the message-size cap.
const truncatedMark = " … [truncated]"

// capText keeps the first max runes of s and marks the cut, so one huge
// Slack message cannot blow a prompt's budget. max <= 0 means no cap.
func capText(s string, max int) string {
	return clip.Runes(s, max, truncatedMark)
}

// firstLine is the first line of s, capped at 300 runes: what a log or
// a model reads of an error.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return capText(s, 300)
}

// stripEnd removes every endToken from s, tidying the spaces it leaves
// ("a :end: b" → "a b", "done :end:, bye" → "done, bye"), and reports
// whether there was one.
func stripEnd(s string) (string, bool) {
	if !strings.Contains(s, endToken) {
		return s, false
	}
	for {
		i := strings.Index(s, endToken)
		if i < 0 {
			break
		}
		s = joinTidy(s[:i], s[i+len(endToken):])
	}
	return strings.TrimSpace(s), true
}

// joinTidy joins the text around a removed token: the blanks on both sides
// become one space, or none at a line's edge, before closing punctuation,
// or where the token touched both neighbours.
func joinTidy(before, after string) string {
	b := strings.TrimRight(before, " \t")
	a := strings.TrimLeft(after, " \t")
	spaced := len(b) < len(before) || len(a) < len(after)
	if !spaced || b == "" || a == "" || strings.HasSuffix(b, "\n") ||
		strings.ContainsRune("\r\n.,;!?)]}", rune(a[0])) {
		return b + a
	}
	return b + " " + a
}

// hasWords reports whether s holds a letter or a digit: a reply of only
// emoji, symbols and punctuation ("🧭", "👍 ✅") says nothing worth a post.
func hasWords(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// lowerASCII lowercases ASCII letters only, keeping byte offsets: ENS names
// are ASCII, and Unicode case folding would let look-alikes (the Kelvin
// sign) match a name.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
