package conversation

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Limits are the guards of a conversation (the conversation.* settings).
type Limits struct {
	MaxTurns         int           // agent turns before the conclusion is forced
	MaxTurnsPerAgent int           // turns of one agent; past it its calls are skipped
	MaxQueued        int           // turns waiting; past it a call is refused
	CallTimeout      time.Duration // how long a call may wait for its answer
	Timeout          time.Duration // inactivity before the conclusion; 0: never
}

// Machine is one conversation's state machine. Its state is plain data
// (State); its methods are pure: they change the state and record the
// reaction changes the caller is to make (fx), and nothing else: no store,
// no clock (the time is passed in), no network, no log. The caller (the
// loaded conversation) turns what happened into calls of these methods
// and carries out what they return.
type Machine struct {
	st          *State
	lim         Limits
	facilitator string // the channel's facilitator ("" when none)
	idPrefix    string // turn ids start with it (the conversation id's head)
	fx          []ReactionChange
}

// ReactionChange is a reaction to set or clear: the working reaction on a
// message, or the done reaction (✅) on the thread's root.
type ReactionChange struct {
	TS   string // the message; "" for the root (done)
	Done bool   // the done reaction rather than the working one
	Add  bool
}

// Inbound is a message as the machine sees it: who wrote it, whom it
// names, whether it asks for the end.
type Inbound struct {
	TS     string
	Kind   string // KindPerson, KindHuman, KindBot, KindAgent
	Author string // the agent that wrote it ("" for a person or a bot)
	UserID string
	Name   string
	At     time.Time
	Named  []NamedAgent // the registered agents it names, in order
	End    bool         // holds :end:
}

// NamedAgent is a registered agent a message names, with its role.
type NamedAgent struct {
	Agent string
	Role  Role
}

// Routed says what routing a message did that the caller acts on.
type Routed struct {
	Restarted  bool     // a concluded conversation was reopened
	Refused    []string // the agents not queued, the queue being full
	Concluded  bool     // concluded at once: no facilitator to conclude
	Conclusion string   // the reason of a conclusion asked for
}

// The actions next picks.
type Action int

const (
	ActNone        Action = iota // nothing to do now
	ActConclude                  // run the conclusion waiting (st.Conclude)
	ActGuard                     // max_turns reached: ask for the conclusion
	ActExpireCalls               // calls to human agents timed out
	ActCall                      // run the first queued turn
	ActFacilitator               // run the facilitator's turn
	ActSettle                    // the facilitator is due but the channel has none
	ActTimeout                   // inactivity: ask for the conclusion
)

// StartsOnRoot decides whether a new root by a person starts a
// conversation: it names an agent, or the channel starts on every message
// and has a facilitator.
func StartsOnRoot(root Inbound, start string, hasFacilitator bool) bool {
	if !IsPersonKind(root.Kind) {
		return false
	}
	return len(root.Named) > 0 || start == StartAll && hasFacilitator
}

// Adopter returns the ts of the first reply (not the root, not a bot's)
// naming a registered agent, which makes a thread conclave did not start
// a conversation; "" when there is none.
func Adopter(fresh []Inbound, threadTS string) string {
	for _, m := range fresh {
		if m.TS != threadTS && m.Kind != KindBot && len(m.Named) > 0 {
			return m.TS
		}
	}
	return ""
}

// receive routes one message: it is marked Routed, its time is activity,
// its author a Participant when a person or human agent wrote it. With
// triggers false (content only) or from a bot, that is all. Otherwise: a
// person writing in a concluded conversation reopens it; :end: by a person
// asks for the conclusion; a human agent writing answers its calls; the
// agents named are queued (experts, clones) or called (human agents), as
// of now; the facilitator is woken unless it wrote the message.
func (m *Machine) Receive(in Inbound, triggers bool, now time.Time) Routed {
	var out Routed
	st := m.st
	st.Routed[in.TS] = true
	st.Touch(in.At)
	if IsPersonKind(in.Kind) {
		m.addParticipant(in)
	}
	if !triggers || in.Kind == KindBot {
		return out
	}
	if st.Status == StatusConcluded {
		if !IsPersonKind(in.Kind) || in.End {
			return out
		}
		m.restart()
		st.ExchangeStart = in.TS
		out.Restarted = true
	}
	if st.Reopened && IsPersonKind(in.Kind) {
		st.SinceReopen = append(st.SinceReopen, in.TS)
	}
	if IsPersonKind(in.Kind) {
		st.Recent = nil // a new exchange: the facilitator may say again what it said
	}
	if st.Conclude != nil {
		return out
	}
	if IsPersonKind(in.Kind) && in.End {
		out.Concluded = m.RequestConclude(&ConcludeRequest{Reason: ConcludeByPerson, Trigger: in.TS})
		out.Conclusion = ConcludeByPerson
		return out
	}
	if in.Kind == KindHuman {
		m.answered(in.Author)
	}
	for _, n := range in.Named {
		if n.Agent == in.Author {
			continue
		}
		switch n.Role {
		case RoleFacilitator:
			// The facilitator sees every message; naming it only wakes it.
		case RoleHuman:
			m.call(n.Agent, in.TS, now)
		default:
			if !m.enqueue(n.Agent, in.TS, now) {
				out.Refused = append(out.Refused, n.Agent)
			}
		}
	}
	if in.Author == "" || in.Author != m.facilitator {
		m.wakeFacilitator(in.TS)
	}
	return out
}

func (m *Machine) addParticipant(in Inbound) {
	for i, p := range m.st.Participants {
		if in.Kind == KindHuman && p.Agent == in.Author || in.Kind == KindPerson && p.Agent == "" && p.UserID == in.UserID {
			if in.Name != "" {
				m.st.Participants[i].Name = in.Name
			}
			return
		}
	}
	p := Participant{UserID: in.UserID, Name: in.Name}
	if in.Kind == KindHuman {
		p.Agent = in.Author
	}
	m.st.Participants = append(m.st.Participants, p)
}

// enqueue queues a turn for an expert or clone named by the message at
// ts. An agent already waiting is not queued twice: its turn answers both
// messages. False when the queue is full (max_queued): the turn is not
// queued.
func (m *Machine) enqueue(name, ts string, now time.Time) bool {
	st := m.st
	for i, q := range st.Queue {
		if q.Agent == name {
			if !slices.Contains(q.Triggers(), ts) {
				st.Queue[i].Also = append(st.Queue[i].Also, ts)
				m.working(ts, +1)
			}
			return true
		}
	}
	if len(st.Queue) >= m.lim.MaxQueued {
		return false
	}
	st.Queue = append(st.Queue, QueuedTurn{ID: m.TurnID(), Agent: name, Trigger: ts, Queued: now})
	sort.SliceStable(st.Queue, func(i, j int) bool { return LessTS(st.Queue[i].Trigger, st.Queue[j].Trigger) })
	m.working(ts, +1)
	return true
}

// noticeOverloaded marks, in State.Noticed, that the overload ⚠️ was
// posted; it is cleared when a queued turn ends.
const noticeOverloaded = "overloaded"

// overloadNotice reports whether the overload ⚠️ is to be posted: once,
// until the queue has room again.
func (m *Machine) OverloadNotice() bool {
	if m.st.Noticed[noticeOverloaded] {
		return false
	}
	m.st.Noticed[noticeOverloaded] = true
	return true
}

// call records a call to a human agent, bounded by call_timeout.
func (m *Machine) call(name, ts string, now time.Time) {
	for _, h := range m.st.Calls {
		if h.Agent == name {
			return
		}
	}
	m.st.Calls = append(m.st.Calls, HumanCall{Agent: name, Trigger: ts, Deadline: now.Add(m.lim.CallTimeout)})
}

// answered ends the calls to a human agent that just wrote.
func (m *Machine) answered(name string) {
	m.st.Calls = slices.DeleteFunc(m.st.Calls, func(h HumanCall) bool { return h.Agent == name })
}

// wakeFacilitator marks the facilitator due because of the message at ts,
// which carries the working reaction until the facilitator's turn ends.
func (m *Machine) wakeFacilitator(ts string) {
	m.st.FacilitatorDue = true
	if m.facilitator == "" || slices.Contains(m.st.WakeBy, ts) {
		return
	}
	m.st.WakeBy = append(m.st.WakeBy, ts)
	m.working(ts, +1)
}

// settleFacilitator clears the facilitator's due mark: its turn ran (or
// will not run), so the messages that woke it lose the working reaction.
func (m *Machine) SettleFacilitator() {
	for _, ts := range m.st.WakeBy {
		m.working(ts, -1)
	}
	m.st.WakeBy = nil
	m.st.FacilitatorDue = false
}

// working counts the turns a message triggered; the message carries the
// working reaction while any is queued or running.
func (m *Machine) working(ts string, delta int) {
	if ts == "" {
		return
	}
	before := m.st.Working[ts]
	after := max(before+delta, 0)
	if after == 0 {
		delete(m.st.Working, ts)
	} else {
		m.st.Working[ts] = after
	}
	if (before == 0) != (after == 0) {
		m.fx = append(m.fx, ReactionChange{TS: ts, Add: after > 0})
	}
}

// takeEffects returns the reaction changes recorded so far, in order, and
// forgets them.
func (m *Machine) TakeEffects() []ReactionChange {
	fx := m.fx
	m.fx = nil
	return fx
}

// turnID numbers a new turn.
func (m *Machine) TurnID() string {
	return m.st.nextID(m.idPrefix + "-t")
}

// addNote adds a history line that is never posted; wake makes the
// facilitator due (a call that failed or timed out), a tool's line does
// not.
func (m *Machine) AddNote(text string, now time.Time, wake bool) {
	m.st.Notes = append(m.st.Notes, Note{ID: m.st.nextID("n"), Text: text, At: now})
	if wake {
		m.st.FacilitatorDue = true
	}
}

// cancelQueue drops every queued turn and pending call.
func (m *Machine) cancelQueue() {
	for _, q := range m.st.Queue {
		m.dequeued(q)
	}
	m.st.Queue = nil
	m.st.Calls = nil
}

// noteCancelled leaves the facilitator a history note for each call the
// conclusion cancels (SPEC §14.2): a queued expert or clone turn, a human
// agent's pending call. The notes are dated at the conversation's last
// activity, so they follow the messages they answer.
func (m *Machine) noteCancelled() {
	at := m.st.LastActivity
	for _, q := range m.st.Queue {
		if q.Agent != m.facilitator {
			m.AddNote(fmt.Sprintf("(%s did not answer: the call was cancelled when the conversation concluded)", q.Agent), at, false)
		}
	}
	for _, call := range m.st.Calls {
		m.AddNote(fmt.Sprintf("(%s did not answer: the call was cancelled when the conversation concluded)", call.Agent), at, false)
	}
}

// dequeued releases the working reaction of the messages a queued turn
// answers.
func (m *Machine) dequeued(q QueuedTurn) {
	for _, ts := range q.Triggers() {
		m.working(ts, -1)
	}
}

// requestConclude asks for the conclusion: queued turns are cancelled; the
// facilitator runs conclude next, or, without one, the conversation ends
// at once, silently (true).
func (m *Machine) RequestConclude(r *ConcludeRequest) bool {
	m.noteCancelled()
	m.cancelQueue()
	m.SettleFacilitator()
	if m.facilitator == "" {
		m.st.Status = StatusConcluded
		return true
	}
	m.st.Conclude = r
	m.working(r.Trigger, +1)
	return false
}

// restart reopens a concluded conversation: the ✅ goes, the loop guards
// start again; bindings and the group id stay.
func (m *Machine) restart() {
	st := m.st
	st.Status = StatusOpen
	st.Reopened = true
	st.SinceReopen = nil
	st.Recent = nil
	st.Turns = 0
	st.AgentTurns = make(map[string]int)
	for k := range st.Noticed {
		if strings.HasPrefix(k, "cap:") {
			delete(st.Noticed, k)
		}
	}
	m.fx = append(m.fx, ReactionChange{Done: true, Add: false})
}

// next picks what to do now: a pending conclusion, the max_turns guard,
// expired calls, the next queued turn, the facilitator's wake-up, or the
// inactivity conclusion. It changes nothing.
func (m *Machine) Next(now time.Time) Action {
	st := m.st
	switch {
	case st.Status != StatusOpen:
		return ActNone
	case st.Conclude != nil:
		return ActConclude
	case st.Turns >= m.lim.MaxTurns:
		return ActGuard
	case slices.ContainsFunc(st.Calls, func(h HumanCall) bool { return !h.Deadline.After(now) }):
		return ActExpireCalls
	case len(st.Queue) > 0:
		return ActCall
	case st.FacilitatorDue && len(st.Calls) == 0:
		if m.facilitator == "" {
			return ActSettle
		}
		return ActFacilitator
	case !st.Busy() && m.lim.Timeout > 0 && !st.LastActivity.IsZero() && !st.LastActivity.Add(m.lim.Timeout).After(now):
		return ActTimeout
	}
	return ActNone
}

// expireCalls ends the calls whose deadline passed, each with a history
// line that wakes the facilitator, and returns their agents.
func (m *Machine) ExpireCalls(now time.Time) []string {
	var expired []string
	m.st.Calls = slices.DeleteFunc(m.st.Calls, func(h HumanCall) bool {
		if h.Deadline.After(now) {
			return false
		}
		expired = append(expired, h.Agent)
		return true
	})
	for _, a := range expired {
		m.AddNote(fmt.Sprintf("(%s did not answer: timeout)", a), now, true)
	}
	return expired
}

// Verdicts on a queued turn about to start.
type Verdict int

const (
	RunTurn     Verdict = iota // run it
	NotServed                  // its agent is no longer served in the channel
	CallExpired                // it waited longer than call_timeout
	AtCap                      // its agent reached max_turns_per_agent
)

// admit decides whether the first queued turn runs. It changes nothing.
func (m *Machine) Admit(q QueuedTurn, served bool, now time.Time) Verdict {
	switch {
	case !served:
		return NotServed
	case now.Sub(q.Queued) > m.lim.CallTimeout:
		return CallExpired
	case m.st.AgentTurns[q.Agent] >= m.lim.MaxTurnsPerAgent:
		return AtCap
	}
	return RunTurn
}

// capNotice reports whether the ⚠️ of agent's turn cap is to be posted:
// once per conversation (until a restart).
func (m *Machine) CapNotice(agent string) bool {
	key := "cap:" + agent
	if m.st.Noticed[key] {
		return false
	}
	m.st.Noticed[key] = true
	return true
}

// startTurn counts a turn of agent against the guards.
func (m *Machine) StartTurn(agent string) {
	m.st.Turns++
	m.st.AgentTurns[agent]++
}

// endCall takes a queued turn off the queue (it ran, failed or was
// skipped): its messages lose the working reaction, and the queue has
// room again.
func (m *Machine) EndCall(q QueuedTurn, now time.Time) {
	m.st.Queue = slices.DeleteFunc(m.st.Queue, func(x QueuedTurn) bool { return x.ID == q.ID })
	delete(m.st.Noticed, noticeOverloaded)
	m.dequeued(q)
	m.st.Touch(now)
}

// startFacilitator starts the facilitator's turn: it is no longer due,
// and the messages that woke it are returned (they keep the working
// reaction until facilitatorDone). Messages that arrive during the turn
// wake it again.
func (m *Machine) StartFacilitator() (wake []string) {
	wake = m.st.WakeBy
	m.st.WakeBy, m.st.FacilitatorDue = nil, false
	m.StartTurn(m.facilitator)
	return wake
}

// facilitatorDone ends the facilitator's turn: the messages that woke it
// lose the working reaction.
func (m *Machine) FacilitatorDone(wake []string, now time.Time) {
	for _, ts := range wake {
		m.working(ts, -1)
	}
	m.st.Touch(now)
}

// concluded ends the conclusion (run or failed): the conversation is
// concluded, its queue and calls dropped; with done, the root gets the ✅.
// A conclusion without words (silent) posts nothing: in a reopened thread,
// the people's messages since the reopening were acknowledgements, never
// requests again (.LatestPersonRequest).
func (m *Machine) Concluded(now time.Time, done, silent bool) {
	st := m.st
	if silent && st.Reopened {
		st.Acknowledged = append(st.Acknowledged, st.SinceReopen...)
	}
	trigger := ""
	if st.Conclude != nil {
		trigger = st.Conclude.Trigger
	}
	st.Status = StatusConcluded
	st.Reopened = false
	st.SinceReopen = nil
	st.Conclude = nil
	m.SettleFacilitator()
	m.cancelQueue()
	m.working(trigger, -1)
	st.Touch(now)
	if done {
		m.fx = append(m.fx, ReactionChange{Done: true, Add: true})
	}
}
