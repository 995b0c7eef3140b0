package turn

import "time"

// Result is what a turn produced, as a value: the engine feeds it into
// the conversation's machine and its outbox, and never reads the turn
// back. A turn that failed still returns what it produced before
// failing (a tool it used), which the engine applies first.
type Result struct {
	Text   string // the reply, to post
	Prompt string // the facilitator's: the phase prompt its reply answered
	// Threading is an unbound expert's threading request: the session it
	// chose, or why it cannot answer.
	Threading Threading
	// Notes are history lines never posted (the tools it used).
	Notes []Note
}

// Threading is what an unbound expert's threading request produced.
type Threading struct {
	Text       string            // to post: its message, or the raw reply when unreadable
	Meta       map[string]string // the threading outcome, recorded on the post
	Key        string            // the session it chose ("" leaves it unbound)
	Unanswered string            // why it cannot answer, when unbound
}

// Note is a history line a turn adds, never posted: a tool it used.
type Note struct {
	Text string
	At   time.Time
}
