package agents

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/internal/clip"
)

// endToken is the token that asks for a conclusion (endSpan says where
// it counts).
const endToken = ":end:"

// truncatedMark ends a text cut to the message-size cap.
const truncatedMark = turn.TruncatedMark

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

// stripEnd removes the endTokens of s that count (endSpan), tidying the
// spaces they leave ("Done. :end:" → "Done."), and reports whether there
// was one. An :end: inside a sentence ("no :end: yet") is text and stays.
func stripEnd(s string) (string, bool) {
	had := false
	for {
		a, b := endSpan(s)
		if a < 0 {
			break
		}
		had = true
		s = joinTidy(s[:a], s[b:])
	}
	if !had {
		return s, false
	}
	return strings.TrimSpace(s), true
}

// hasEnd reports whether s holds an endToken that counts.
func hasEnd(s string) bool {
	a, _ := endSpan(s)
	return a >= 0
}

// endWrappers may surround the token: markdown emphasis, code and quotes.
const endWrappers = "*_~`\"'"

// endSpan finds the last endToken of s that counts, with what wraps it:
// in any case, with markdown emphasis, backticks or quotes around it,
// when nothing with a letter or digit follows it in s (the reply's last
// token, a signature emoji aside) or it stands alone on its line. It
// returns the byte span (the whole line when the token is alone on it),
// or -1, -1. An :end: glued to a word ("a:end:b")
// or inside a sentence is text.
func endSpan(s string) (int, int) {
	low := lowerASCII(s)
	for to := len(low); ; {
		i := strings.LastIndex(low[:to], endToken)
		if i < 0 {
			return -1, -1
		}
		to = i
		a, b := i, i+len(endToken)
		for a > 0 && strings.IndexByte(endWrappers, s[a-1]) >= 0 {
			a--
		}
		for b < len(s) && strings.IndexByte(endWrappers, s[b]) >= 0 {
			b++
		}
		if r, _ := utf8.DecodeLastRuneInString(s[:a]); a > 0 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			continue
		}
		lineStart := strings.LastIndexByte(s[:a], '\n') + 1
		lineEnd := len(s)
		if k := strings.IndexByte(s[b:], '\n'); k >= 0 {
			lineEnd = b + k
		}
		if strings.TrimSpace(s[lineStart:a]) == "" && strings.TrimSpace(s[b:lineEnd]) == "" {
			return lineStart, min(lineEnd+1, len(s)) // the whole line goes
		}
		if !hasWords(s[b:]) {
			return a, b
		}
		if strings.TrimSpace(s[lineStart:a]) == "" && !hasWords(s[b:lineEnd]) {
			return a, b
		}
	}
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
