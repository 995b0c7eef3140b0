// Package templates loads conclave's prompts from a config repository,
// defines the data every prompt receives, and renders prompts under the
// rules operators rely on.
//
// A Library holds the current Set of prompts; a Set is immutable, so a
// turn keeps the set it started with while a reload swaps in a new one.
// Prompts missing from the config repository fall back to built-in
// defaults embedded in the binary. Check and the Fixture type serve the
// tooling for template authors.
package templates

import "time"

// Prompt names.
const (
	PromptSystem          = "system"
	PromptDefault         = "default"
	PromptConclude        = "conclude"
	PromptContextNotFound = "context-not-found"
	PromptContextFound    = "context-found"
)

// Roles that have prompts. Human agents have none.
const (
	RoleFacilitator = "facilitator"
	RoleExpert      = "expert"
	RoleClone       = "clone"
)

// Roles lists the roles that have prompts, in a stable order.
func Roles() []string { return []string{RoleFacilitator, RoleExpert, RoleClone} }

// Prompts lists the prompts of a role, system first; nil for a role
// without prompts (human, or an unknown role).
func Prompts(role string) []string {
	switch role {
	case RoleFacilitator:
		return []string{PromptSystem, PromptDefault, PromptConclude}
	case RoleExpert:
		return []string{PromptSystem, PromptContextNotFound, PromptContextFound}
	case RoleClone:
		return []string{PromptSystem, PromptDefault}
	}
	return nil
}

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
	// LatestPersonRequest is the newest message the agent sees that a
	// person or human agent wrote, leaving out a lone :end: and an
	// acknowledgement the facilitator closed silently; InitialRequest
	// when there is none.
	LatestPersonRequest Request
	// Request is the message that began the current exchange (the root,
	// or the person's message that reopened the concluded thread); for an
	// expert or a clone, the first message of the exchange it sees. An
	// answer to a call and a person's answer to the facilitator's
	// question are never the Request. InitialRequest when there is none.
	Request Request
	// ConcludeReason says why the facilitator's conclude prompt runs:
	// ConcludeEnd, ConcludePerson, ConcludeInactivity, ConcludeMaxTurns,
	// ConcludeStalled or ConcludeBudget; empty in every other prompt.
	ConcludeReason string
	// KnownSessions are the memory keys the agent already has, most
	// recently used first; the engine fills it for an expert's threading
	// prompt only.
	KnownSessions []string
	// CloneOf is the human agent a clone was forked from; the zero Member
	// otherwise, whose fields print "<no value>".
	CloneOf Member
	// Messages are the messages of this conversation the agent sees, its
	// own replies included, oldest first: the discussion a template may
	// quote.
	Messages []Message
	// ExchangeMessageCount counts the Messages of the current exchange
	// (InExchange).
	ExchangeMessageCount int
	// Vars are the operator's variables ([templates.vars]); nil when none
	// are configured.
	Vars map[string]string
}

// Message is a message of the conversation as templates see it.
type Message struct {
	Author  Member
	Content string
	Time    time.Time
	// InExchange says whether the message belongs to the current
	// exchange: the one begun by the thread's root, or by the person's
	// message that last reopened the concluded thread.
	InExchange bool
}

// The values of Data.ConcludeReason.
const (
	ConcludeEnd        = "end"        // the facilitator's reply held :end:
	ConcludePerson     = "person"     // a person or human agent wrote :end:
	ConcludeInactivity = "inactivity" // no message for conversation.timeout
	ConcludeMaxTurns   = "max_turns"  // conversation.max_turns was reached
	ConcludeStalled    = "stalled"    // the facilitator went round in circles (a repeated reply, or calls only to capped agents)
	// ConcludeBudget: a daily model budget is spent. The engine then
	// concludes without calling the model, so no conclude prompt reads
	// it today; fixtures and templates may name it.
	ConcludeBudget = "budget"
)

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
	// SessionFormat says what the agent's memory keys look like: its
	// key_format attribute, else its session_pattern; empty when neither
	// is set.
	SessionFormat string
	// StandsFor is, for a clone forked from a human agent, that human
	// agent's ENS name; empty for every other agent.
	StandsFor string
}

// Member is a participant as templates see it: a person or an agent. Build
// one with Person or Agent; the zero Member is a person with no name.
type Member struct {
	name    string
	isAgent bool
	agent   AgentInfo
	v       memberViews // what templates read
}

// Person is a member who is not an agent.
func Person(name string) Member { return Member{name: name, v: personViews(name)} }

// Agent is a member that is a registered agent (human agents included).
// The maps are copied: later changes to a's maps do not reach templates.
func Agent(a AgentInfo) Member {
	return Member{name: a.Name, isAgent: true, agent: a, v: agentViews(a)}
}

// Name is the member's name.
func (m Member) Name() string { return m.name }

// IsAgent reports whether the member is an agent.
func (m Member) IsAgent() bool { return m.isAgent }

// AgentInfo returns what templates read of an agent member; ok is false
// for a person.
func (m Member) AgentInfo() (a AgentInfo, ok bool) { return m.agent, m.isAgent }

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
	// Tools are the MCP tools offered ("server" or "server/tool"); nil
	// leaves it to the agent's configuration, an empty list offers none.
	Tools *[]string `toml:"tools"`
}
