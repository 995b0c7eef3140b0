package turn

import "github.com/conclavehq/conclave/ens"

// Input is what one turn reads of its conversation, gathered by the
// engine's step before the turn runs and converted at its edge: the
// agent, the thread as it stands, the channel's description and, by the
// kind of turn, the memory session it answers in, the keys it is offered
// or the conclusion it writes.
type Input struct {
	Agent       ens.Agent
	Thread      []Message // the whole thread, in ts order
	Description string    // the channel's description ("" when unread)
	// Entries are the entries of the session the turn answers in that
	// come from other conversations (this one's are in Thread).
	Entries []SessionEntry
	// Known are the session keys an unbound expert is offered
	// (.KnownSessions).
	Known []string
	// Conclude is what a conclusion reads of the request for it.
	Conclude Conclude
}

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
