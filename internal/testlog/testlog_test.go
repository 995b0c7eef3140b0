package testlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { fmt.Fprintf(&b, "line %d\n", i) })
	}
	wg.Wait()
	got := b.String()
	if n := strings.Count(got, "\n"); n != 20 {
		t.Errorf("%d lines written, want 20:\n%s", n, got)
	}
	for i := range 20 {
		if !strings.Contains(got, fmt.Sprintf("line %d\n", i)) {
			t.Errorf("line %d missing", i)
		}
	}
}

func TestWaitReturnsOnceTheLogHoldsIt(t *testing.T) {
	var b Buffer
	b.Write([]byte("first\n"))
	done := make(chan error, 1)
	go func() {
		done <- b.Wait(context.Background(), func(s string) bool { return strings.Contains(s, "third") })
	}()
	b.Write([]byte("second\n"))
	b.Write([]byte("third\n"))
	if err := <-done; err != nil {
		t.Errorf("Wait = %v, want nil once third was written", err)
	}
	// Already there: at once.
	if err := b.Wait(context.Background(), func(s string) bool { return strings.Contains(s, "first") }); err != nil {
		t.Errorf("Wait for what is there = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx, func(s string) bool { return strings.Contains(s, "never") }); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with an ended context = %v, want context.Canceled", err)
	}
}
