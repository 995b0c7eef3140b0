package bot

import (
	"context"
	"errors"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

// TestThreadsAreRecordedApart holds the recording of a thread's first
// message: with HandleParallel above 1 a message of another thread is
// recorded and acknowledged meanwhile, and the held thread's second
// message waits for its first.
func TestThreadsAreRecordedApart(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, func(o *Options) { o.HandleParallel = 4 })
	release := make(chan struct{})
	r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
		if ev.Text != "first of A" {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return errors.New("held past the handle timeout")
		}
	}
	r.run(t)
	ctx := testContext(t)
	a := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "first of A"})
	r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", ThreadTS: a.TS, Text: "second of A"})
	b := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "thread B"})
	if _, err := r.fake.WaitAck(ctx, b.Key()); err != nil {
		t.Fatalf("thread B waited behind thread A: %v", err)
	}
	if evs := r.rec.wait(t, 1); len(evs) != 1 || evs[0].Text != "thread B" {
		t.Fatalf("recorded %+v while A was held, want only thread B", evs)
	}
	close(release)
	evs := r.rec.wait(t, 3)
	if evs[1].Text != "first of A" || evs[2].Text != "second of A" {
		t.Errorf("thread A recorded as %q, %q", evs[1].Text, evs[2].Text)
	}
}

// TestThreadQueues checks the order within a key and the bound across
// keys.
func TestThreadQueues(t *testing.T) {
	q := newThreadQueues(2)
	ctx := context.Background()
	var order []string
	block := make(chan struct{})
	started := make(chan string, 4)
	q.run(ctx, "a", func() { started <- "a1"; <-block; order = append(order, "a1") })
	q.run(ctx, "a", func() { order = append(order, "a2") })
	q.run(ctx, "b", func() { started <- "b1"; <-block })
	got := map[string]bool{<-started: true, <-started: true}
	if !got["a1"] || !got["b1"] {
		t.Fatalf("started %v, want a1 and b1 at once", got)
	}
	// Both slots are taken: a third key waits until ctx ends, then its work
	// is dropped.
	short, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	q.run(short, "c", func() { ran = true })
	close(block)
	q.wait()
	if ran {
		t.Error("work ran after its context ended while every slot was taken")
	}
	if len(order) != 2 || order[0] != "a1" || order[1] != "a2" {
		t.Errorf("key a ran %v, want a1 then a2", order)
	}
}
