package turn

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NameForm is one lowercase spelling of a registered agent's name (a name
// under a base domain can be written under any configured base) and the
// agent's canonical name.
type NameForm struct {
	Form, Agent string
}

// FindMentions returns the agents whose names appear in text, each once, in
// the order their names first appear. A name counts only between mention
// boundaries: before it the start of the text, white space, "@", "<", "|",
// "(" or punctuation other than ".", "-", "_"; after it nothing of
// [a-z0-9-] and no "." followed by a letter or digit. Matching ignores ASCII
// case only.
func FindMentions(text string, forms []NameForm) []string {
	low := LowerASCII(text)
	first := make(map[string]int)
	for _, f := range forms {
		if f.Form == "" {
			continue
		}
		for from := 0; from < len(low); {
			i := strings.Index(low[from:], f.Form)
			if i < 0 {
				break
			}
			i += from
			if MentionStarts(low, i) && MentionEnds(low, i+len(f.Form)) {
				if p, ok := first[f.Agent]; !ok || i < p {
					first[f.Agent] = i
				}
				break
			}
			from = i + 1
		}
	}
	found := make([]string, 0, len(first))
	for a := range first {
		found = append(found, a)
	}
	sort.Slice(found, func(i, j int) bool {
		if first[found[i]] != first[found[j]] {
			return first[found[i]] < first[found[j]]
		}
		return found[i] < found[j]
	})
	return found
}

// MentionStarts reports whether a name may start at byte i of s.
func MentionStarts(s string, i int) bool {
	if i == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	switch r {
	case '.', '-', '_':
		return false
	case '@', '<', '|', '(':
		return true
	}
	return unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsSymbol(r)
}

// MentionEnds reports whether a name may end at byte j of s.
func MentionEnds(s string, j int) bool {
	if j >= len(s) {
		return true
	}
	if IsLabelByte(s[j]) || ('A' <= s[j] && s[j] <= 'Z') {
		return false
	}
	if s[j] == '.' {
		r, _ := utf8.DecodeRuneInString(s[j+1:])
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// IsLabelByte reports whether c may be part of a name's label.
func IsLabelByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-'
}
