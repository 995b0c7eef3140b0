package agents

import (
	"bytes"
	"testing"

	"github.com/conclavehq/conclave/agents/conversation"
)

// convo.action only chooses what carries the machine's choice out: asking
// for it changes neither the state nor the reactions the machine decided,
// whichever the choice (what changes, changes when it runs).
func TestActionOnlyChooses(t *testing.T) {
	for act := conversation.ActNone; act <= conversation.ActTimeout; act++ {
		st := &convState{
			Status:         statusOpen,
			FacilitatorDue: true,
			WakeBy:         []string{"1.000001"},
			Queue:          []queuedTurn{{ID: "conv-t1", Agent: "cora.eth", Trigger: "1.000001"}},
		}
		m := loadMachine(t, st, limits{}, "", "conv")
		e := New(Options{}, Deps{})
		c := &convo{e: e, m: m, log: e.log}
		before := m.Encode()
		c.action(act)
		if after := m.Encode(); !bytes.Equal(before, after) {
			t.Errorf("action %d changed the state:\n%s\nwas\n%s", act, after, before)
		}
		if fx := m.TakeEffects(); len(fx) != 0 {
			t.Errorf("action %d made reaction changes: %v", act, fx)
		}
	}
}

// loadMachine is the machine over a copy of st, as the engine loads it.
func loadMachine(t *testing.T, st *convState, lim limits, facilitator, idPrefix string) *conversation.Machine {
	t.Helper()
	m, err := conversation.Load(st.Encode(), lim, facilitator, idPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
