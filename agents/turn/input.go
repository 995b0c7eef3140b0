package turn

import (
	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/ens"
)

// Input is what one turn reads of its conversation, gathered by the
// engine's step before the turn runs and converted at its edge: the
// agent, the thread as it stands, whom the conversation involves (their
// identities resolved), what the state says of the exchange, the
// channel's description and, by the kind of turn, the memory session it
// answers in, the keys it is offered or the conclusion it writes.
type Input struct {
	Agent       ens.Agent
	Thread      []Message // the whole thread, in ts order
	Team        *Team     // the channel's agents and every identity the thread names
	Description string    // the channel's description ("" when unread)

	// What the state says: who wrote in the thread, the history lines
	// never posted, the ts of the message that began the current
	// exchange ("" for the root) and the acknowledgements the
	// facilitator closed silently.
	Participants  []conversation.Participant
	Notes         []conversation.Note
	ExchangeStart string
	Acknowledged  []string

	// Entries are the entries of the session the turn answers in that
	// come from other conversations (this one's are in Thread).
	Entries []SessionEntry
	// Sessions are an unbound expert's session keys, matched against the
	// key it writes; Known are those it is offered (.KnownSessions).
	Sessions []string
	Known    []string
	// Conclude is what a conclusion reads of the request for it.
	Conclude Conclude
	// Show shows the reply while it is written (nil: it is not).
	Show Shower
}

// Team is whom a conversation involves, as the engine resolved them
// before the turn: the channel's agents served, in registration order,
// the spellings that name them, its facilitator, and the identities of
// every agent the thread, its participants and its clones name.
type Team struct {
	Names       []string
	Forms       []NameForm
	Facilitator string
	Agents      map[string]ens.Agent
}

// agent is the identity of a resolved agent; false when it could not be
// resolved.
func (t *Team) agent(name string) (ens.Agent, bool) {
	a, ok := t.Agents[name]
	return a, ok
}

// Mentions lists the channel's agents a text names, in order.
func (t *Team) Mentions(text string) []string { return FindMentions(text, t.Forms) }

// Conclude is what a conclusion reads of the request that asked for it.
type Conclude struct {
	Reason string // why the conversation concludes (the engine's words)
	ByEnd  bool   // a reply of the facilitator held :end:
	// For ByEnd: the reply that held :end:, verbatim, the prompt it
	// answered, and the ts of what was posted of it ("" when nothing).
	EndReply   string
	PrevPrompt string
	EndTS      string
}
