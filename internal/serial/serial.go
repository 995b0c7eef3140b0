// Package serial runs work in order per key and across keys at once: the
// work queued under one key runs one piece after the other, in the order
// it was queued, on a goroutine of that key's, while other keys' work runs
// beside it. The Slack transport records each thread's events this way,
// and the engine applies each message's reaction changes this way.
//
// It imports nothing of conclave, so any package may use it.
package serial

import (
	"context"
	"sync"
)

// Queues is a serial queue per key. The zero value is not usable; call
// New.
type Queues[K comparable] struct {
	slots chan struct{} // a slot per key being worked on; nil when unbounded

	mu      sync.Mutex
	pending map[K][]func() // by key; present while the key's goroutine runs or waits for a slot
	n       int            // work queued or running
	idle    *sync.Cond     // broadcast when n falls to 0
}

// New returns queues that work on at most parallel keys at once; parallel
// ≤ 0 sets no bound.
func New[K comparable](parallel int) *Queues[K] {
	q := &Queues[K]{pending: make(map[K][]func())}
	if parallel > 0 {
		q.slots = make(chan struct{}, parallel)
	}
	q.idle = sync.NewCond(&q.mu)
	return q
}

// Go queues f behind the work of key, and returns at once when key has
// work queued or running. Otherwise f starts a goroutine for key, which
// needs a slot: when every slot is taken, Go waits for one, or for ctx to
// end, in which case f is dropped (with whatever was queued behind it
// meanwhile) and Go returns false. Work runs under no context of Go's.
func (q *Queues[K]) Go(ctx context.Context, key K, f func()) bool {
	q.mu.Lock()
	q.n++
	if pending, busy := q.pending[key]; busy {
		q.pending[key] = append(pending, f)
		q.mu.Unlock()
		return true
	}
	q.pending[key] = nil
	q.mu.Unlock()
	if q.slots != nil {
		select {
		case q.slots <- struct{}{}: // a free slot is taken whatever ctx says
		default:
			if !q.waitSlot(ctx) {
				q.mu.Lock()
				q.done(1 + len(q.pending[key]))
				delete(q.pending, key)
				q.mu.Unlock()
				return false
			}
		}
	}
	go q.work(key, f)
	return true
}

// waitSlot waits for a slot, or for ctx to end (false).
func (q *Queues[K]) waitSlot(ctx context.Context) bool {
	select {
	case q.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// work runs f, then the work queued behind it under key, until none is
// left. It gives its slot back before the last piece counts as over, so
// that once Wait returns the goroutine has nothing left to do.
func (q *Queues[K]) work(key K, f func()) {
	for {
		f()
		q.mu.Lock()
		if pending := q.pending[key]; len(pending) > 0 {
			f, q.pending[key] = pending[0], pending[1:]
			q.done(1)
			q.mu.Unlock()
			continue
		}
		delete(q.pending, key)
		if q.slots != nil {
			<-q.slots
		}
		q.done(1)
		q.mu.Unlock()
		return
	}
}

// done counts k pieces of work as over; q.mu is held.
func (q *Queues[K]) done(k int) {
	q.n -= k
	if q.n == 0 {
		q.idle.Broadcast()
	}
}

// Len is how much work is queued or running.
func (q *Queues[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Wait returns once no work is queued or running (work queued meanwhile
// included).
func (q *Queues[K]) Wait() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n > 0 {
		q.idle.Wait()
	}
}
