package conversation

import (
	"encoding/json"
	"fmt"
	"time"
)

// StateVersion is the version of the engine state stored in
// memory.Conversation.State. A replica meeting a newer version leaves the
// conversation alone rather than misread it.
const StateVersion = 1

// Conversation status.
const (
	StatusNew       = ""          // nothing Routed yet
	StatusIgnored   = "ignored"   // not (yet) a conversation: a root that started nothing
	StatusOpen      = "open"      // running
	StatusConcluded = "concluded" // concluded; a person or human agent may reopen it
)

// Why a conclusion was asked for.
const (
	ConcludeByEnd     = "end"     // the facilitator's reply held :end:
	ConcludeByPerson  = "person"  // a person or human agent wrote :end:
	ConcludeByTimeout = "timeout" // no message for conversation.timeout
	ConcludeByGuard   = "guard"   // conversation.max_turns reached
	ConcludeByStall   = "stalled" // the facilitator repeated itself, or called only agents at their cap
	ConcludeByBudget  = "budget"  // a daily model budget is spent
)

// State is the engine's state of one conversation, stored as JSON.
type State struct {
	Version int    `json:"v"`
	Status  string `json:"status,omitempty"`

	// Participants are the people and human agents who wrote, in
	// first-write order.
	Participants []Participant `json:"participants,omitempty"`
	// Bindings maps an expert to the memory session it bound.
	Bindings map[string]string `json:"bindings,omitempty"`
	// Group is the frozen clone/human session id ("" until first used).
	Group string `json:"group,omitempty"`
	// Routed holds the ts of every message already Routed.
	Routed map[string]bool `json:"Routed,omitempty"`

	// Queue holds the expert and clone turns waiting, in order.
	Queue []QueuedTurn `json:"queue,omitempty"`
	// Calls are human agents named and not yet answered.
	Calls []HumanCall `json:"calls,omitempty"`
	// FacilitatorDue: the thread holds messages (or notes) the facilitator
	// has not seen. WakeBy lists the messages that made it due: each
	// carries the working reaction until the facilitator's turn ends.
	FacilitatorDue bool     `json:"fac_due,omitempty"`
	WakeBy         []string `json:"wake_by,omitempty"`

	// Turns counts agent turns since the start or the last restart;
	// AgentTurns per agent.
	Turns      int            `json:"turns,omitempty"`
	AgentTurns map[string]int `json:"agent_turns,omitempty"`

	// Notes are history lines never posted: calls that failed or timed out.
	Notes []Note `json:"notes,omitempty"`
	// Noticed holds what was already notified once per conversation:
	// "name:<ens>" for unknown names, "cap:<ens>" for agents at their cap.
	Noticed map[string]bool `json:"noticed,omitempty"`
	// Conclude is a conclusion waiting to run.
	Conclude *ConcludeRequest `json:"conclude,omitempty"`
	// Reopened: a person reopened the concluded thread, which has not
	// concluded again since. A conclude reply without words then closes
	// it silently (Machine.concluded).
	Reopened bool `json:"reopened,omitempty"`
	// SinceReopen lists the messages people and human agents wrote since
	// the thread was reopened, the reopening one first; Acknowledged, the
	// messages of reopenings whose conclusion had no words: acknowledgements, which
	// are not requests (.LatestPersonRequest).
	SinceReopen  []string `json:"since_reopen,omitempty"`
	Acknowledged []string `json:"acknowledged,omitempty"`
	// ExchangeStart is the ts of the person's message that last reopened
	// the concluded thread: the current exchange begins there; empty, it
	// begins with the root (.Messages' InExchange).
	ExchangeStart string `json:"exchange_start,omitempty"`
	// Recent are the facilitator's last two default replies posted since
	// a person or human agent last wrote, newest first: a reply equal to
	// one of them stalls the conversation (stall.go).
	Recent []string `json:"recent,omitempty"`
	// Working counts, per message ts, the turns it triggered that have not
	// ended; the message carries the working reaction while it is non-zero.
	Working map[string]int `json:"working,omitempty"`

	// LastActivity is the later of the last message and the end of the
	// last turn: the inactivity clock starts from it.
	LastActivity time.Time `json:"last_activity,omitzero"`
	// Outbox holds the posts decided but not known to be made, in the
	// order they go out: nothing else happens in the conversation until it
	// is empty. Pending is where older versions kept one such post; decode
	// moves it into Outbox.
	Outbox  []PendingPost `json:"outbox,omitempty"`
	Pending *PendingPost  `json:"pending,omitempty"`
	// Streamed maps the post id of a reply being streamed by a turn not
	// yet over to its message: a run again of the turn shows its reply in
	// that message (see stream.go).
	Streamed map[string]StreamMark `json:"streamed,omitempty"`
	// Seq numbers notes and turn ids.
	Seq int `json:"seq,omitempty"`
}

// StreamMark is a message streamed by a turn not yet over.
type StreamMark struct {
	TS     string `json:"ts,omitempty"` // "" while unknown
	Agent  string `json:"agent"`
	Prompt string `json:"prompt"`
}

// Participant is a person or human agent who wrote in the thread.
type Participant struct {
	UserID string `json:"user,omitempty"`
	Agent  string `json:"agent,omitempty"` // for a human agent
	Name   string `json:"name,omitempty"`
}

type QueuedTurn struct {
	ID      string    `json:"id"`
	Agent   string    `json:"agent"`
	Trigger string    `json:"trigger"` // ts of the message that named it
	Queued  time.Time `json:"queued"`
	// Also lists later messages that named the agent while it waited: the
	// one turn answers them too, so they carry the working reaction.
	Also []string `json:"also,omitempty"`
}

// triggers lists the messages the turn answers.
func (q QueuedTurn) Triggers() []string {
	return append([]string{q.Trigger}, q.Also...)
}

type HumanCall struct {
	Agent    string    `json:"agent"`
	Trigger  string    `json:"trigger"`
	Deadline time.Time `json:"deadline"`
}

// Note is a history line never posted.
type Note struct {
	ID   string    `json:"id"`
	Text string    `json:"text"`
	At   time.Time `json:"at"`
}

type ConcludeRequest struct {
	Reason string `json:"reason"`
	// Trigger is the person's message that asked for it (ConcludeByPerson):
	// it carries the working reaction while the conclusion runs.
	Trigger string `json:"trigger,omitempty"`
	// For ConcludeByEnd: the reply that held :end: (verbatim), the phase
	// prompt it answered, and the ts of what was posted of it ("" if
	// nothing).
	EndReply   string `json:"end_reply,omitempty"`
	PrevPrompt string `json:"prev_prompt,omitempty"`
	EndTS      string `json:"end_ts,omitempty"`
}

// PendingPost is a post about to be made (a reply, a threading message, a
// ⚠️ notice), recorded before its first attempt. If the holder dies
// between the post and the commit after it, or an attempt's outcome is
// unknown, the next attempt first finds the parts already posted by the
// post's id instead of posting them again.
type PendingPost struct {
	PostID  string            `json:"post_id"`
	Turn    string            `json:"turn,omitempty"` // the turn that made it
	Agent   string            `json:"agent"`
	Text    string            `json:"text"`
	Mention []string          `json:"mention,omitempty"`
	Meta    map[string]string `json:"meta,omitempty"`
	// Conclusion: names in it trigger nothing.
	Conclusion bool `json:"conclusion,omitempty"`
	// EndReply: what is left of a facilitator reply that held :end:.
	EndReply bool `json:"end_reply,omitempty"`
	// Notice: a ⚠️ notice, neither stored as a message nor Routed.
	Notice bool `json:"notice,omitempty"`
	// Feedback is the reference its last part's 👍/👎 buttons carry (""
	// for none).
	Feedback string `json:"feedback,omitempty"`
	// Attempts counts failed tries to post or find it.
	Attempts int `json:"attempts,omitempty"`
	// Posted holds the ts of the parts known to be posted, in order.
	Posted []string `json:"posted,omitempty"`
	// First is when it was first tried; Next when it is tried again
	// (zero: at once).
	First time.Time `json:"first,omitzero"`
	Next  time.Time `json:"next,omitzero"`
	// LastError is why the last attempt failed.
	LastError string `json:"last_error,omitempty"`
	// Stream: a message was (maybe) streamed for the first part, with ts
	// StreamTS ("" while unknown); it is updated, not posted again.
	Stream   bool   `json:"stream,omitempty"`
	StreamTS string `json:"stream_ts,omitempty"`
}

func Decode(b []byte) (*State, error) {
	st := &State{Version: StateVersion}
	if len(b) > 0 {
		if err := json.Unmarshal(b, st); err != nil {
			return nil, fmt.Errorf("decode conversation state: %w", err)
		}
		if st.Version > StateVersion {
			return nil, fmt.Errorf("conversation state version %d is newer than this conclave understands (%d)", st.Version, StateVersion)
		}
	}
	st.Version = StateVersion
	if st.Pending != nil {
		st.Outbox = append([]PendingPost{*st.Pending}, st.Outbox...)
		st.Pending = nil
	}
	if st.Routed == nil {
		st.Routed = make(map[string]bool)
	}
	if st.Bindings == nil {
		st.Bindings = make(map[string]string)
	}
	if st.AgentTurns == nil {
		st.AgentTurns = make(map[string]int)
	}
	if st.Noticed == nil {
		st.Noticed = make(map[string]bool)
	}
	if st.Working == nil {
		st.Working = make(map[string]int)
	}
	return st, nil
}

func (st *State) Encode() []byte {
	b, err := json.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("agents: encode state: %v", err)) // plain data: cannot fail
	}
	return b
}

// busy reports whether anything is waiting to run.
func (st *State) Busy() bool { return len(st.Calls) > 0 || st.BusyButCalls() }

// busyButCalls is busy, human agents' pending calls left out.
func (st *State) BusyButCalls() bool {
	return len(st.Queue) > 0 || st.Conclude != nil || len(st.Outbox) > 0
}

// deadline is when the conversation next needs attention without a new
// message: the next attempt of the first pending post while the outbox
// holds any (nothing else happens meanwhile); now when work is waiting (a
// turn, a conclusion, including the one max_turns asks for), else the
// earliest human call timeout, else the inactivity deadline.
func (st *State) Deadline(now time.Time, timeout time.Duration, maxTurns int, hasFacilitator bool) time.Time {
	if len(st.Outbox) > 0 {
		if next := st.Outbox[0].Next; next.After(now) {
			return next
		}
		return now
	}
	if st.Status != StatusOpen {
		return time.Time{}
	}
	if len(st.Queue) > 0 || st.Conclude != nil ||
		st.Status == StatusOpen && maxTurns > 0 && st.Turns >= maxTurns ||
		st.FacilitatorDue && hasFacilitator && len(st.Calls) == 0 {
		return now
	}
	var d time.Time
	for _, c := range st.Calls {
		if d.IsZero() || c.Deadline.Before(d) {
			d = c.Deadline
		}
	}
	if !d.IsZero() {
		return d
	}
	if timeout > 0 && !st.LastActivity.IsZero() {
		return st.LastActivity.Add(timeout)
	}
	return time.Time{}
}

func (st *State) Touch(t time.Time) {
	if t.After(st.LastActivity) {
		st.LastActivity = t
	}
}

func (st *State) nextID(prefix string) string {
	st.Seq++
	return fmt.Sprintf("%s%d", prefix, st.Seq)
}
