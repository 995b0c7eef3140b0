package agents

import (
	"slices"
	"strings"
)

// naming is how a deployment names its agents: the base domains (the
// first is canonical) and the channels the configuration declares. Its
// rules need no store.
type naming struct {
	bases  []string                 // lower case, trimmed; at least one
	static map[string]ChannelConfig // by channel id, agents canonical
}

// canonical lowercases an ENS name and writes it under the first base
// domain when it is under any configured base.
func (n naming) canonical(name string) string {
	name = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), "@")))
	for _, b := range n.bases {
		if prefix, ok := strings.CutSuffix(name, "."+b); ok {
			return prefix + "." + n.bases[0]
		}
	}
	return name
}

// forms lists the spellings of canonical names that mention them.
func (n naming) forms(names []string) []nameForm {
	var out []nameForm
	first := "." + n.bases[0]
	for _, name := range names {
		out = append(out, nameForm{Form: name, Agent: name})
		if prefix, ok := strings.CutSuffix(name, first); ok {
			for _, b := range n.bases[1:] {
				out = append(out, nameForm{Form: prefix + "." + b, Agent: name})
			}
		}
	}
	return out
}

// channelNames merges a channel's configured agents with those added at
// run time (as the store lists them).
func (n naming) channelNames(channel string, added []string) []string {
	names := slices.Clone(n.static[channel].Agents)
	for _, a := range added {
		if a = n.canonical(a); !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	return names
}

// isStatic reports whether the configuration declares agent in channel.
func (n naming) isStatic(channel, agent string) bool {
	return slices.Contains(n.static[channel].Agents, agent)
}
