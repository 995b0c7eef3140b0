package agents

// ExpertNamespace is whose memory an expert's sessions live in: its ENS
// name, or "<ens>#<channel>" when expert.session_scope = "channel" (pass
// the channel only then).
func ExpertNamespace(agent, channel string) string {
	return scoped(agent, channel)
}

// CloneNamespace is whose memory a clone's and a human agent's group
// sessions live in: the human's ENS name, with "#<channel>" unless
// o.CloneScope is ScopeWorkspace.
func CloneNamespace(o *Options, human, channel string) string {
	if o.CloneScope == ScopeWorkspace {
		return human
	}
	return scoped(human, channel)
}

func scoped(agent, channel string) string {
	if channel == "" {
		return agent
	}
	return agent + "#" + channel
}
