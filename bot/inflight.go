package bot

import (
	"context"
	"sync"
)

// threadQueues runs work for several threads at once and for one thread
// in arrival order: events of one conversation are recorded one after the
// other, as they came, while a burst of events across conversations does
// not queue behind one another's store round trips (each envelope must be
// acknowledged within Slack's 3 s).
type threadQueues struct {
	slots chan struct{} // bounds the threads being worked on
	wg    sync.WaitGroup

	mu     sync.Mutex
	queues map[string][]func() // by thread; present while a goroutine works on it
}

func newThreadQueues(parallel int) *threadQueues {
	return &threadQueues{slots: make(chan struct{}, parallel), queues: make(map[string][]func())}
}

// run runs f after the work queued for the same key, on a goroutine of
// its own. When every slot is taken it waits for one (so the reader of the
// socket slows down) or for ctx, in which case f is dropped: its envelope
// stays unacknowledged and Slack delivers it again.
func (q *threadQueues) run(ctx context.Context, key string, f func()) {
	q.mu.Lock()
	if pending, busy := q.queues[key]; busy {
		q.queues[key] = append(pending, f)
		q.mu.Unlock()
		return
	}
	q.queues[key] = nil
	q.mu.Unlock()
	select {
	case q.slots <- struct{}{}:
	case <-ctx.Done():
		q.mu.Lock()
		delete(q.queues, key)
		q.mu.Unlock()
		return
	}
	q.wg.Go(func() {
		defer func() { <-q.slots }()
		for f != nil {
			f()
			q.mu.Lock()
			if pending := q.queues[key]; len(pending) > 0 {
				f, q.queues[key] = pending[0], pending[1:]
			} else {
				f = nil
				delete(q.queues, key)
			}
			q.mu.Unlock()
		}
	})
}

// wait waits for the work started so far.
func (q *threadQueues) wait() { q.wg.Wait() }
