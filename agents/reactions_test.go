package agents_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
)

// TestReactionsOffTheTurnsPath: a turn does not wait for Slack to set or
// clear its working reaction; the changes are applied in the order they
// were made (an add is never overtaken by its remove), and Run waits for
// them before it returns.
func TestReactionsOffTheTurnsPath(t *testing.T) {
	const hourglass = "hourglass_flowing_sand"
	t.Run("a turn does not wait for its reactions", func(t *testing.T) {
		r := newRig(t)
		gate := make(chan struct{})
		r.chat.reactionGate = gate
		root := r.send("", "U1", "Alice", "hello")
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.e.Process(context.Background(), agents.ConversationID(team, chanA, root.TS), chanA)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			close(gate)
			t.Fatal("the turn waited for its reaction")
		}
		if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: elen ok"}) {
			t.Errorf("posts %q while the reaction was held", got)
		}
		close(gate)
		r.e.WaitReactions()
		want := []string{"add " + root.TS + " " + hourglass, "remove " + root.TS + " " + hourglass}
		if got := r.chat.reactionChanges(); !slices.Equal(got, want) {
			t.Errorf("reaction changes %q, want %q", got, want)
		}
		if r.chat.anyReaction(hourglass) {
			t.Error("a working reaction was left behind")
		}
	})
	t.Run("Run waits for them", func(t *testing.T) {
		r := newRig(t)
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(open) // a failed test leaves no change held
		r.chat.reactionGate = gate
		reports := make(chan agents.TurnReport, 1)
		// The changes are held until Run says it waits for them.
		logger := slog.New(slog.NewTextHandler(onWrite(func(line string) {
			if strings.Contains(line, "waiting for reaction changes") {
				open()
			}
		}), nil))
		e := r.engine(fakePrompts{}, reportTo(reports), func(d *agents.Deps) { d.Logger = logger })
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan []string, 1)
		go func() {
			if err := e.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
			ran <- r.chat.reactionChanges()
		}()
		if err := handle(ctx, e, agents.Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", Text: "hello"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reports:
		case <-time.After(30 * time.Second):
			t.Fatal("no turn")
		}
		cancel()
		if got := receive(t, ran, "Run did not return once its context ended"); len(got) != 2 {
			t.Errorf("reaction changes made when Run returned: %q, want the add and the remove", got)
		}
	})
}

// onWrite is a writer that hands every write to f, as a string.
type onWrite func(string)

func (f onWrite) Write(p []byte) (int, error) {
	f(string(p))
	return len(p), nil
}
