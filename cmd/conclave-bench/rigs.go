package main

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// benchTB lets the test rigs (fakeslack, llmfake), which take a
// testing.TB, run outside `go test`: cleanups run when the measurement
// ends, and errors the rigs report are collected for it to fail.
type benchTB struct {
	testing.TB // nil: only the methods below are called by the rigs

	mu       sync.Mutex
	cleanups []func()
	errs     []string
}

func (t *benchTB) Helper() {}

func (t *benchTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *benchTB) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, fmt.Sprintf(format, args...))
}

func (t *benchTB) Error(args ...any) { t.Errorf("%s", fmt.Sprint(args...)) }

func (t *benchTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "conclave-bench: "+format+"\n", args...)
	os.Exit(1)
}

func (t *benchTB) Logf(format string, args ...any) {}

func (t *benchTB) Log(args ...any) {}

// close runs the cleanups, last first, and returns the errors reported.
func (t *benchTB) close() []string {
	t.mu.Lock()
	cleanups := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.errs
}
