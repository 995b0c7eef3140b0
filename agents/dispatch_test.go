package agents

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// dueless is a store whose Due lists nothing, so that only the hand-off
// from Record can start a turn; it counts the Due calls.
type dueless struct {
	Store
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
	store := &dueless{Store: r.store}
	reports := make(chan TurnReport, 1)
	e := r.engine(fakePrompts{}, onStore(store), reportTo(reports))
	runEngine(t, e)
	ctx := context.Background()

	if err := handle(ctx, e, Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "hello"}); err != nil {
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
	r := newRig(t)
	r.opts.SweepInterval = time.Hour
	store := &dueless{Store: r.store}
	reports := make(chan TurnReport, 1)
	e := r.engine(fakePrompts{}, onStore(store), reportTo(reports))
	runEngine(t, e)
	ctx := context.Background()

	ev := Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "hello"}
	ticket, err := e.Record(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	// Dispatching another event's ticket (here: an ignored one) starts nothing.
	other, err := e.Record(ctx, Event{Team: team, Channel: "C-none", TS: "1.000000", UserID: "U1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	other.Dispatch()
	select {
	case tr := <-reports:
		t.Fatalf("a turn ran before the acknowledgement: %+v", tr)
	case <-time.After(200 * time.Millisecond):
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
}

// TestZeroTicketDispatchesNothing: the zero Ticket (an event Record
// ignored) is safe to dispatch.
func TestZeroTicketDispatchesNothing(t *testing.T) {
	var zero Ticket
	zero.Dispatch()
	called := 0
	NewTicket(func() { called++ }).Dispatch()
	if called != 1 {
		t.Errorf("NewTicket's Dispatch called its function %d times, want 1", called)
	}
}
