package serial_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/conclavehq/conclave/internal/serial"
)

// TestOrderAndBound checks the order within a key, the bound across keys,
// and that work waiting for a slot past its context is dropped.
func TestOrderAndBound(t *testing.T) {
	q := serial.New[string](2)
	ctx := context.Background()
	var order []string
	block := make(chan struct{})
	started := make(chan string, 4)
	q.Go(ctx, "a", func() { started <- "a1"; <-block; order = append(order, "a1") })
	q.Go(ctx, "a", func() { order = append(order, "a2") })
	q.Go(ctx, "b", func() { started <- "b1"; <-block })
	got := map[string]bool{<-started: true, <-started: true}
	if !got["a1"] || !got["b1"] {
		t.Fatalf("started %v, want a1 and b1 at once", got)
	}
	if n := q.Len(); n != 3 {
		t.Errorf("Len = %d with a1 and b1 running and a2 queued, want 3", n)
	}
	// Both slots are taken: a third key waits until ctx ends, then its work
	// is dropped.
	short, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	if q.Go(short, "c", func() { ran = true }) {
		t.Error("Go = true for work dropped when its context ended while every slot was taken")
	}
	if n := q.Len(); n != 3 {
		t.Errorf("Len = %d after the dropped work, want 3", n)
	}
	close(block)
	q.Wait()
	if ran {
		t.Error("work ran after its context ended while every slot was taken")
	}
	if !slices.Equal(order, []string{"a1", "a2"}) {
		t.Errorf("key a ran %v, want a1 then a2", order)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("Len = %d after Wait, want 0", n)
	}
	// The slots are free again.
	done := false
	q.Go(short, "c", func() { done = true })
	q.Wait()
	if !done {
		t.Error("work of a new key did not run once the slots were free")
	}
}

// TestUnbounded: without a bound Go never waits, however many keys are
// busy, and each key's work still runs in order.
func TestUnbounded(t *testing.T) {
	q := serial.New[int](0)
	gone, cancel := context.WithCancel(context.Background())
	cancel() // Go must not need it
	block := make(chan struct{})
	var mu sync.Mutex
	order := map[int][]int{}
	const keys, each = 20, 5
	for k := range keys {
		for i := range each {
			ok := q.Go(gone, k, func() {
				<-block
				mu.Lock()
				order[k] = append(order[k], i)
				mu.Unlock()
			})
			if !ok {
				t.Fatalf("Go(%d) = false with no bound", k)
			}
		}
	}
	if n := q.Len(); n != keys*each {
		t.Errorf("Len = %d, want %d", n, keys*each)
	}
	close(block)
	q.Wait()
	for k := range keys {
		if !slices.Equal(order[k], []int{0, 1, 2, 3, 4}) {
			t.Errorf("key %d ran %v, want 0 to 4 in order", k, order[k])
		}
	}
}

// TestWaitIncludesLateWork: work queued behind running work while Wait
// waits is waited for too.
func TestWaitIncludesLateWork(t *testing.T) {
	q := serial.New[string](1)
	ctx := context.Background()
	release := make(chan struct{})
	var ran []string
	q.Go(ctx, "k", func() {
		<-release
		ran = append(ran, "first")
	})
	waited := make(chan []string)
	go func() {
		q.Wait()
		waited <- ran
	}()
	q.Go(ctx, "k", func() { ran = append(ran, "second") })
	close(release)
	if got := <-waited; !slices.Equal(got, []string{"first", "second"}) {
		t.Errorf("Wait returned after %v, want both pieces of work", got)
	}
}
