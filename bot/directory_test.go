package bot

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/conclavehq/conclave/internal/testclock"
)

// TestTTLCache checks the directory's cache: a value is fetched once and
// served until it expires, an error is not kept, and a caller whose
// context ends stops waiting for a fetch under way.
func TestTTLCache(t *testing.T) {
	c := newTTLCache[string](time.Minute, 10)
	clock := testclock.New(time.Time{})
	now := clock.Now
	ctx := context.Background()
	fetches := 0
	fetch := func(v string, err error) func() (string, error) {
		return func() (string, error) { fetches++; return v, err }
	}

	boom := errors.New("boom")
	if _, err := c.load(ctx, "U1", now, fetch("", boom)); !errors.Is(err, boom) {
		t.Fatalf("a failed fetch: error = %v, want %v", err, boom)
	}
	if v, err := c.load(ctx, "U1", now, fetch("Ann", nil)); v != "Ann" || err != nil {
		t.Fatalf("after a failed fetch: %q, %v, want Ann fetched again", v, err)
	}
	if v, err := c.load(ctx, "U1", now, fetch("Bob", nil)); v != "Ann" || err != nil || fetches != 2 {
		t.Fatalf("within the TTL: %q, %v after %d fetches, want Ann from the cache after 2", v, err, fetches)
	}
	clock.Advance(time.Minute)
	if v, _ := c.load(ctx, "U1", now, fetch("Bob", nil)); v != "Bob" || fetches != 3 {
		t.Fatalf("after the TTL: %q after %d fetches, want Bob fetched anew", v, fetches)
	}

	started, release := make(chan struct{}), make(chan struct{})
	leader := make(chan string)
	go func() {
		v, _ := c.load(ctx, "U2", now, func() (string, error) { close(started); <-release; return "Cy", nil })
		leader <- v
	}()
	<-started
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.load(gone, "U2", now, fetch("Dee", nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("a caller whose context ended during a fetch: error = %v, want context.Canceled", err)
	}
	close(release)
	if v := <-leader; v != "Cy" {
		t.Errorf("the fetch under way answered %q, want Cy", v)
	}
	if v, _ := c.load(ctx, "U2", now, fetch("Dee", nil)); v != "Cy" || fetches != 3 {
		t.Errorf("after the shared fetch: %q after %d other fetches, want Cy from the cache", v, fetches)
	}
}
