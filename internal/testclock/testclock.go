// Package testclock is the one fake clock of conclave's tests: a time that
// moves only when a test says so, and a Sleep that waits for nothing.
// Every package's tests (and the test support of any package, such as
// memory/storetest) may import it: it imports only the standard library.
package testclock

import (
	"context"
	"sync"
	"time"
)

// Start is where a clock made by New(time.Time{}) stands.
var Start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a settable clock, safe for concurrent use. Its Now is what the
// packages take as their clock (memory.Options.Now, agents.Deps.Now,
// ens.Options.Now, llm.WithClock …).
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

// New returns a clock stopped at start (Start when zero).
func New(start time.Time) *Clock {
	if start.IsZero() {
		start = Start
	}
	return &Clock{now: start}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep is a wait between retries that takes no time: it records d and
// moves the clock on by it, or returns ctx's error when ctx has ended.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

// Sleeps returns the waits Sleep was asked for, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}
