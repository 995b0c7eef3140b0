package bot

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

// TestTicketDispatchedForAcknowledgedEventsOnly: the ticket of an event
// is dispatched once its acknowledgement is queued, and never for one the
// handler failed to record (that one is left for Slack to deliver again).
func TestTicketDispatchedForAcknowledgedEventsOnly(t *testing.T) {
	// The redelivery comes after AckTimeout; the successful delivery must
	// be acknowledged before another, which a loaded machine may take a
	// while to do.
	r := newRig(t, fakeslack.Options{AckTimeout: 1500 * time.Millisecond}, nil)
	r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
		if call == 1 {
			if n := len(r.rec.ackedEvents()); n != 0 {
				t.Errorf("a ticket dispatched %d times before the first Record", n)
			}
			return errors.New("store unreachable")
		}
		return nil
	}
	r.run(t)
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "keep me"})
	if _, err := r.fake.WaitAck(testContext(t), d.EventID); err != nil {
		t.Fatal(err)
	}
	r.rec.waitDispatched(t, 1)
	acked := r.rec.ackedEvents()
	if len(acked) != 1 || acked[0].ID != d.EventID || acked[0].TS != d.TS {
		t.Fatalf("acked = %+v, want the one delivery that was recorded", acked)
	}
	if got := len(r.rec.wait(t, 1)); got != 1 {
		t.Errorf("recorded %d events", got)
	}
}
