// Package testlog is test support: a log sink that tests of every package
// (ens, agents and its subpackages, bot, cmd/conclave) share. It imports
// only the standard library, so any test may use it without an import
// cycle.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use: loggers write to it
// from many goroutines while a test reads what was logged.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
