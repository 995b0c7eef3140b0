package agents_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/memory"
)

// dueless is a store whose Due lists nothing, so that only the hand-off
// from Record can start a turn; it counts the Due calls.
type dueless struct {
	storePorts
	dues atomic.Int64
}

func (s *dueless) Due(context.Context, time.Time, int) ([]string, error) {
	s.dues.Add(1)
	return nil, nil
}

// TestRecordHandsTheConversationToAWorker: a message recorded by this
// replica goes straight to a worker; no sweep of the store's due indexes
// (one Lua script per shard on Redis) runs for it.
func TestRecordHandsTheConversationToAWorker(t *testing.T) {
	r := newRig(t)
	r.opts.SweepInterval = time.Hour
	store := &dueless{storePorts: r.store}
	reports := make(chan agents.TurnReport, 1)
	e := r.engine(fakePrompts{}, onStore(store), reportTo(reports))
	runEngine(t, e)
	ctx := context.Background()

	if err := handle(ctx, e, agents.Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	select {
	case tr := <-reports:
		if tr.Outcome != "ok" || tr.Role != "facilitator" {
			t.Errorf("turn %+v", tr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the recorded message never got its turn")
	}
	if n := store.dues.Load(); n != 1 {
		t.Errorf("Due called %d times, want once (when Run starts)", n)
	}
}

// TestTicketWaitsForTheAcknowledgement: a recorded message gets no turn
// (no model call) until the transport, having acknowledged the event,
// calls its ticket's Dispatch.
func TestTicketWaitsForTheAcknowledgement(t *testing.T) {
	// In a synctest bubble time passes only once every goroutine waits, so
	// the half hour below passes at once and a turn started late (however
	// late, short of the sweep) would have reported by then.
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.opts.SweepInterval = time.Hour
		store := &dueless{storePorts: r.store}
		reports := make(chan agents.TurnReport, 1)
		e := r.engine(fakePrompts{}, onStore(store), reportTo(reports))
		runEngine(t, e)
		ctx := context.Background()

		ev := agents.Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "hello"}
		ticket, err := e.Record(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		// Dispatching another event's ticket (here: an ignored one) starts nothing.
		other, err := e.Record(ctx, agents.Event{Team: team, Channel: "C-none", TS: "1.000000", UserID: "U1", Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		other.Dispatch()
		select {
		case tr := <-reports:
			t.Fatalf("a turn ran before the acknowledgement: %+v", tr)
		case <-time.After(30 * time.Minute):
		}
		ticket.Dispatch()
		select {
		case tr := <-reports:
			if tr.Outcome != "ok" {
				t.Errorf("turn %+v", tr)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the acknowledged message never got its turn")
		}
	})
}

// TestZeroTicketDispatchesNothing: the zero Ticket (an event Record
// ignored) is safe to dispatch.
func TestZeroTicketDispatchesNothing(t *testing.T) {
	var zero agents.Ticket
	zero.Dispatch()
	called := 0
	agents.NewTicket(func() { called++ }).Dispatch()
	if called != 1 {
		t.Errorf("NewTicket's Dispatch called its function %d times, want 1", called)
	}
}

// handOverOnRelease is a store that lists nothing due (only hand-offs
// start turns) and, once the first release of a conversation is made,
// runs onRelease before the worker hears of it.
type handOverOnRelease struct {
	dueless
	once      sync.Once
	onRelease func()
	// marker is a conversation whose loading closes loaded.
	marker string
	loaded chan struct{}
}

func (s *handOverOnRelease) Commit(ctx context.Context, l memory.Lock, c memory.Commit) (bool, error) {
	pending, err := s.dueless.Commit(ctx, l, c)
	if c.Release && err == nil {
		s.once.Do(s.onRelease)
	}
	return pending, err
}

func (s *handOverOnRelease) AcquireAndLoad(ctx context.Context, id string, ttl time.Duration, q memory.Lookup) (memory.Lock, memory.Snapshot, memory.Found, error) {
	if id == s.marker {
		close(s.loaded)
	}
	return s.dueless.AcquireAndLoad(ctx, id, ttl, q)
}

// TestHandOverWhileItsWorkerFinishes: a message recorded after its
// conversation's worker released the lock, and handed over before that
// worker is done with the conversation, is taken up again by that worker
// at once, not left to the sweeper (which here finds nothing).
func TestHandOverWhileItsWorkerFinishes(t *testing.T) {
	r := newRig(t)
	r.opts.SweepInterval = time.Hour
	store := &handOverOnRelease{dueless: dueless{storePorts: r.store}, marker: "marker", loaded: make(chan struct{})}
	reports := make(chan agents.TurnReport, 2)
	e := r.engine(fakePrompts{}, onStore(store), reportTo(reports))
	ctx := context.Background()
	root := agents.Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "hello"}
	reply := agents.Event{ID: "Ev2", Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS, UserID: "U1", UserName: "Alice", Text: "and more"}
	store.onRelease = func() {
		// The worker released the first turn's lock and is not done yet:
		// the reply is recorded and handed over now. The marker, handed
		// over after it, is loaded by another worker only once the
		// engine has dealt with the reply's hand-off (one queue, in
		// order).
		if err := handle(ctx, e, reply); err != nil {
			t.Errorf("Record: %v", err)
		}
		e.DispatchSoon(store.marker)
		select { // on the worker's goroutine: no t.Fatal here
		case <-store.loaded:
		case <-time.After(time.Minute):
			t.Error("the hand-off after the reply's was never taken")
		}
	}
	runEngine(t, e)
	if err := handle(ctx, e, root); err != nil {
		t.Fatal(err)
	}
	for i, what := range []string{"the message never got its turn", "the reply handed over while its conversation's worker finished never got its turn"} {
		if tr := receive(t, reports, what); tr.Outcome != "ok" {
			t.Errorf("turn %d: %+v", i+1, tr)
		}
	}
	if got := r.chat.texts(); len(got) != 2 {
		t.Errorf("posts %q, want one per message", got)
	}
}
