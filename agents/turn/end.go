package turn

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// EndToken is the token that asks for a conclusion (endSpan says where
// it counts).
const EndToken = ":end:"

// StripEnd removes the EndTokens of s that count (endSpan), tidying the
// spaces they leave ("Done. :end:" → "Done."), and reports whether there
// was one. An :end: inside a sentence ("no :end: yet") is text and stays.
func StripEnd(s string) (string, bool) {
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

// HasEnd reports whether s holds an EndToken that counts.
func HasEnd(s string) bool {
	a, _ := endSpan(s)
	return a >= 0
}

// endWrappers may surround the token: markdown emphasis, code and quotes.
const endWrappers = "*_~`\"'"

// endSpan finds the last EndToken of s that counts, with what wraps it:
// in any case, with markdown emphasis, backticks or quotes around it,
// when nothing with a letter or digit follows it in s (the reply's last
// token, a signature emoji aside) or it stands alone on its line. It
// returns the byte span (the whole line when the token is alone on it),
// or -1, -1. An :end: glued to a word ("a:end:b")
// or inside a sentence is text.
func endSpan(s string) (int, int) {
	low := LowerASCII(s)
	for to := len(low); ; {
		i := strings.LastIndex(low[:to], EndToken)
		if i < 0 {
			return -1, -1
		}
		to = i
		a, b := i, i+len(EndToken)
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
		if !HasWords(s[b:]) {
			return a, b
		}
		if strings.TrimSpace(s[lineStart:a]) == "" && !HasWords(s[b:lineEnd]) {
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

// HasWords reports whether s holds a letter or a digit: a reply of only
// emoji, symbols and punctuation ("🧭", "👍 ✅") says nothing worth a post.
func HasWords(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// LowerASCII lowercases ASCII letters only, keeping byte offsets: ENS names
// are ASCII, and Unicode case folding would let look-alikes (the Kelvin
// sign) match a name.
func LowerASCII(s string) string {
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
