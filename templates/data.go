// Package templates loads conclave's prompts from a config repository,
// defines the data every prompt receives, and renders prompts under the
// rules operators rely on.
package templates

// Prompt names.
const (
	PromptSystem          = "system"
	PromptDefault         = "default"
	PromptConclude        = "conclude"
	PromptContextNotFound = "context-not-found"
	PromptContextFound    = "context-found"
)

// Data is what every prompt of every role receives. The engine fills it;
// the renderer exposes it to templates under the rules of the template
// contract (unknown fields print "<no value>", agent-only fields fail on
// persons).
type Data struct {
	ConversationId           string
	ChannelDescription       string
	ChannelMembers           []Member
	ConversationMessageCount int
	MemorySessionId          string
	InitialRequest           Request
	LatestRequest            Request
}

// Request is a message as templates see it.
type Request struct {
	Content string
	Author  Member
}

// AgentInfo is what a template may read of an agent.
type AgentInfo struct {
	Name       string
	EnsDomain  string
	Owner      string
	Addresses  map[string]string
	Attributes map[string]string
}

// Member is a participant as templates see it: a person or an agent. Build
// one with Person or Agent.
type Member struct {
	name    string
	isAgent bool
	agent   AgentInfo
}

// Person is a member who is not an agent.
func Person(name string) Member { return Member{name: name} }

// Agent is a member that is a registered agent (human agents included).
func Agent(a AgentInfo) Member { return Member{name: a.Name, isAgent: true, agent: a} }

// Name is the member's name.
func (m Member) Name() string { return m.name }

// IsAgent reports whether the member is an agent.
func (m Member) IsAgent() bool { return m.isAgent }

// Settings are the optional per-prompt settings from a .toml file beside a
// template, merged agent → role → all. Zero values mean "not set".
type Settings struct {
	LLMProfile     string   `toml:"llm_profile"`
	Model          string   `toml:"model"`
	Temperature    *float64 `toml:"temperature"`
	MaxTokens      int      `toml:"max_tokens"`
	MaxInputTokens int      `toml:"max_input_tokens"`
	IncludeHistory *bool    `toml:"include_history"`
	JSON           *bool    `toml:"json"`
}
