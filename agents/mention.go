package agents

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
)

// nameForm is one lowercase spelling of a registered agent's name (a name
// under a base domain can be written under any configured base) and the
// agent's canonical name.
type nameForm struct {
	form, agent string
}

// findMentions returns the agents whose names appear in text, each once, in
// the order their names first appear. A name counts only between mention
// boundaries: before it the start of the text, white space, "@", "<", "|",
// "(" or punctuation other than ".", "-", "_"; after it nothing of
// [a-z0-9-] and no "." followed by a letter or digit. Matching ignores ASCII
// case only.
func findMentions(text string, forms []nameForm) []string {
	low := turn.LowerASCII(text)
	first := make(map[string]int)
	for _, f := range forms {
		if f.form == "" {
			continue
		}
		for from := 0; from < len(low); {
			i := strings.Index(low[from:], f.form)
			if i < 0 {
				break
			}
			i += from
			if mentionStarts(low, i) && mentionEnds(low, i+len(f.form)) {
				if p, ok := first[f.agent]; !ok || i < p {
					first[f.agent] = i
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

// mentionStarts reports whether a name may start at byte i of s.
func mentionStarts(s string, i int) bool {
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

// mentionEnds reports whether a name may end at byte j of s.
func mentionEnds(s string, j int) bool {
	if j >= len(s) {
		return true
	}
	if isLabelByte(s[j]) || ('A' <= s[j] && s[j] <= 'Z') {
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

func isLabelByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-'
}

// attemptedNames returns the lowercase names in text that look like agent
// names: "<label>.<label>.<digits>.<base>" for a configured base, or
// "@<name>.eth". Registered or not; the caller tells them apart.
func attemptedNames(text string, bases []string) []string {
	low := turn.LowerASCII(text)
	var out []string
	seen := make(map[string]bool)
	for i := 0; i < len(low); {
		if !isLabelByte(low[i]) || !mentionStarts(low, i) {
			i++
			continue
		}
		j := i
		for j < len(low) {
			if isLabelByte(low[j]) || low[j] == '.' && j+1 < len(low) && isLabelByte(low[j+1]) {
				j++
				continue
			}
			break
		}
		tok := low[i:j]
		// "@name.eth", but not an e-mail address.
		at := i > 0 && low[i-1] == '@' && (i == 1 || !isLabelByte(low[i-2]) && low[i-2] != '.' && low[i-2] != '_')
		if mentionEnds(low, j) && !seen[tok] && (agentShaped(tok, bases) || at && ethShaped(tok)) {
			seen[tok] = true
			out = append(out, tok)
		}
		i = j
	}
	return out
}

// agentShaped reports whether name is <label>.<label>.<digits>.<base>.
func agentShaped(name string, bases []string) bool {
	for _, base := range bases {
		prefix, ok := strings.CutSuffix(name, "."+base)
		if !ok {
			continue
		}
		labels := strings.Split(prefix, ".")
		if len(labels) != 3 || !ens.ValidLabel(labels[0]) || !ens.ValidLabel(labels[1]) || !allDigits(labels[2]) {
			continue
		}
		return true
	}
	return false
}

// ethShaped reports whether name is a dotted name of valid labels under .eth.
func ethShaped(name string) bool {
	labels := strings.Split(name, ".")
	if len(labels) < 2 || labels[len(labels)-1] != "eth" {
		return false
	}
	for _, l := range labels {
		if !ens.ValidLabel(l) {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
