package agents

import (
	"strings"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
)

// The name matching rules live in agents/turn; these are their engine
// names.
type nameForm = turn.NameForm

var (
	findMentions  = turn.FindMentions
	mentionStarts = turn.MentionStarts
	mentionEnds   = turn.MentionEnds
	isLabelByte   = turn.IsLabelByte
)

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
