package conversation

import (
	"slices"
	"time"
)

// Load is the machine of a conversation whose state was stored as b (nil
// or empty: a new conversation). The machine owns the state from then
// on: the caller reads it through Read and changes it through the
// machine's methods only. idPrefix starts the ids of the turns it numbers
// (the conversation id's head).
func Load(b []byte, lim Limits, facilitator, idPrefix string) (*Machine, error) {
	st, err := Decode(b)
	if err != nil {
		return nil, err
	}
	return &Machine{st: st, lim: lim, facilitator: facilitator, idPrefix: idPrefix}, nil
}

// Encode is the state as stored.
func (m *Machine) Encode() []byte { return m.st.Encode() }

// Opened records whether the thread became a conversation (routing's
// first decision): open, or ignored (a root that started nothing).
func (m *Machine) Opened(open bool) {
	if open {
		m.st.Status = StatusOpen
	} else {
		m.st.Status = StatusIgnored
	}
}

// Read is a read-only view of the state.
func (m *Machine) Read() Reader { return Reader{m: m} }

// Reader reads a machine's state; it changes nothing. The slices it
// returns are copies.
type Reader struct{ m *Machine }

// Status is the conversation's status (StatusNew, StatusIgnored,
// StatusOpen, StatusConcluded).
func (r Reader) Status() string { return r.m.st.Status }

// Routed reports whether the message at ts was routed.
func (r Reader) Routed(ts string) bool { return r.m.st.Routed[ts] }

// Noticed reports whether key was notified already in this conversation.
func (r Reader) Noticed(key string) bool { return r.m.st.Noticed[key] }

// Pending is how many posts wait in the outbox.
func (r Reader) Pending() int { return len(r.m.st.Outbox) }

// Post is the i-th post waiting in the outbox, in the order they go out.
func (r Reader) Post(i int) PendingPost { return r.m.st.Outbox[i] }

// Queued is how many expert and clone turns wait.
func (r Reader) Queued() int { return len(r.m.st.Queue) }

// FirstQueued is the turn that runs next of those waiting.
func (r Reader) FirstQueued() QueuedTurn { return r.m.st.Queue[0] }

// Conclude is the conclusion waiting to run, if any.
func (r Reader) Conclude() (ConcludeRequest, bool) {
	if c := r.m.st.Conclude; c != nil {
		return *c, true
	}
	return ConcludeRequest{}, false
}

// Concluding reports whether a conclusion waits to run.
func (r Reader) Concluding() bool { return r.m.st.Conclude != nil }

// Streamed is the message streamed for the turn or post id, if any.
func (r Reader) Streamed(id string) (StreamMark, bool) {
	sm, ok := r.m.st.Streamed[id]
	return sm, ok
}

// StreamedTurn is the id of agent's turn that streamed a reply to prompt
// and is not over ("" when none): a run again of it keeps its id.
func (r Reader) StreamedTurn(agent, prompt string) string {
	for id, sm := range r.m.st.Streamed {
		if sm.Agent == agent && sm.Prompt == prompt {
			return id
		}
	}
	return ""
}

// Recent are the facilitator's last replies since a person last wrote,
// newest first.
func (r Reader) Recent() []string { return slices.Clone(r.m.st.Recent) }

// Turns counts agent turns since the start or the last restart.
func (r Reader) Turns() int { return r.m.st.Turns }

// AgentTurns are the turns per agent since the start or the last restart.
func (r Reader) AgentTurns() map[string]int {
	out := make(map[string]int, len(r.m.st.AgentTurns))
	for k, v := range r.m.st.AgentTurns {
		out[k] = v
	}
	return out
}

// Binding is the memory session expert bound ("" when none).
func (r Reader) Binding(expert string) string { return r.m.st.Bindings[expert] }

// Group is the frozen clone/human session id ("" until first used).
func (r Reader) Group() string { return r.m.st.Group }

// Participants are the people and human agents who wrote, in first-write
// order.
func (r Reader) Participants() []Participant { return slices.Clone(r.m.st.Participants) }

// Notes are the history lines never posted.
func (r Reader) Notes() []Note { return slices.Clone(r.m.st.Notes) }

// ExchangeStart is the ts of the message that began the current exchange
// ("" for the root).
func (r Reader) ExchangeStart() string { return r.m.st.ExchangeStart }

// Acknowledged reports whether the message at ts was an acknowledgement,
// not a request.
func (r Reader) Acknowledged(ts string) bool { return slices.Contains(r.m.st.Acknowledged, ts) }

// Acknowledgements are the ts of the acknowledgements the facilitator
// closed silently.
func (r Reader) Acknowledgements() []string { return slices.Clone(r.m.st.Acknowledged) }

// SinceReopen are the messages people wrote since the thread was
// reopened, the reopening one first.
func (r Reader) SinceReopen() []string { return slices.Clone(r.m.st.SinceReopen) }

// Deadline is when the conversation next needs attention (State.Deadline).
func (r Reader) Deadline(now time.Time) time.Time {
	return r.m.st.Deadline(now, r.m.lim.Timeout, r.m.lim.MaxTurns, r.m.facilitator != "")
}

// WorkDue reports whether something waits to be done now.
func (r Reader) WorkDue(now time.Time) bool {
	d := r.Deadline(now)
	return !d.IsZero() && !d.After(now)
}

// WithStreamMark is the state stored as base with a streamed message's
// marker added for postID, and the number of posts it holds pending with
// the streamed one: what a streaming turn commits beside the state as last
// committed (the loaded machine gets the marker when the turn is over).
func WithStreamMark(base []byte, postID string, sm StreamMark) ([]byte, int, error) {
	st, err := Decode(base)
	if err != nil {
		return nil, 0, err
	}
	if st.Streamed == nil {
		st.Streamed = make(map[string]StreamMark)
	}
	st.Streamed[postID] = sm
	return st.Encode(), len(st.Outbox) + 1, nil
}
