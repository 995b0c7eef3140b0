package agents

// ExpertNamespace is whose memory an expert's sessions live in: its ENS
// name, or "<ens>#<channel>" when expert.session_scope = "channel" (pass
// the channel only then).
func ExpertNamespace(agent, channel string) string {
	if channel == "" {
		return agent
	}
	return agent + "#" + channel
}
