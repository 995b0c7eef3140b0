package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testclock"
)

// errStoreAway is what the engine's Record returns while Redis does not
// answer.
var errStoreAway = fmt.Errorf("agents: record message: dial tcp 127.0.0.1:6379: connect: connection refused: %w", agents.ErrStoreUnavailable)

// onFakeClock puts the rig's Bot on clock: arrivals are read from it and
// the waits between record attempts move it on without waiting.
func (r *rig) onFakeClock() *testclock.Clock {
	clock := testclock.New(time.Time{})
	r.bot.now, r.bot.sleep = clock.Now, clock.Sleep
	return clock
}

// waitLog waits until the rig's log has text.
func (r *rig) waitLog(t *testing.T, text string) {
	t.Helper()
	if err := r.logs.Wait(testContext(t), func(s string) bool { return strings.Contains(s, text) }); err != nil {
		t.Fatalf("no %q in the log (%v):\n%s", text, err, r.logs)
	}
}

// checkAttempts checks that every record attempt within the window was
// allowed no further than the end of the window, and the waits between
// them kept inside it and followed the retry policy. deadlines are those
// of the attempts within the window; the clock's first waits are theirs
// (tries past the window wait on the same clock afterwards).
func checkAttempts(t *testing.T, clock *testclock.Clock, deadlines []time.Duration) {
	t.Helper()
	sleeps := clock.Sleeps()
	if len(sleeps) >= len(deadlines) {
		sleeps = sleeps[:len(deadlines)-1]
	}
	if len(deadlines) != len(sleeps)+1 {
		t.Fatalf("%d attempts and %d waits between them", len(deadlines), len(sleeps))
	}
	var slept time.Duration
	for i, d := range sleeps {
		lo := recordRetries.Wait(i+1, 0, 0)
		hi := recordRetries.Wait(i+1, 1, 0)
		if d < lo || d > hi {
			t.Errorf("wait %d = %v, want within [%v, %v]", i+1, d, lo, hi)
		}
		slept += d
	}
	if slept >= recordWindow {
		t.Errorf("waited %v in all between attempts, want under %v", slept, recordWindow)
	}
	slept = 0
	for i, d := range deadlines {
		if i > 0 {
			slept += sleeps[i-1]
		}
		// The window is counted on the fake clock; an attempt's deadline
		// on the real one can only be nearer than what the window left.
		if d > recordWindow-slept {
			t.Errorf("attempt %d may last %v, past the window (%v left)", i+1, d, recordWindow-slept)
		}
	}
}

// attempts keeps how long each record attempt was allowed to run.
type attempts struct {
	mu        sync.Mutex
	deadlines []time.Duration
}

func (a *attempts) add(ctx context.Context) {
	left := time.Hour
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deadlines = append(a.deadlines, left)
}

func (a *attempts) all() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.deadlines...)
}

// TestShortStoreOutageIsRiddenOut: while the store does not answer, the
// event's record is tried again within the window, and the envelope is
// acknowledged on its first delivery once a try succeeds.
func TestShortStoreOutageIsRiddenOut(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	clock := r.onFakeClock()
	var tries attempts
	r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
		tries.add(ctx)
		if call <= 3 {
			return errStoreAway
		}
		return nil
	}
	r.run(t)
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "during the restart"})
	ack, err := r.fake.WaitAck(testContext(t), d.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.RetryAttempt != 0 {
		t.Errorf("acknowledged delivery attempt %d, want the first (0)", ack.RetryAttempt)
	}
	if evs := r.rec.wait(t, 1); len(evs) != 1 || evs[0].Text != "during the restart" {
		t.Errorf("recorded %+v, want the message once", evs)
	}
	if n := len(r.fake.Deliveries()); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	checkAttempts(t, clock, tries.all())
	if n := len(tries.all()); n != 4 {
		t.Errorf("%d attempts, want 4 (3 failed)", n)
	}
	if !strings.Contains(r.logs.String(), "event recorded once the store answered again") {
		t.Errorf("the recovery was not logged:\n%s", r.logs)
	}
}

// TestLongStoreOutageLeavesTheEnvelope: when the store still does not
// answer at the end of the window, the envelope is left unacknowledged;
// the record is tried on until lateRecordLimit; its redelivery is then
// recorded and acknowledged once.
func TestLongStoreOutageLeavesTheEnvelope(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	clock := r.onFakeClock()
	var down atomic.Bool
	down.Store(true)
	var tries attempts
	var late atomic.Int32
	r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
		if !down.Load() {
			return nil
		}
		// The warning is logged before the tries past the window begin.
		if strings.Contains(r.logs.String(), "event not recorded; left unacknowledged") {
			late.Add(1)
		} else {
			tries.add(ctx)
		}
		return errStoreAway
	}
	r.run(t)
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "after the restart"})
	r.waitLog(t, "event not recorded; left unacknowledged")
	r.waitLog(t, "event still not recorded")
	if acks := r.fake.Acks(); len(acks) != 0 {
		t.Fatalf("acknowledged while the store was away: %+v", acks)
	}
	checkAttempts(t, clock, tries.all())
	if n := len(tries.all()); n < 3 {
		t.Errorf("%d attempts within the window, want several", n)
	}
	// Past the window, tries went on, spaced by the policy, until
	// lateRecordLimit after the arrival.
	var slept time.Duration
	for _, w := range clock.Sleeps() {
		slept += w
	}
	if n := late.Load(); n < 10 || slept < lateRecordLimit-recordRetries.Cap || slept > lateRecordLimit {
		t.Errorf("%d tries past the window, %v waited in all; want tries until %v", n, slept, lateRecordLimit)
	}

	down.Store(false)
	if _, ok := r.fake.Redeliver(d.EventID, "timeout"); !ok {
		t.Fatal("no redelivery")
	}
	ack, err := r.fake.WaitAck(testContext(t), d.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.RetryAttempt != 1 {
		t.Errorf("acknowledged delivery attempt %d, want the redelivery (1)", ack.RetryAttempt)
	}
	if evs := r.rec.wait(t, 1); len(evs) != 1 {
		t.Errorf("recorded %d times, want once", len(evs))
	}
}

// TestRecordTriesEndAtOnce: an error that does not say the store is away,
// and a drain (the envelope is Slack's to deliver elsewhere), end the tries
// after the first.
func TestRecordTriesEndAtOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(r *rig) error
	}{
		{"other error", func(*rig) error { return errors.New("agents: record message: message ts is empty") }},
		{"drain", func(r *rig) error { r.bot.Drain(); return errStoreAway }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{}, nil)
			clock := r.onFakeClock()
			var calls atomic.Int32
			r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
				calls.Add(1)
				return c.fail(r)
			}
			r.run(t)
			r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "odd"})
			r.waitLog(t, "event not recorded; left unacknowledged")
			if n := calls.Load(); n != 1 {
				t.Errorf("Record called %d times, want 1", n)
			}
			if s := clock.Sleeps(); len(s) != 0 {
				t.Errorf("waited %v before giving up", s)
			}
			if acks := r.fake.Acks(); len(acks) != 0 {
				t.Errorf("acknowledged: %+v", acks)
			}
		})
	}
}

// TestRecordLandingPastTheWindowRuns: when the store answers again after
// the window, the event's record lands on a later try and the event runs
// at once (its ticket dispatched), without an acknowledgement (its
// envelope's window is over) and without waiting for Slack's redelivery.
func TestRecordLandingPastTheWindowRuns(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	clock := r.onFakeClock()
	// Within the window, the waits of 100 ms to 400 ms make fewer than 20
	// tries; the store answers on the 30th, about 4 s after the arrival.
	const answersOn = 30
	r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
		if call < answersOn {
			return errStoreAway
		}
		return nil
	}
	r.run(t)
	r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "during the restart"})
	r.waitLog(t, "event recorded after its acknowledgement window")
	if !strings.Contains(r.logs.String(), "event not recorded; left unacknowledged") {
		t.Errorf("the window's end was not logged:\n%s", r.logs)
	}
	if evs := r.rec.wait(t, 1); len(evs) != 1 || evs[0].Text != "during the restart" {
		t.Errorf("recorded %+v, want the message once", evs)
	}
	if got := r.rec.waitDispatched(t, 1); len(got) != 1 {
		t.Errorf("%d tickets dispatched, want 1: the event runs once its record lands", len(got))
	}
	if acks := r.fake.Acks(); len(acks) != 0 {
		t.Errorf("acknowledged past the window: %+v", acks)
	}
	if n := len(r.fake.Deliveries()); n != 1 {
		t.Errorf("%d deliveries, want 1: nothing waited for a redelivery", n)
	}
	var slept time.Duration
	for _, w := range clock.Sleeps() {
		slept += w
	}
	if slept < recordWindow || slept > lateRecordLimit {
		t.Errorf("%v waited before the record landed, want past the window and within %v", slept, lateRecordLimit)
	}
}
