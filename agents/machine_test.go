package agents

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/conclavehq/conclave/ens"
)

// The state machine's tests: plain data in, plain data out; no store, no
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

	namedFac   = namedAgent{Agent: mFac, Role: ens.RoleFacilitator}
	namedExp   = namedAgent{Agent: mExp, Role: ens.RoleExpert}
	namedExp2  = namedAgent{Agent: mExp2, Role: ens.RoleExpert}
	namedHuman = namedAgent{Agent: mHuman, Role: ens.RoleHuman}
	namedClone = namedAgent{Agent: mClone, Role: ens.RoleClone}
)

// newMachine is an open conversation's machine with small guards.
func newMachine(t *testing.T, facilitator string) *machine {
	t.Helper()
	st, err := decodeState(nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Status = statusOpen
	return &machine{st: st, facilitator: facilitator, idPrefix: "c1", lim: limits{
		MaxTurns: 5, MaxTurnsPerAgent: 2, MaxQueued: 2, CallTimeout: time.Minute, Timeout: 10 * time.Minute,
	}}
}

func byPerson(ts, text string, end bool, named ...namedAgent) inbound {
	return inbound{TS: ts, Kind: kindPerson, UserID: "U1", Name: "Alice", At: mT0, Named: named, End: end}
}

func byAgent(ts, agent string, named ...namedAgent) inbound {
	return inbound{TS: ts, Kind: kindAgent, Author: agent, At: mT0, Named: named}
}

func byHuman(ts, agent string, end bool, named ...namedAgent) inbound {
	return inbound{TS: ts, Kind: kindHuman, Author: agent, UserID: "UT", Name: "Tina", At: mT0, Named: named, End: end}
}

func working(ts string, add bool) reactionChange { return reactionChange{TS: ts, Add: add} }
func done(add bool) reactionChange               { return reactionChange{Done: true, Add: add} }

func queued(m *machine) []string {
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
		setup    func(m *machine)
		in       inbound
		triggers bool
		check    func(t *testing.T, m *machine, r routed, fx []reactionChange)
	}{
		{
			name: "start: a person's message wakes the facilitator", fac: mFac, triggers: true,
			in: byPerson("1.1", "hello", false),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				st := m.st
				if !st.Routed["1.1"] || !st.FacilitatorDue || !slices.Equal(st.WakeBy, []string{"1.1"}) || !st.LastActivity.Equal(mT0) {
					t.Errorf("routed %v, due %v, wake %v, activity %v", st.Routed, st.FacilitatorDue, st.WakeBy, st.LastActivity)
				}
				if len(st.Participants) != 1 || st.Participants[0].UserID != "U1" {
					t.Errorf("participants %+v", st.Participants)
				}
				if !slices.Equal(fx, []reactionChange{working("1.1", true)}) {
					t.Errorf("effects %+v", fx)
				}
			},
		},
		{
			name: "content only: routed, nobody woken", fac: mFac, triggers: false,
			in: byPerson("1.1", "hello", false, namedExp),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if !m.st.Routed["1.1"] || m.st.FacilitatorDue || len(m.st.Queue) != 0 || len(fx) != 0 {
					t.Errorf("state %+v, effects %+v", m.st, fx)
				}
			},
		},
		{
			name: "a bot's message is content", fac: mFac, triggers: true,
			in: inbound{TS: "1.1", Kind: kindBot, At: mT0, Named: []namedAgent{namedExp}},
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if !m.st.Routed["1.1"] || m.st.FacilitatorDue || len(m.st.Queue) != 0 || len(m.st.Participants) != 0 {
					t.Errorf("state %+v", m.st)
				}
			},
		},
		{
			name: "call: naming an expert and a clone queues their turns", fac: mFac, triggers: true,
			in: byPerson("1.1", "cora and tina2?", false, namedExp, namedClone),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if got := queued(m); !slices.Equal(got, []string{mExp, mClone}) {
					t.Fatalf("queue %v", got)
				}
				q := m.st.Queue[0]
				if q.Trigger != "1.1" || !q.Queued.Equal(mT0.Add(time.Second)) || q.ID == "" || q.ID == m.st.Queue[1].ID {
					t.Errorf("queued turn %+v", q)
				}
				if m.st.Working["1.1"] != 3 || !slices.Equal(fx, []reactionChange{working("1.1", true)}) {
					t.Errorf("working %v, effects %+v", m.st.Working, fx)
				}
			},
		},
		{
			name: "call: an agent already waiting is queued once, answering both", fac: mFac, triggers: true,
			setup: func(m *machine) { m.receive(byPerson("1.1", "cora?", false, namedExp), true, mT0) },
			in:    byPerson("1.2", "cora, also this", false, namedExp),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if len(m.st.Queue) != 1 || !slices.Equal(m.st.Queue[0].triggers(), []string{"1.1", "1.2"}) {
					t.Errorf("queue %+v", m.st.Queue)
				}
			},
		},
		{
			name: "call: naming a human agent calls it, bounded by call_timeout", fac: mFac, triggers: true,
			in: byPerson("1.1", "tina?", false, namedHuman),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
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
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if len(m.st.Queue) != 0 || !m.st.FacilitatorDue {
					t.Errorf("queue %+v, due %v", m.st.Queue, m.st.FacilitatorDue)
				}
			},
		},
		{
			name: "answer: a human agent writing ends its call", fac: mFac, triggers: true,
			setup: func(m *machine) { m.receive(byPerson("1.1", "tina?", false, namedHuman), true, mT0) },
			in:    byHuman("1.2", mHuman, false),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
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
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if m.st.FacilitatorDue || !slices.Equal(queued(m), []string{mExp}) {
					t.Errorf("due %v, queue %v", m.st.FacilitatorDue, queued(m))
				}
			},
		},
		{
			name: "an agent naming itself does not queue itself", fac: mFac, triggers: true,
			in: byAgent("1.1", mExp, namedExp),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if len(m.st.Queue) != 0 || !m.st.FacilitatorDue {
					t.Errorf("queue %v, due %v", queued(m), m.st.FacilitatorDue)
				}
			},
		},
		{
			name: "guard max_queued: a full queue refuses the turn", fac: mFac, triggers: true,
			setup: func(m *machine) {
				m.receive(byPerson("1.1", "cora, paul", false, namedExp, namedExp2), true, mT0)
			},
			in: byPerson("1.2", "tina2?", false, namedClone),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if !slices.Equal(r.Refused, []string{mClone}) || len(m.st.Queue) != 2 {
					t.Errorf("refused %v, queue %v", r.Refused, queued(m))
				}
			},
		},
		{
			name: ":end: by a person asks for the conclusion and cancels the queue", fac: mFac, triggers: true,
			setup: func(m *machine) { m.receive(byPerson("1.1", "cora?", false, namedExp), true, mT0) },
			in:    byPerson("1.2", "thanks :end:", true, namedExp2),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				c := m.st.Conclude
				if c == nil || c.Reason != concludeByPerson || c.Trigger != "1.2" || r.Concluded {
					t.Fatalf("conclude %+v, routed %+v", c, r)
				}
				if len(m.st.Queue) != 0 || m.st.FacilitatorDue || len(m.st.WakeBy) != 0 {
					t.Errorf("queue %v, due %v, wake %v", queued(m), m.st.FacilitatorDue, m.st.WakeBy)
				}
				want := []reactionChange{working("1.1", false), working("1.2", true)}
				if !slices.Equal(fx, want) {
					t.Errorf("effects %+v, want %+v", fx, want)
				}
			},
		},
		{
			name: ":end: by a human agent asks for the conclusion", fac: mFac, triggers: true,
			in: byHuman("1.1", mHuman, true),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if m.st.Conclude == nil || m.st.Conclude.Reason != concludeByPerson {
					t.Errorf("conclude %+v", m.st.Conclude)
				}
			},
		},
		{
			name: ":end: by a person without a facilitator concludes at once", fac: "", triggers: true,
			in: byPerson("1.1", ":end:", true),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if !r.Concluded || m.st.Status != statusConcluded || m.st.Conclude != nil {
					t.Errorf("routed %+v, status %q, conclude %+v", r, m.st.Status, m.st.Conclude)
				}
			},
		},
		{
			name: ":end: in an agent's message asks for nothing", fac: mFac, triggers: true,
			in: inbound{TS: "1.1", Kind: kindAgent, Author: mExp, At: mT0, End: true},
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if m.st.Conclude != nil || m.st.Status != statusOpen {
					t.Errorf("conclude %+v, status %q", m.st.Conclude, m.st.Status)
				}
			},
		},
		{
			name: "while a conclusion waits, names trigger nothing", fac: mFac, triggers: true,
			setup: func(m *machine) { m.st.Conclude = &concludeRequest{Reason: concludeByTimeout} },
			in:    byPerson("1.1", "cora?", false, namedExp),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if len(m.st.Queue) != 0 || m.st.FacilitatorDue {
					t.Errorf("queue %v, due %v", queued(m), m.st.FacilitatorDue)
				}
			},
		},
		{
			name: "restart: a person writing in a concluded thread reopens it", fac: mFac, triggers: true,
			setup: func(m *machine) {
				m.st.Status = statusConcluded
				m.st.Turns, m.st.AgentTurns[mExp] = 4, 2
				m.st.Bindings[mExp] = "C1"
				m.st.Group = "grp-1"
				m.st.Noticed["cap:"+mExp] = true
				m.st.Noticed["name:x.eth"] = true
			},
			in: byPerson("1.1", "one more thing", false),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				st := m.st
				if !r.Restarted || st.Status != statusOpen || !st.Reopened || st.Turns != 0 || len(st.AgentTurns) != 0 {
					t.Errorf("routed %+v, status %q, reopened %v, turns %d %v", r, st.Status, st.Reopened, st.Turns, st.AgentTurns)
				}
				if st.Noticed["cap:"+mExp] || !st.Noticed["name:x.eth"] || st.Bindings[mExp] != "C1" || st.Group != "grp-1" {
					t.Errorf("noticed %v, bindings %v, group %q: caps reset, the rest kept", st.Noticed, st.Bindings, st.Group)
				}
				if !st.FacilitatorDue || !slices.Equal(fx, []reactionChange{done(false), working("1.1", true)}) {
					t.Errorf("due %v, effects %+v", st.FacilitatorDue, fx)
				}
			},
		},
		{
			name: "restart: a human agent writing reopens it too", fac: mFac, triggers: true,
			setup: func(m *machine) { m.st.Status = statusConcluded },
			in:    byHuman("1.1", mHuman, false),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if !r.Restarted || m.st.Status != statusOpen {
					t.Errorf("routed %+v, status %q", r, m.st.Status)
				}
			},
		},
		{
			name: "restart: an agent's message never reopens", fac: mFac, triggers: true,
			setup: func(m *machine) { m.st.Status = statusConcluded },
			in:    byAgent("1.1", mExp, namedExp2),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if r.Restarted || m.st.Status != statusConcluded || len(m.st.Queue) != 0 {
					t.Errorf("routed %+v, status %q, queue %v", r, m.st.Status, queued(m))
				}
			},
		},
		{
			name: "restart: a person's :end: in a concluded thread reopens nothing", fac: mFac, triggers: true,
			setup: func(m *machine) { m.st.Status = statusConcluded },
			in:    byPerson("1.1", ":end:", true),
			check: func(t *testing.T, m *machine, r routed, fx []reactionChange) {
				if r.Restarted || m.st.Status != statusConcluded || m.st.Conclude != nil {
					t.Errorf("routed %+v, status %q", r, m.st.Status)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, tt.fac)
			if tt.setup != nil {
				tt.setup(m)
				m.takeEffects()
			}
			r := m.receive(tt.in, tt.triggers, mT0.Add(time.Second))
			tt.check(t, m, r, m.takeEffects())
		})
	}
}

// TestMachineNext covers what the machine picks to do, in its order of
// precedence, and that picking changes nothing.
func TestMachineNext(t *testing.T) {
	now := mT0.Add(time.Hour)
	tests := []struct {
		name  string
		fac   string
		setup func(st *convState)
		want  action
	}{
		{"nothing to do", mFac, func(st *convState) { st.LastActivity = now }, actNone},
		{"not open", mFac, func(st *convState) { st.Status = statusConcluded; st.Queue = []queuedTurn{{ID: "q", Agent: mExp}} }, actNone},
		{"a conclusion waits", mFac, func(st *convState) {
			st.Conclude = &concludeRequest{Reason: concludeByEnd}
			st.Queue = []queuedTurn{{ID: "q", Agent: mExp}}
		}, actConclude},
		{"guard max_turns", mFac, func(st *convState) { st.Turns = 5; st.Queue = []queuedTurn{{ID: "q", Agent: mExp}} }, actGuard},
		{"timeout: a call expired", mFac, func(st *convState) {
			st.Calls = []humanCall{{Agent: mHuman, Deadline: now}}
			st.Queue = []queuedTurn{{ID: "q", Agent: mExp}}
		}, actExpireCalls},
		{"a queued turn", mFac, func(st *convState) { st.Queue = []queuedTurn{{ID: "q", Agent: mExp}}; st.FacilitatorDue = true }, actCall},
		{"the facilitator is due", mFac, func(st *convState) { st.FacilitatorDue = true }, actFacilitator},
		{"the facilitator waits for a human agent's answer", mFac, func(st *convState) {
			st.FacilitatorDue = true
			st.Calls = []humanCall{{Agent: mHuman, Deadline: now.Add(time.Second)}}
		}, actNone},
		{"due, but no facilitator", "", func(st *convState) { st.FacilitatorDue = true }, actSettle},
		{"timeout: inactivity", mFac, func(st *convState) { st.LastActivity = now.Add(-10 * time.Minute) }, actTimeout},
		{"inactivity not reached", mFac, func(st *convState) { st.LastActivity = now.Add(-10*time.Minute + time.Second) }, actNone},
		{"no inactivity clock while a call is pending", mFac, func(st *convState) {
			st.LastActivity = now.Add(-time.Hour)
			st.Calls = []humanCall{{Agent: mHuman, Deadline: now.Add(time.Second)}}
		}, actNone},
		{"no inactivity clock while a post waits", mFac, func(st *convState) {
			st.LastActivity = now.Add(-time.Hour)
			st.Outbox = []pendingPost{{PostID: "p"}}
		}, actNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, tt.fac)
			tt.setup(m.st)
			before := m.st.encode()
			if got := m.next(now); got != tt.want {
				t.Errorf("next = %d, want %d", got, tt.want)
			}
			if after := m.st.encode(); !bytes.Equal(before, after) {
				t.Errorf("next changed the state:\n%s\n%s", before, after)
			}
		})
	}
	t.Run("timeout off", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.lim.Timeout = 0
		m.st.LastActivity = now.Add(-24 * time.Hour)
		if got := m.next(now); got != actNone {
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
		q := queuedTurn{ID: "q", Agent: mExp, Queued: now.Add(-time.Minute)}
		m.st.AgentTurns[mExp2] = 2
		for _, tt := range []struct {
			name   string
			q      queuedTurn
			served bool
			want   verdict
		}{
			{"runs", q, true, runTurn},
			{"no longer served", q, false, notServed},
			{"waited past call_timeout", queuedTurn{ID: "q", Agent: mExp, Queued: now.Add(-time.Minute - 1)}, true, callExpired},
			{"guard max_turns_per_agent", queuedTurn{ID: "q", Agent: mExp2, Queued: now}, true, atCap},
		} {
			if got := m.admit(tt.q, tt.served, now); got != tt.want {
				t.Errorf("%s: admit = %d, want %d", tt.name, got, tt.want)
			}
		}
	})
	t.Run("a call runs and ends", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.receive(byPerson("1.1", "cora?", false, namedExp), true, mT0)
		m.st.Noticed[noticeOverloaded] = true
		m.takeEffects()
		q := m.st.Queue[0]
		m.startTurn(q.Agent)
		if m.st.Turns != 1 || m.st.AgentTurns[mExp] != 1 {
			t.Errorf("turns %d %v", m.st.Turns, m.st.AgentTurns)
		}
		m.endCall(q, now)
		if len(m.st.Queue) != 0 || m.st.Noticed[noticeOverloaded] || !m.st.LastActivity.Equal(now) {
			t.Errorf("queue %v, overload noticed %v, activity %v", queued(m), m.st.Noticed[noticeOverloaded], m.st.LastActivity)
		}
		// The facilitator still holds the message's working reaction.
		if fx := m.takeEffects(); len(fx) != 0 || m.st.Working["1.1"] != 1 {
			t.Errorf("effects %+v, working %v", fx, m.st.Working)
		}
	})
	t.Run("the cap's notice goes once until a restart", func(t *testing.T) {
		m := newMachine(t, mFac)
		if !m.capNotice(mExp) || m.capNotice(mExp) {
			t.Error("cap notice not exactly once")
		}
		m.st.Status = statusConcluded
		m.receive(byPerson("1.1", "again", false), true, now)
		if !m.capNotice(mExp) {
			t.Error("no cap notice after a restart")
		}
	})
	t.Run("the overload notice goes once until the queue has room", func(t *testing.T) {
		m := newMachine(t, mFac)
		if !m.overloadNotice() || m.overloadNotice() {
			t.Error("overload notice not exactly once")
		}
		m.endCall(queuedTurn{ID: "none"}, now)
		if !m.overloadNotice() {
			t.Error("no overload notice after a turn ended")
		}
	})
	t.Run("fail: a call that cannot answer wakes the facilitator with a note", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.addNote("(cora.test.eth could not answer: x)", now, true)
		m.addNote("(used crm__find)", now, false)
		if len(m.st.Notes) != 2 || m.st.Notes[0].At != now || m.st.Notes[0].ID == m.st.Notes[1].ID || !m.st.FacilitatorDue {
			t.Errorf("notes %+v, due %v", m.st.Notes, m.st.FacilitatorDue)
		}
		m2 := newMachine(t, mFac)
		m2.addNote("(used crm__find)", now, false)
		if m2.st.FacilitatorDue {
			t.Error("a tool's note woke the facilitator")
		}
	})
	t.Run("timeout: expired calls end with a note that wakes the facilitator", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.st.Calls = []humanCall{{Agent: mHuman, Deadline: now}, {Agent: "late.test.eth", Deadline: now.Add(time.Second)}}
		if got := m.expireCalls(now); !slices.Equal(got, []string{mHuman}) {
			t.Errorf("expired %v", got)
		}
		if len(m.st.Calls) != 1 || len(m.st.Notes) != 1 || m.st.Notes[0].Text != "("+mHuman+" did not answer: timeout)" || !m.st.FacilitatorDue {
			t.Errorf("calls %+v, notes %+v, due %v", m.st.Calls, m.st.Notes, m.st.FacilitatorDue)
		}
	})
	t.Run("the facilitator's turn", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.receive(byPerson("1.1", "hello", false), true, mT0)
		m.takeEffects()
		wake := m.startFacilitator()
		if !slices.Equal(wake, []string{"1.1"}) || m.st.FacilitatorDue || len(m.st.WakeBy) != 0 || m.st.Turns != 1 || m.st.AgentTurns[mFac] != 1 {
			t.Errorf("wake %v, due %v, turns %d %v", wake, m.st.FacilitatorDue, m.st.Turns, m.st.AgentTurns)
		}
		// A message during the turn wakes it again.
		m.receive(byPerson("1.2", "and?", false), true, mT0)
		m.takeEffects()
		m.facilitatorDone(wake, now)
		if fx := m.takeEffects(); !slices.Equal(fx, []reactionChange{working("1.1", false)}) || !m.st.FacilitatorDue {
			t.Errorf("effects %+v, due %v", fx, m.st.FacilitatorDue)
		}
	})
	t.Run(":end: by the facilitator asks for the conclusion", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.receive(byPerson("1.1", "cora?", false, namedExp), true, mT0)
		r := &concludeRequest{Reason: concludeByEnd, EndReply: "bye :end:", PrevPrompt: "p"}
		if m.requestConclude(r) {
			t.Fatal("closed without a conclusion")
		}
		if m.st.Conclude != r || len(m.st.Queue) != 0 || m.st.Status != statusOpen {
			t.Errorf("conclude %+v, queue %v, status %q", m.st.Conclude, queued(m), m.st.Status)
		}
		if m.next(now) != actConclude {
			t.Error("the conclusion is not what runs next")
		}
	})
	t.Run(":end: alone in a reopened thread concludes too", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.st.Reopened = true
		if m.requestConclude(&concludeRequest{Reason: concludeByEnd}) || m.st.Conclude == nil || m.st.Status != statusOpen {
			t.Errorf("conclude %+v, status %q", m.st.Conclude, m.st.Status)
		}
		if m.next(now) != actConclude {
			t.Error("the conclusion is not what runs next")
		}
	})
	t.Run("the conclusion ends the conversation", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.receive(byPerson("1.1", "cora?", false, namedExp), true, mT0)
		m.receive(byPerson("1.2", "thanks :end:", true), true, mT0)
		m.st.Reopened = true
		m.takeEffects()
		m.concluded(now, true, false)
		st := m.st
		if st.Status != statusConcluded || st.Reopened || st.Conclude != nil || len(st.Queue) != 0 || len(st.Calls) != 0 || !st.LastActivity.Equal(now) {
			t.Errorf("state %+v", st)
		}
		if fx := m.takeEffects(); !slices.Equal(fx, []reactionChange{working("1.2", false), done(true)}) {
			t.Errorf("effects %+v", fx)
		}
		if len(st.Working) != 0 {
			t.Errorf("working left %v", st.Working)
		}
	})
	t.Run("a conclusion with no facilitator to run it adds no ✅", func(t *testing.T) {
		m := newMachine(t, mFac)
		m.st.Conclude = &concludeRequest{Reason: concludeByTimeout}
		m.concluded(now, false, false)
		if fx := m.takeEffects(); len(fx) != 0 || m.st.Status != statusConcluded {
			t.Errorf("effects %+v, status %q", fx, m.st.Status)
		}
	})
	t.Run("guard and timeout conclusions", func(t *testing.T) {
		for _, reason := range []string{concludeByGuard, concludeByTimeout} {
			m := newMachine(t, mFac)
			if m.requestConclude(&concludeRequest{Reason: reason}) || m.st.Conclude.Reason != reason || m.next(now) != actConclude {
				t.Errorf("%s: conclude %+v", reason, m.st.Conclude)
			}
		}
	})
}

// TestMachineStart covers whether a new root starts a conversation.
func TestMachineStart(t *testing.T) {
	for _, tt := range []struct {
		name  string
		root  inbound
		start string
		fac   bool
		want  bool
	}{
		{"a person's root, start all, with a facilitator", byPerson("1.1", "hi", false), StartAll, true, true},
		{"a person's root, start all, no facilitator", byPerson("1.1", "hi", false), StartAll, false, false},
		{"a person's root, start mention, naming nobody", byPerson("1.1", "hi", false), StartMention, true, false},
		{"a person's root, start mention, naming an agent", byPerson("1.1", "cora?", false, namedExp), StartMention, true, true},
		{"a human agent's root", byHuman("1.1", mHuman, false), StartAll, true, true},
		{"a bot's root", inbound{TS: "1.1", Kind: kindBot, Named: []namedAgent{namedExp}}, StartAll, true, false},
	} {
		if got := startsOnRoot(tt.root, tt.start, tt.fac); got != tt.want {
			t.Errorf("%s: starts = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestMachineDeadline covers when a conversation next needs attention.
func TestMachineDeadline(t *testing.T) {
	now := mT0.Add(time.Hour)
	m := newMachine(t, mFac)
	m.st.LastActivity = now.Add(-time.Minute)
	if d := m.deadline(now); !d.Equal(now.Add(9*time.Minute)) || m.workDue(now) {
		t.Errorf("idle: deadline %v, due %v", d, m.workDue(now))
	}
	m.st.Calls = []humanCall{{Agent: mHuman, Deadline: now.Add(time.Minute)}}
	if d := m.deadline(now); !d.Equal(now.Add(time.Minute)) {
		t.Errorf("with a call: deadline %v", d)
	}
	m.st.Queue = []queuedTurn{{ID: "q", Agent: mExp}}
	if !m.workDue(now) {
		t.Error("a queued turn is not due now")
	}
	m.st.Outbox = []pendingPost{{PostID: "p", Next: now.Add(time.Second)}}
	if d := m.deadline(now); !d.Equal(now.Add(time.Second)) {
		t.Errorf("with a post waiting: deadline %v", d)
	}
}

// TestMachineAdopt covers a reply adopting a thread conclave did not start.
func TestMachineAdopt(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fresh []inbound
		want  string
	}{
		{"no reply names an agent", []inbound{byPerson("1.2", "hi", false)}, ""},
		{"the root naming an agent does not adopt", []inbound{byPerson("1.1", "cora?", false, namedExp)}, ""},
		{"a bot naming an agent does not adopt", []inbound{{TS: "1.2", Kind: kindBot, Named: []namedAgent{namedExp}}}, ""},
		{"the first reply naming an agent adopts", []inbound{
			byPerson("1.2", "hi", false), byAgent("1.3", "x", namedExp), byPerson("1.4", "paul?", false, namedExp2),
		}, "1.3"},
	} {
		if got := adopter(tt.fresh, "1.1"); got != tt.want {
			t.Errorf("%s: adopter = %q, want %q", tt.name, got, tt.want)
		}
	}
}
