package agents

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// reactionTimeout bounds one reaction change (Slack's rate limits
// included).
const reactionTimeout = 10 * time.Second

// reactionKey is one emoji on one message.
type reactionKey struct{ channel, ts, name string }

// reactor applies reaction changes off the turns' path: a turn queues a
// change and goes on, and a goroutine per emoji and message applies its
// changes one after the other, in the order they were queued, so an add
// is never overtaken by its remove. At most cap(calls) changes are sent at
// once (as many as turns run at once, which used to make them), so a
// burst does not open a connection to Slack per message. Engine.Run waits
// for every queued change before it returns.
type reactor struct {
	chat  Chat
	log   *slog.Logger
	calls chan struct{} // a slot per change being sent

	mu     sync.Mutex
	queues map[reactionKey][]bool // changes not applied yet (true: add); a key is present while its goroutine runs
	idle   *sync.Cond             // signalled when queues empties
}

func newReactor(chat Chat, log *slog.Logger, parallel int) *reactor {
	r := &reactor{chat: chat, log: log, calls: make(chan struct{}, parallel), queues: make(map[reactionKey][]bool)}
	r.idle = sync.NewCond(&r.mu)
	return r
}

// set queues adding (or removing) name on the message ts. The change is
// applied with ctx's values but not its cancellation: a turn stopped by
// shutdown still takes its reaction off.
func (r *reactor) set(ctx context.Context, channel, ts, name string, add bool) {
	key := reactionKey{channel: channel, ts: ts, name: name}
	r.mu.Lock()
	defer r.mu.Unlock()
	q, running := r.queues[key]
	r.queues[key] = append(q, add)
	if !running {
		go r.apply(context.WithoutCancel(ctx), key)
	}
}

// apply applies the changes of key until none is left.
func (r *reactor) apply(ctx context.Context, key reactionKey) {
	for {
		r.mu.Lock()
		q := r.queues[key]
		if len(q) == 0 {
			delete(r.queues, key)
			if len(r.queues) == 0 {
				r.idle.Broadcast()
			}
			r.mu.Unlock()
			return
		}
		add := q[0]
		r.queues[key] = q[1:]
		r.mu.Unlock()

		r.calls <- struct{}{}
		cctx, cancel := context.WithTimeout(ctx, reactionTimeout)
		var err error
		if add {
			err = r.chat.AddReaction(cctx, key.channel, key.ts, key.name)
		} else {
			err = r.chat.RemoveReaction(cctx, key.channel, key.ts, key.name)
		}
		cancel()
		<-r.calls
		if err != nil {
			r.log.Warn("reaction", slog.String(logChannel, key.channel), slog.String("ts", key.ts),
				slog.String("reaction", key.name), slog.Bool("add", add), slog.Any(logError, err))
		}
	}
}

// queued counts the changes not applied yet.
func (r *reactor) queued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.queues {
		n += len(q)
	}
	return n
}

// wait returns once every queued change is applied.
func (r *reactor) wait() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.queues) > 0 {
		r.idle.Wait()
	}
}
