package conversation

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

// The state Machine's tests: plain data in, plain data out; no store, no
// clock (times are given), no network.

const (
	mFac   = "elen.test.eth"  // the facilitator
	mExp   = "cora.test.eth"  // an expert
	mExp2  = "paul.test.eth"  // another expert
	mHuman = "tina.test.eth"  // a human agent
	mClone = "tina2.test.eth" // a clone
)

var (
	mT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	namedFac   = NamedAgent{Agent: mFac, Role: RoleFacilitator}
	namedExp   = NamedAgent{Agent: mExp, Role: RoleExpert}
	namedExp2  = NamedAgent{Agent: mExp2, Role: RoleExpert}
	namedHuman = NamedAgent{Agent: mHuman, Role: RoleHuman}
	namedClone = NamedAgent{Agent: mClone, Role: RoleClone}
)

// newMachine is an open conversation's Machine with small guards.
func newMachine(t *testing.T, facilitator string) *Machine {
	t.Helper()
	st, err := Decode(nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Status = StatusOpen
	return &Machine{st: st, facilitator: facilitator, idPrefix: "c1", lim: Limits{
		MaxTurns: 5, MaxTurnsPerAgent: 2, MaxQueued: 2, CallTimeout: time.Minute, Timeout: 10 * time.Minute,
	}}
}

func byPerson(ts, text string, end bool, named ...NamedAgent) Inbound {
	return Inbound{TS: ts, Kind: KindPerson, UserID: "U1", Name: "Alice", At: mT0, Named: named, End: end}
}

func byAgent(ts, agent string, named ...NamedAgent) Inbound {
	return Inbound{TS: ts, Kind: KindAgent, Author: agent, At: mT0, Named: named}
}

func byHuman(ts, agent string, end bool, named ...NamedAgent) Inbound {
	return Inbound{TS: ts, Kind: KindHuman, Author: agent, UserID: "UT", Name: "Tina", At: mT0, Named: named, End: end}
}

func working(ts string, add bool) ReactionChange { return ReactionChange{TS: ts, Add: add} }
func done(add bool) ReactionChange               { return ReactionChange{Done: true, Add: add} }

func queued(m *Machine) []string {
	var out []string
	for _, q := range m.st.Queue {
		out = append(out, q.Agent)
	}
	return out
}

// TestMachineReceive covers routing one message: start, calls, answers,
// :end: by a person, restart and the queue guard.
func TestMachineReceive(t *testing.T) {
	tests := []struct {
		name     string
		fac      string
		setup    func(m *Machine)
		in       Inbound
		triggers bool
		check    func(t *testing.T, m *Machine, r Routed, fx []ReactionChange)
	}{
		{
			name: "start: a person's message wakes the facilitator", fac: mFac, triggers: true,
			in: byPerson("1.1", "hello", false),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				st := m.st
				if !st.Routed["1.1"] || !st.FacilitatorDue || !slices.Equal(st.WakeBy, []string{"1.1"}) || !st.LastActivity.Equal(mT0) {
					t.Errorf("Routed %v, due %v, wake %v, activity %v", st.Routed, st.FacilitatorDue, st.WakeBy, st.LastActivity)
				}
				if len(st.Participants) != 1 || st.Participants[0].UserID != "U1" {
					t.Errorf("participants %+v", st.Participants)
				}
				if !slices.Equal(fx, []ReactionChange{working("1.1", true)}) {
					t.Errorf("effects %+v", fx)
				}
			},
		},
		{
			name: "content only: Routed, nobody woken", fac: mFac, triggers: false,
			in: byPerson("1.1", "hello", false, namedExp),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if !m.st.Routed["1.1"] || m.st.FacilitatorDue || len(m.st.Queue) != 0 || len(fx) != 0 {
					t.Errorf("state %+v, effects %+v", m.st, fx)
				}
			},
		},
		{
			name: "a bot's message is content", fac: mFac, triggers: true,
			in: Inbound{TS: "1.1", Kind: KindBot, At: mT0, Named: []NamedAgent{namedExp}},
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if !m.st.Routed["1.1"] || m.st.FacilitatorDue || len(m.st.Queue) != 0 || len(m.st.Participants) != 0 {
					t.Errorf("state %+v", m.st)
				}
			},
		},
		{
			name: "call: naming an expert and a clone queues their turns", fac: mFac, triggers: true,
			in: byPerson("1.1", "cora and tina2?", false, namedExp, namedClone),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if got := queued(m); !slices.Equal(got, []string{mExp, mClone}) {
					t.Fatalf("queue %v", got)
				}
				q := m.st.Queue[0]
				if q.Trigger != "1.1" || !q.Queued.Equal(mT0.Add(time.Second)) || q.ID == "" || q.ID == m.st.Queue[1].ID {
					t.Errorf("queued turn %+v", q)
				}
				if m.st.Working["1.1"] != 3 || !slices.Equal(fx, []ReactionChange{working("1.1", true)}) {
					t.Errorf("working %v, effects %+v", m.st.Working, fx)
				}
			},
		},
		{
			name: "call: an agent already waiting is queued once, answering both", fac: mFac, triggers: true,
			setup: func(m *Machine) { m.Receive(byPerson("1.1", "cora?", false, namedExp), true, mT0) },
			in:    byPerson("1.2", "cora, also this", false, namedExp),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if len(m.st.Queue) != 1 || !slices.Equal(m.st.Queue[0].Triggers(), []string{"1.1", "1.2"}) {
					t.Errorf("queue %+v", m.st.Queue)
				}
			},
		},
		{
			name: "call: naming a human agent calls it, bounded by call_timeout", fac: mFac, triggers: true,
			in: byPerson("1.1", "tina?", false, namedHuman),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if len(m.st.Calls) != 1 || m.st.Calls[0].Agent != mHuman || !m.st.Calls[0].Deadline.Equal(mT0.Add(time.Second+time.Minute)) {
					t.Errorf("calls %+v", m.st.Calls)
				}
				if len(m.st.Queue) != 0 {
					t.Errorf("a human agent was queued: %+v", m.st.Queue)
				}
			},
		},
		{
			name: "naming the facilitator only wakes it", fac: mFac, triggers: true,
			in: byPerson("1.1", "elen?", false, namedFac),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if len(m.st.Queue) != 0 || !m.st.FacilitatorDue {
					t.Errorf("queue %+v, due %v", m.st.Queue, m.st.FacilitatorDue)
				}
			},
		},
		{
			name: "answer: a human agent writing ends its call", fac: mFac, triggers: true,
			setup: func(m *Machine) { m.Receive(byPerson("1.1", "tina?", false, namedHuman), true, mT0) },
			in:    byHuman("1.2", mHuman, false),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if len(m.st.Calls) != 0 {
					t.Errorf("calls %+v", m.st.Calls)
				}
				if len(m.st.Participants) != 2 || m.st.Participants[1].Agent != mHuman {
					t.Errorf("participants %+v", m.st.Participants)
				}
			},
		},
		{
			name: "the facilitator's own message does not wake it", fac: mFac, triggers: true,
			in: byAgent("1.1", mFac, namedExp),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if m.st.FacilitatorDue || !slices.Equal(queued(m), []string{mExp}) {
					t.Errorf("due %v, queue %v", m.st.FacilitatorDue, queued(m))
				}
			},
		},
		{
			name: "an agent naming itself does not queue itself", fac: mFac, triggers: true,
			in: byAgent("1.1", mExp, namedExp),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if len(m.st.Queue) != 0 || !m.st.FacilitatorDue {
					t.Errorf("queue %v, due %v", queued(m), m.st.FacilitatorDue)
				}
			},
		},
		{
			name: "guard max_queued: a full queue refuses the turn", fac: mFac, triggers: true,
			setup: func(m *Machine) {
				m.Receive(byPerson("1.1", "cora, paul", false, namedExp, namedExp2), true, mT0)
			},
			in: byPerson("1.2", "tina2?", false, namedClone),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if !slices.Equal(r.Refused, []string{mClone}) || len(m.st.Queue) != 2 {
					t.Errorf("refused %v, queue %v", r.Refused, queued(m))
				}
			},
		},
		{
			name: ":end: by a person asks for the conclusion and cancels the queue", fac: mFac, triggers: true,
			setup: func(m *Machine) { m.Receive(byPerson("1.1", "cora?", false, namedExp), true, mT0) },
			in:    byPerson("1.2", "thanks :end:", true, namedExp2),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				c := m.st.Conclude
				if c == nil || c.Reason != ConcludeByPerson || c.Trigger != "1.2" || r.Concluded {
					t.Fatalf("conclude %+v, Routed %+v", c, r)
				}
				if len(m.st.Queue) != 0 || m.st.FacilitatorDue || len(m.st.WakeBy) != 0 {
					t.Errorf("queue %v, due %v, wake %v", queued(m), m.st.FacilitatorDue, m.st.WakeBy)
				}
				want := []ReactionChange{working("1.1", false), working("1.2", true)}
				if !slices.Equal(fx, want) {
					t.Errorf("effects %+v, want %+v", fx, want)
				}
			},
		},
		{
			name: ":end: by a human agent asks for the conclusion", fac: mFac, triggers: true,
			in: byHuman("1.1", mHuman, true),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if m.st.Conclude == nil || m.st.Conclude.Reason != ConcludeByPerson {
					t.Errorf("conclude %+v", m.st.Conclude)
				}
			},
		},
		{
			name: ":end: by a person without a facilitator concludes at once", fac: "", triggers: true,
			in: byPerson("1.1", ":end:", true),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if !r.Concluded || m.st.Status != StatusConcluded || m.st.Conclude != nil {
					t.Errorf("Routed %+v, status %q, conclude %+v", r, m.st.Status, m.st.Conclude)
				}
			},
		},
		{
			name: ":end: in an agent's message asks for nothing", fac: mFac, triggers: true,
			in: Inbound{TS: "1.1", Kind: KindAgent, Author: mExp, At: mT0, End: true},
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if m.st.Conclude != nil || m.st.Status != StatusOpen {
					t.Errorf("conclude %+v, status %q", m.st.Conclude, m.st.Status)
				}
			},
		},
		{
			name: "while a conclusion waits, names trigger nothing", fac: mFac, triggers: true,
			setup: func(m *Machine) { m.st.Conclude = &ConcludeRequest{Reason: ConcludeByTimeout} },
			in:    byPerson("1.1", "cora?", false, namedExp),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if len(m.st.Queue) != 0 || m.st.FacilitatorDue {
					t.Errorf("queue %v, due %v", queued(m), m.st.FacilitatorDue)
				}
			},
		},
		{
			name: "restart: a person writing in a concluded thread reopens it", fac: mFac, triggers: true,
			setup: func(m *Machine) {
				m.st.Status = StatusConcluded
				m.st.Turns, m.st.AgentTurns[mExp] = 4, 2
				m.st.Bindings[mExp] = "C1"
				m.st.Group = "grp-1"
				m.st.Noticed["cap:"+mExp] = true
				m.st.Noticed["name:x.eth"] = true
			},
			in: byPerson("1.1", "one more thing", false),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				st := m.st
				if !r.Restarted || st.Status != StatusOpen || !st.Reopened || st.Turns != 0 || len(st.AgentTurns) != 0 {
					t.Errorf("Routed %+v, status %q, reopened %v, turns %d %v", r, st.Status, st.Reopened, st.Turns, st.AgentTurns)
				}
				if st.Noticed["cap:"+mExp] || !st.Noticed["name:x.eth"] || st.Bindings[mExp] != "C1" || st.Group != "grp-1" {
					t.Errorf("noticed %v, bindings %v, group %q: caps reset, the rest kept", st.Noticed, st.Bindings, st.Group)
				}
				if !st.FacilitatorDue || !slices.Equal(fx, []ReactionChange{done(false), working("1.1", true)}) {
					t.Errorf("due %v, effects %+v", st.FacilitatorDue, fx)
				}
			},
		},
		{
			name: "restart: a human agent writing reopens it too", fac: mFac, triggers: true,
			setup: func(m *Machine) { m.st.Status = StatusConcluded },
			in:    byHuman("1.1", mHuman, false),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if !r.Restarted || m.st.Status != StatusOpen {
					t.Errorf("Routed %+v, status %q", r, m.st.Status)
				}
			},
		},
		{
			name: "restart: an agent's message never reopens", fac: mFac, triggers: true,
			setup: func(m *Machine) { m.st.Status = StatusConcluded },
			in:    byAgent("1.1", mExp, namedExp2),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if r.Restarted || m.st.Status != StatusConcluded || len(m.st.Queue) != 0 {
					t.Errorf("Routed %+v, status %q, queue %v", r, m.st.Status, queued(m))
				}
			},
		},
		{
			name: "restart: a person's :end: in a concluded thread reopens nothing", fac: mFac, triggers: true,
			setup: func(m *Machine) { m.st.Status = StatusConcluded },
			in:    byPerson("1.1", ":end:", true),
			check: func(t *testing.T, m *Machine, r Routed, fx []ReactionChange) {
				if r.Restarted || m.st.Status != StatusConcluded || m.st.Conclude != nil {
					t.Errorf("Routed %+v, status %q", r, m.st.Status)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, tt.fac)
			if tt.setup != nil {
				tt.setup(m)
				m.TakeEffects()
			}
			r := m.Receive(tt.in, tt.triggers, mT0.Add(time.Second))
			tt.check(t, m, r, m.TakeEffects())
		})
	}
}

// TestMachineNext covers what the Machine picks to do, in its order of
// precedence, and that picking changes nothing.
func TestMachineNext(t *testing.T) {
	now := mT0.Add(time.Hour)
	tests := []struct {
		name  string
		fac   string
		setup func(st *State)
		want  Action
	}{
		{"nothing to do", mFac, func(st *State) { st.LastActivity = now }, ActNone},
		{"not open", mFac, func(st *State) { st.Status = StatusConcluded; st.Queue = []QueuedTurn{{ID: "q", Agent: mExp}} }, ActNone},
		{"a conclusion waits", mFac, func(st *State) {
			st.Conclude = &ConcludeRequest{Reason: ConcludeByEnd}
			st.Queue = []QueuedTurn{{ID: "q", Agent: mExp}}
		}, ActConclude},
		{"guard max_turns", mFac, func(st *State) { st.Turns = 5; st.Queue = []QueuedTurn{{ID: "q", Agent: mExp}} }, ActGuard},
		{"timeout: a call expired", mFac, func(st *State) {
			st.Calls = []HumanCall{{Agent: mHuman, Deadline: now}}
			st.Queue = []QueuedTurn{{ID: "q", Agent: mExp}}
		}, ActExpireCalls},
		{"a queued turn", mFac, func(st *State) { st.Queue = []QueuedTurn{{ID: "q", Agent: mExp}}; st.FacilitatorDue = true }, ActCall},
		{"the facilitator is due", mFac, func(st *State) { st.FacilitatorDue = true }, ActFacilitator},
		{"the facilitator waits for a human agent's answer", mFac, func(st *State) {
			st.FacilitatorDue = true
			st.Calls = []HumanCall{{Agent: mHuman, Deadline: now.Add(time.Second)}}
		}, ActNone},
		{"due, but no facilitator", "", func(st *State) { st.FacilitatorDue = true }, ActSettle},
		{"timeout: inactivity", mFac, func(st *State) { st.LastActivity = now.Add(-10 * time.Minute) }, ActTimeout},
		{"inactivity not reached", mFac, func(st *State) { st.LastActivity = now.Add(-10*time.Minute + time.Second) }, ActNone},
		{"no inactivity clock while a call is pending", mFac, func(st *State) {
			st.LastActivity = now.Add(-time.Hour)
			st.Calls = []HumanCall{{Agent: mHuman, Deadline: now.Add(time.Second)}}
		}, ActNone},
		{"no inactivity clock while a post waits", mFac, func(st *State) {
			st.LastActivity = now.Add(-time.Hour)
			st.Outbox = []PendingPost{{PostID: "p"}}
		}, ActNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, tt.fac)
			tt.setup(m.st)
			before := m.st.Encode()
			if got := m.Next(now); got != tt.want {
				t.Errorf("next = %d, want %d", got, tt.want)
			}
			if after := m.st.Encode(); !bytes.Equal(before, after) {
				t.Errorf("next changed the state:\n%s\n%s", before, after)
			}
		})
	}
	t.Run("timeout off", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.lim.Timeout = 0
		m.st.LastActivity = now.Add(-24 * time.Hour)
		if got := m.Next(now); got != ActNone {
			t.Errorf("next = %d with timeout 0", got)
		}
	})
}

// TestMachineTurns covers what a turn's outcome does: a call admitted,
// skipped at its cap, timed out or not served, ended; the facilitator's
// turn; :end: by the facilitator; the conclusion; failures' notes.
func TestMachineTurns(t *testing.T) {
	now := mT0.Add(time.Minute)
	t.Run("admit", func(t *testing.T) {
		m := newMachine(t, mFac)
		q := QueuedTurn{ID: "q", Agent: mExp, Queued: now.Add(-time.Minute)}
		m.st.AgentTurns[mExp2] = 2
		for _, tt := range []struct {
			name   string
			q      QueuedTurn
			served bool
			want   Verdict
		}{
			{"runs", q, true, RunTurn},
			{"no longer served", q, false, NotServed},
			{"waited past call_timeout", QueuedTurn{ID: "q", Agent: mExp, Queued: now.Add(-time.Minute - 1)}, true, CallExpired},
			{"guard max_turns_per_agent", QueuedTurn{ID: "q", Agent: mExp2, Queued: now}, true, AtCap},
		} {
			if got := m.Admit(tt.q, tt.served, now); got != tt.want {
				t.Errorf("%s: admit = %d, want %d", tt.name, got, tt.want)
			}
		}
	})
	t.Run("a call runs and ends", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.Receive(byPerson("1.1", "cora?", false, namedExp), true, mT0)
		m.st.Noticed[noticeOverloaded] = true
		m.TakeEffects()
		q := m.st.Queue[0]
		m.StartTurn(q.Agent)
		if m.st.Turns != 1 || m.st.AgentTurns[mExp] != 1 {
			t.Errorf("turns %d %v", m.st.Turns, m.st.AgentTurns)
		}
		m.EndCall(q, now)
		if len(m.st.Queue) != 0 || m.st.Noticed[noticeOverloaded] || !m.st.LastActivity.Equal(now) {
			t.Errorf("queue %v, overload noticed %v, activity %v", queued(m), m.st.Noticed[noticeOverloaded], m.st.LastActivity)
		}
		// The facilitator still holds the message's working reaction.
		if fx := m.TakeEffects(); len(fx) != 0 || m.st.Working["1.1"] != 1 {
			t.Errorf("effects %+v, working %v", fx, m.st.Working)
		}
	})
	t.Run("the cap's notice goes once until a restart", func(t *testing.T) {
		m := newMachine(t, mFac)
		if !m.CapNotice(mExp) || m.CapNotice(mExp) {
			t.Error("cap notice not exactly once")
		}
		m.st.Status = StatusConcluded
		m.Receive(byPerson("1.1", "again", false), true, now)
		if !m.CapNotice(mExp) {
			t.Error("no cap notice after a restart")
		}
	})
	t.Run("the overload notice goes once until the queue has room", func(t *testing.T) {
		m := newMachine(t, mFac)
		if !m.OverloadNotice() || m.OverloadNotice() {
			t.Error("overload notice not exactly once")
		}
		m.EndCall(QueuedTurn{ID: "none"}, now)
		if !m.OverloadNotice() {
			t.Error("no overload notice after a turn ended")
		}
	})
	t.Run("fail: a call that cannot answer wakes the facilitator with a note", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.AddNote("(cora.test.eth could not answer: x)", now, true)
		m.AddNote("(used crm__find)", now, false)
		if len(m.st.Notes) != 2 || m.st.Notes[0].At != now || m.st.Notes[0].ID == m.st.Notes[1].ID || !m.st.FacilitatorDue {
			t.Errorf("notes %+v, due %v", m.st.Notes, m.st.FacilitatorDue)
		}
		m2 := newMachine(t, mFac)
		m2.AddNote("(used crm__find)", now, false)
		if m2.st.FacilitatorDue {
			t.Error("a tool's note woke the facilitator")
		}
	})
	t.Run("timeout: expired calls end with a note that wakes the facilitator", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.st.Calls = []HumanCall{{Agent: mHuman, Deadline: now}, {Agent: "late.test.eth", Deadline: now.Add(time.Second)}}
		if got := m.ExpireCalls(now); !slices.Equal(got, []string{mHuman}) {
			t.Errorf("expired %v", got)
		}
		if len(m.st.Calls) != 1 || len(m.st.Notes) != 1 || m.st.Notes[0].Text != "("+mHuman+" did not answer: timeout)" || !m.st.FacilitatorDue {
			t.Errorf("calls %+v, notes %+v, due %v", m.st.Calls, m.st.Notes, m.st.FacilitatorDue)
		}
	})
	t.Run("the facilitator's turn", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.Receive(byPerson("1.1", "hello", false), true, mT0)
		m.TakeEffects()
		wake := m.StartFacilitator()
		if !slices.Equal(wake, []string{"1.1"}) || m.st.FacilitatorDue || len(m.st.WakeBy) != 0 || m.st.Turns != 1 || m.st.AgentTurns[mFac] != 1 {
			t.Errorf("wake %v, due %v, turns %d %v", wake, m.st.FacilitatorDue, m.st.Turns, m.st.AgentTurns)
		}
		// A message during the turn wakes it again.
		m.Receive(byPerson("1.2", "and?", false), true, mT0)
		m.TakeEffects()
		m.FacilitatorDone(wake, now)
		if fx := m.TakeEffects(); !slices.Equal(fx, []ReactionChange{working("1.1", false)}) || !m.st.FacilitatorDue {
			t.Errorf("effects %+v, due %v", fx, m.st.FacilitatorDue)
		}
	})
	t.Run(":end: by the facilitator asks for the conclusion", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.Receive(byPerson("1.1", "cora?", false, namedExp), true, mT0)
		r := &ConcludeRequest{Reason: ConcludeByEnd, EndReply: "bye :end:", PrevPrompt: "p"}
		if m.RequestConclude(r) {
			t.Fatal("closed without a conclusion")
		}
		if m.st.Conclude != r || len(m.st.Queue) != 0 || m.st.Status != StatusOpen {
			t.Errorf("conclude %+v, queue %v, status %q", m.st.Conclude, queued(m), m.st.Status)
		}
		if m.Next(now) != ActConclude {
			t.Error("the conclusion is not what runs next")
		}
	})
	t.Run(":end: alone in a reopened thread concludes too", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.st.Reopened = true
		if m.RequestConclude(&ConcludeRequest{Reason: ConcludeByEnd}) || m.st.Conclude == nil || m.st.Status != StatusOpen {
			t.Errorf("conclude %+v, status %q", m.st.Conclude, m.st.Status)
		}
		if m.Next(now) != ActConclude {
			t.Error("the conclusion is not what runs next")
		}
	})
	t.Run("the conclusion ends the conversation", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.Receive(byPerson("1.1", "cora?", false, namedExp), true, mT0)
		m.Receive(byPerson("1.2", "thanks :end:", true), true, mT0)
		m.st.Reopened = true
		m.TakeEffects()
		m.Concluded(now, true, false)
		st := m.st
		if st.Status != StatusConcluded || st.Reopened || st.Conclude != nil || len(st.Queue) != 0 || len(st.Calls) != 0 || !st.LastActivity.Equal(now) {
			t.Errorf("state %+v", st)
		}
		if fx := m.TakeEffects(); !slices.Equal(fx, []ReactionChange{working("1.2", false), done(true)}) {
			t.Errorf("effects %+v", fx)
		}
		if len(st.Working) != 0 {
			t.Errorf("working left %v", st.Working)
		}
	})
	t.Run("a conclusion with no facilitator to run it adds no ✅", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.st.Conclude = &ConcludeRequest{Reason: ConcludeByTimeout}
		m.Concluded(now, false, false)
		if fx := m.TakeEffects(); len(fx) != 0 || m.st.Status != StatusConcluded {
			t.Errorf("effects %+v, status %q", fx, m.st.Status)
		}
	})
	t.Run("guard and timeout conclusions", func(t *testing.T) {
		for _, reason := range []string{ConcludeByGuard, ConcludeByTimeout} {
			m := newMachine(t, mFac)
			if m.RequestConclude(&ConcludeRequest{Reason: reason}) || m.st.Conclude.Reason != reason || m.Next(now) != ActConclude {
				t.Errorf("%s: conclude %+v", reason, m.st.Conclude)
			}
		}
	})
}

// TestMachineStart covers whether a new root starts a conversation.
func TestMachineStart(t *testing.T) {
	for _, tt := range []struct {
		name  string
		root  Inbound
		start string
		fac   bool
		want  bool
	}{
		{"a person's root, start all, with a facilitator", byPerson("1.1", "hi", false), StartAll, true, true},
		{"a person's root, start all, no facilitator", byPerson("1.1", "hi", false), StartAll, false, false},
		{"a person's root, start mention, naming nobody", byPerson("1.1", "hi", false), StartMention, true, false},
		{"a person's root, start mention, naming an agent", byPerson("1.1", "cora?", false, namedExp), StartMention, true, true},
		{"a human agent's root", byHuman("1.1", mHuman, false), StartAll, true, true},
		{"a bot's root", Inbound{TS: "1.1", Kind: KindBot, Named: []NamedAgent{namedExp}}, StartAll, true, false},
	} {
		if got := StartsOnRoot(tt.root, tt.start, tt.fac); got != tt.want {
			t.Errorf("%s: starts = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestMachineDeadline covers when a conversation next needs attention.
func TestMachineDeadline(t *testing.T) {
	now := mT0.Add(time.Hour)
	m := newMachine(t, mFac)
	m.st.LastActivity = now.Add(-time.Minute)
	if d := m.Read().Deadline(now); !d.Equal(now.Add(9*time.Minute)) || m.Read().WorkDue(now) {
		t.Errorf("idle: deadline %v, due %v", d, m.Read().WorkDue(now))
	}
	m.st.Calls = []HumanCall{{Agent: mHuman, Deadline: now.Add(time.Minute)}}
	if d := m.Read().Deadline(now); !d.Equal(now.Add(time.Minute)) {
		t.Errorf("with a call: deadline %v", d)
	}
	m.st.Queue = []QueuedTurn{{ID: "q", Agent: mExp}}
	if !m.Read().WorkDue(now) {
		t.Error("a queued turn is not due now")
	}
	m.st.Outbox = []PendingPost{{PostID: "p", Next: now.Add(time.Second)}}
	if d := m.Read().Deadline(now); !d.Equal(now.Add(time.Second)) {
		t.Errorf("with a post waiting: deadline %v", d)
	}
}

// TestMachineAdopt covers a reply adopting a thread conclave did not start.
func TestMachineAdopt(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fresh []Inbound
		want  string
	}{
		{"no reply names an agent", []Inbound{byPerson("1.2", "hi", false)}, ""},
		{"the root naming an agent does not adopt", []Inbound{byPerson("1.1", "cora?", false, namedExp)}, ""},
		{"a bot naming an agent does not adopt", []Inbound{{TS: "1.2", Kind: KindBot, Named: []NamedAgent{namedExp}}}, ""},
		{"the first reply naming an agent adopts", []Inbound{
			byPerson("1.2", "hi", false), byAgent("1.3", "x", namedExp), byPerson("1.4", "paul?", false, namedExp2),
		}, "1.3"},
	} {
		if got := Adopter(tt.fresh, "1.1"); got != tt.want {
			t.Errorf("%s: Adopter = %q, want %q", tt.name, got, tt.want)
		}
	}
}
