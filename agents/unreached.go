package agents

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// A call that reaches no one is said, not silent (SPEC §14.7): models
// call agents by their display name, by the first labels of their ENS
// name, in Slack italics or under a base that does not exist. Such a
// name triggers nobody (only a full ENS name does), and the writer is
// told how to call.

// miss is a name in a message that looks like a call and reaches no one.
type miss struct {
	wrote string    // what the message wrote
	agent ens.Agent // the registered agent it meant; zero when none
}

// hint is the notice a person gets for a miss of a registered agent's
// name.
func (x miss) hint() string {
	return fmt.Sprintf("%s reaches no one; to call %s, write %s", x.wrote, x.agent.Name, x.agent.EnsDomain)
}

// note is the history line a miss leaves for the facilitator.
func (x miss) note() string {
	if x.agent.EnsDomain == "" {
		return fmt.Sprintf("(%s reaches no one; no agent of this channel has that name)", x.wrote)
	}
	return fmt.Sprintf("(%s reaches no one; to call %s, write %s)", x.wrote, x.agent.Name, x.agent.EnsDomain)
}

// unreachedCalls finds the names in text that look like calls of an
// agent and reach no one: "@<display name>", or "<display name>," or
// ":" opening a line; a dotted name sharing its first two labels with a
// registered agent's ENS name without being one of its spellings (a
// prefix such as "claudine.acme", or a wrong base); a full name in Slack
// italics ("_…eth_", which the mention boundaries refuse); an unknown
// "….eth" name. agents are the channel's agents served, forms their
// spellings; self, the writer, and the agents text does call are left
// out. Each spelling is reported once, in order.
func unreachedCalls(text string, agents []ens.Agent, forms []nameForm, self string) []miss {
	called := make(map[string]bool)
	for _, n := range findMentions(text, forms) {
		called[n] = true
	}
	byForm := make(map[string]string, len(forms))
	for _, f := range forms {
		byForm[f.Form] = f.Agent
	}
	var out []miss
	seen := make(map[string]bool)
	add := func(wrote string, a ens.Agent) {
		key := strings.ToLower(wrote)
		if seen[key] || a.EnsDomain != "" && (a.EnsDomain == self || called[a.EnsDomain]) {
			return
		}
		seen[key] = true
		out = append(out, miss{wrote: wrote, agent: a})
	}
	low := turn.LowerASCII(text)
	for _, a := range agents {
		for _, wrote := range displayNameCalls(text, low, a.Name) {
			add(wrote, a)
		}
	}
	for i := 0; i < len(low); {
		if !isLabelByte(low[i]) {
			i++
			continue
		}
		j := i
		for j < len(low) && (isLabelByte(low[j]) || low[j] == '.' && j+1 < len(low) && isLabelByte(low[j+1])) {
			j++
		}
		tok, start := low[i:j], i
		i = j
		italic := start > 0 && low[start-1] == '_'
		if !strings.Contains(tok, ".") || !mentionEnds(low, j) || !italic && !mentionStarts(low, start) {
			continue
		}
		if agent, ok := byForm[tok]; ok {
			if italic && j < len(low) && low[j] == '_' {
				add(text[start-1:j+1], agentOf(agents, agent))
			}
			continue
		}
		if a, ok := sharesPrefix(tok, agents); ok {
			add(text[start:j], a)
			continue
		}
		if strings.HasSuffix(tok, ".eth") && ethShaped(tok) {
			add(text[start:j], ens.Agent{})
		}
	}
	return out
}

// displayNameCalls finds name used as a call in text (low is text with
// ASCII lowercased): "@name" anywhere, or "name," or "name:" opening a
// line (after blanks, markdown emphasis or a signature such as the
// facilitator's 🧭: nothing before it on the line is a letter or digit).
func displayNameCalls(text, low, name string) []string {
	n := turn.LowerASCII(strings.TrimSpace(name))
	if n == "" {
		return nil
	}
	var out []string
	for from := 0; from < len(low); {
		k := strings.Index(low[from:], n)
		if k < 0 {
			break
		}
		at, end := from+k, from+k+len(n)
		from = at + 1
		if r, _ := utf8.DecodeRuneInString(low[end:]); end < len(low) && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' && isDottedName(low[end:])) {
			continue
		}
		if at > 0 && low[at-1] == '@' {
			if at == 1 || !isLabelByte(low[at-2]) {
				out = append(out, text[at-1:end])
			}
			continue
		}
		lineStart := strings.LastIndexByte(low[:at], '\n') + 1
		rest := strings.TrimLeft(low[end:], "*_")
		if !strings.ContainsFunc(low[lineStart:at], isWordRune) && (strings.HasPrefix(rest, ",") || strings.HasPrefix(rest, ":")) {
			out = append(out, text[at:end])
		}
	}
	return out
}

// isWordRune reports whether r is a letter or a digit.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// isDottedName reports whether s starts with "." and a label: the name
// goes on as an ENS name ("cora.acme…"), which the token scan judges.
func isDottedName(s string) bool {
	return len(s) > 1 && s[0] == '.' && isLabelByte(s[1])
}

// sharesPrefix finds the agent whose ENS name starts with the same two
// labels as tok.
func sharesPrefix(tok string, agents []ens.Agent) (ens.Agent, bool) {
	labels := strings.SplitN(tok, ".", 3)
	if len(labels) < 2 {
		return ens.Agent{}, false
	}
	head := labels[0] + "." + labels[1]
	for _, a := range agents {
		name := turn.LowerASCII(a.EnsDomain)
		if name == head || strings.HasPrefix(name, head+".") {
			return a, true
		}
	}
	return ens.Agent{}, false
}

func agentOf(agents []ens.Agent, name string) ens.Agent {
	for _, a := range agents {
		if a.EnsDomain == name {
			return a
		}
	}
	return ens.Agent{EnsDomain: name, Name: firstLabel(name)}
}

// served is the channel's served agents, in registration order.
func (r *roster) served() []ens.Agent {
	out := make([]ens.Agent, 0, len(r.Names))
	for _, n := range r.Names {
		out = append(out, r.Agents[n])
	}
	return out
}

// unreached lists the calls in m that reach no one (unreachedCalls),
// leaving out the facilitator, which sees every message: naming it only
// wakes it.
func (r *roster) unreached(m memory.Message) []miss {
	out := unreachedCalls(m.Text, r.served(), r.Forms, author(m))
	return slices.DeleteFunc(out, func(x miss) bool { return x.agent.Role == ens.RoleFacilitator })
}
