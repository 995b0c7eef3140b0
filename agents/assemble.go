package agents

import (
	"strings"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// The types of a turn's request live in agents/turn; these are their
// engine names.
type (
	// Prompts is the prompt set a turn renders with (turn.Prompts).
	Prompts = turn.Prompts
	// Profiles tells the configured model profiles apart (turn.Profiles).
	Profiles = turn.Profiles
	// Model is the model client a turn calls (turn.Model).
	Model = turn.Model
	// HistoryMessage is one message of a prompt's history
	// (turn.HistoryMessage).
	HistoryMessage = turn.HistoryMessage
	// TurnPrompt is what one model request of a turn is built from
	// (turn.TurnPrompt).
	TurnPrompt = turn.TurnPrompt
	// BuildInfo says how a request was fitted (turn.BuildInfo).
	BuildInfo = turn.BuildInfo
	// Toolbox is the MCP tools agents may use (turn.Toolbox).
	Toolbox = turn.Toolbox
)

// BuildRequest renders and fits the request a turn sends
// (turn.BuildRequest).
func BuildRequest(prompts Prompts, profiles Profiles, p TurnPrompt) (llm.Request, BuildInfo, error) {
	return turn.BuildRequest(prompts, profiles, p)
}

// FixturePrompt builds the TurnPrompt for rendering one prompt of agent a
// against a template fixture (conclave templates render): the fixture's
// session history, then its messages labelled as a turn labels them (the
// agent's own as assistant, agents' messages of the current exchange
// marked as its answers). The fixture supplies the conversation, not
// the agent: a is the first of ChannelMembers (taken out of the place it
// had among them, if any), and CloneOf holds nobody unless a is a clone.
// Budget fields are left for the caller.
func FixturePrompt(a ens.Agent, prompt string, f templates.Fixture) TurnPrompt {
	f.Data.ChannelMembers = withSelfFirst(a, f.Data.ChannelMembers)
	if a.Role != ens.RoleClone {
		f.Data.CloneOf = templates.Member{}
	}
	entries := make([]turn.SessionEntry, len(f.SessionHistory))
	for i, h := range f.SessionHistory {
		entries[i] = turn.SessionEntry{Role: h.Role, Content: h.Content, At: h.At}
	}
	history := turn.SessionHistory(entries)
	for i, m := range f.Messages {
		info, isAgent := m.Author.AgentInfo()
		answer := isAgent && i < len(f.Data.Messages) && f.Data.Messages[i].InExchange
		switch {
		case isAgent && strings.EqualFold(info.EnsDomain, a.EnsDomain):
			history = append(history, HistoryMessage{Role: llm.RoleAssistant, Content: m.Content, Answer: answer})
		case isAgent:
			history = append(history, HistoryMessage{Role: llm.RoleUser, Author: turn.SpeakerLabel(info.Name, info.EnsDomain), Content: m.Content, Answer: answer})
		default:
			history = append(history, HistoryMessage{Role: llm.RoleUser, Author: turn.SpeakerLabel(m.Author.Name(), ""), Content: m.Content})
		}
	}
	return TurnPrompt{Agent: a, Prompt: prompt, Data: f.Data, History: history}
}

// withSelfFirst puts agent a first among members, the others after it in
// their order.
func withSelfFirst(a ens.Agent, members []templates.Member) []templates.Member {
	out := []templates.Member{TemplateMember(a, &Options{})} // its key_format; the caller knows its settings
	for _, m := range members {
		if info, ok := m.AgentInfo(); ok && strings.EqualFold(info.EnsDomain, a.EnsDomain) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// SpeakerOf reads back the label a history message's content starts with
// (turn.SpeakerOf): the author's name, its ENS name ("" for a person) and
// the text after the label.
func SpeakerOf(content string) (name, ensDomain, text string, ok bool) {
	return turn.SpeakerOf(content)
}

// TemplateMember is the template member for agent a under the engine's
// options o, with the format of its memory keys (.SessionFormat): its
// key_format attribute, else its session_pattern (turn.Member).
func TemplateMember(a ens.Agent, o *Options) templates.Member {
	return turn.Member(a, o.Agents[a.EnsDomain].SessionPattern)
}
