package agents_test

import (
	"context"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
)

// TestComputeWorkers: a turn runs to its end with one compute token, and
// with no bound at all (Options.ComputeWorkers negative: no tokens).
func TestComputeWorkers(t *testing.T) {
	for _, n := range []int{1, -1} {
		r := newRig(t)
		r.opts.SweepInterval = time.Hour
		r.opts.ComputeWorkers = n
		reports := make(chan agents.TurnReport, 1)
		e := r.engine(fakePrompts{}, reportTo(reports))
		if bounded, size := e.ComputeTokens(); !bounded != (n < 0) || (n > 0 && size != n) {
			t.Fatalf("ComputeWorkers %d: tokens %v (cap %d)", n, bounded, size)
		}
		runEngine(t, e)
		if err := handle(context.Background(), e, agents.Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "hello"}); err != nil {
			t.Fatal(err)
		}
		select {
		case tr := <-reports:
			if tr.Outcome != "ok" || tr.Role != "facilitator" {
				t.Errorf("ComputeWorkers %d: turn %+v", n, tr)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("ComputeWorkers %d: the recorded message never got its turn", n)
		}
	}
}
