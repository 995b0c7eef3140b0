package agents

import (
	"strings"
	"unicode/utf8"
)

// endToken is the literal, case-sensitive token that asks for a conclusion.
const endToken = ":end:"

// truncatedMark ends a text cut to the message-size cap.
const truncatedMark = " … [truncated]"

// capText keeps the first max runes of s and marks the cut, so one huge
// Slack message cannot blow a prompt's budget. max <= 0 means no cap.
func capText(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + truncatedMark
		}
		n++
	}
	return s
}

// stripEnd removes every endToken from s, tidying the spaces it leaves, and
// reports whether there was one.
func stripEnd(s string) (string, bool) {
	if !strings.Contains(s, endToken) {
		return s, false
	}
	var b strings.Builder
	for {
		i := strings.Index(s, endToken)
		if i < 0 {
			b.WriteString(s)
			break
		}
		before, after := s[:i], s[i+len(endToken):]
		// "a :end: b" leaves "a b", not "a  b".
		if strings.HasSuffix(before, " ") || strings.HasSuffix(before, "\t") {
			after = strings.TrimLeft(after, " \t")
		}
		if after == "" || after[0] == '\n' || after[0] == '\r' {
			before = strings.TrimRight(before, " \t")
		}
		b.WriteString(before)
		s = after
	}
	return strings.TrimSpace(b.String()), true
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
