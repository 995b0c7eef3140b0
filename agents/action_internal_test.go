package agents

import (
	"bytes"
	"testing"
)

// convo.action only chooses what carries the machine's choice out: asking
// for it changes neither the state nor the reactions the machine decided,
// whichever the choice (what changes, changes when it runs).
func TestActionOnlyChooses(t *testing.T) {
	for act := actNone; act <= actTimeout; act++ {
		st := &convState{
			Status:         statusOpen,
			FacilitatorDue: true,
			WakeBy:         []string{"1.000001"},
			Queue:          []queuedTurn{{ID: "conv-t1", Agent: "cora.eth", Trigger: "1.000001"}},
		}
		m := &machine{st: st, idPrefix: "conv"}
		e := New(Options{}, Deps{})
		c := &convo{e: e, st: st, m: m, log: e.log}
		before := st.encode()
		c.action(act)
		if after := st.encode(); !bytes.Equal(before, after) {
			t.Errorf("action %d changed the state:\n%s\nwas\n%s", act, after, before)
		}
		if fx := m.takeEffects(); len(fx) != 0 {
			t.Errorf("action %d made reaction changes: %v", act, fx)
		}
	}
}
