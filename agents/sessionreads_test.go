package agents_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// sessionReads counts the reads of an expert's session keys.
type sessionReads struct {
	storePorts
	recent, all atomic.Int32
}

func (s *sessionReads) RecentSessions(ctx context.Context, ns string, n int) ([]string, error) {
	s.recent.Add(1)
	return s.storePorts.RecentSessions(ctx, ns, n)
}

func (s *sessionReads) Sessions(ctx context.Context, ns string) ([]string, error) {
	s.all.Add(1)
	return s.storePorts.Sessions(ctx, ns)
}

// An unbound expert's sessions are read once for its threading turn: the
// keys it is offered and those its key is matched against come from the
// same read, and a key past the 50 offered still binds.
func TestThreadingReadsSessionsOnce(t *testing.T) {
	r := newRig(t)
	reads := &sessionReads{storePorts: r.store}
	r.e = r.engine(fakePrompts{}, onStore(reads))
	for i := range 60 {
		r.clock.Advance(time.Second) // C00000 is the least recently used
		if err := r.store.AppendSession(context.Background(), memory.SessionAppend{Namespace: cora, Key: fmt.Sprintf("C%05d", i),
			Entries: []memory.SessionEntry{{Role: llm.RoleUser, Content: "x", At: r.clock.Now()}}}); err != nil {
			t.Fatal(err)
		}
	}
	r.model.on(cora, templates.PromptContextNotFound, threading("C00000", ""))
	root := r.send("", "U1", "Alice", cora+" what about customer C00000?")
	r.settle()
	if got := r.state(root.TS).Bindings[cora]; got != "C00000" {
		t.Errorf("bound to %q, want C00000 (the least recent of 60 sessions)", got)
	}
	if recent, all := reads.recent.Load(), reads.all.Load(); recent != 1 || all != 0 {
		t.Errorf("sessions read %d times most recent first and %d times in all, want once and never", recent, all)
	}
}
