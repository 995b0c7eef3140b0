// Package testlog is test support: a log sink that tests of every package
// (ens, agents and its subpackages, bot, cmd/conclave) share. It imports
// only the standard library, so any test may use it without an import
// cycle.
package testlog

import (
	"bytes"
	"context"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use: loggers write to it
// from many goroutines while a test reads what was logged.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // closed and replaced at each Write; nil until a Wait
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.buf.Write(p)
}

// Wait returns once what was written satisfies cond (checked now and after
// each Write), or with ctx's error when ctx ends first: a test waits on
// the log itself, not on a poll.
func (b *Buffer) Wait(ctx context.Context, cond func(logged string) bool) error {
	for {
		b.mu.Lock()
		ok := cond(b.buf.String())
		if b.written == nil {
			b.written = make(chan struct{})
		}
		ch := b.written
		b.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
