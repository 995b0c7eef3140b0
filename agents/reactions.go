package agents

import (
	"context"
	"log/slog"
	"time"

	"github.com/conclavehq/conclave/internal/serial"
)

// reactionTimeout bounds one reaction change (Slack's rate limits
// included).
const reactionTimeout = 10 * time.Second

// reactionKey is one emoji on one message.
type reactionKey struct{ channel, ts, name string }

// reactor applies reaction changes off the turns' path: a turn queues a
// change and goes on, and the changes of one emoji on one message are
// applied one after the other, in the order they were queued (a serial
// queue per key), so an add is never overtaken by its remove. At most
// cap(calls) changes are sent at once (as many as turns run at once,
// which used to make them), so a burst does not open a connection to
// Slack per message. Engine.Run waits for every queued change before it
// returns.
type reactor struct {
	chat    reactionSetter
	log     *slog.Logger
	calls   chan struct{} // a slot per change being sent
	changes *serial.Queues[reactionKey]
}

func newReactor(chat reactionSetter, log *slog.Logger, parallel int) *reactor {
	// The queues have no bound of their own: queuing never waits; calls
	// bounds the sending.
	return &reactor{chat: chat, log: log, calls: make(chan struct{}, parallel), changes: serial.New[reactionKey](0)}
}

// set queues adding (or removing) name on the message ts. The change is
// applied with ctx's values but not its cancellation: a turn stopped by
// shutdown still takes its reaction off.
func (r *reactor) set(ctx context.Context, channel, ts, name string, add bool) {
	key := reactionKey{channel: channel, ts: ts, name: name}
	ctx = context.WithoutCancel(ctx)
	r.changes.Go(ctx, key, func() { r.apply(ctx, key, add) })
}

// apply makes one change.
func (r *reactor) apply(ctx context.Context, key reactionKey, add bool) {
	r.calls <- struct{}{}
	defer func() { <-r.calls }()
	ctx, cancel := context.WithTimeout(ctx, reactionTimeout)
	defer cancel()
	var err error
	if add {
		err = r.chat.AddReaction(ctx, key.channel, key.ts, key.name)
	} else {
		err = r.chat.RemoveReaction(ctx, key.channel, key.ts, key.name)
	}
	if err != nil {
		r.log.Warn("reaction", slog.String(logChannel, key.channel), slog.String("ts", key.ts),
			slog.String("reaction", key.name), slog.Bool("add", add), slog.Any(logError, err))
	}
}

// queued counts the changes not applied yet (being sent included).
func (r *reactor) queued() int { return r.changes.Len() }

// wait returns once every queued change is applied.
func (r *reactor) wait() { r.changes.Wait() }
