package testlog

import (
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
