package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/conclavehq/conclave/memory"
)

// Message kinds stored in memory.Message.Kind.
const (
	kindPerson = "person" // a Slack user not paired to a human agent
	kindHuman  = "human"  // a Slack user paired to a human agent (Agent set)
	kindBot    = "bot"    // another app's bot: content only
	kindAgent  = "agent"  // a reply posted by conclave for an agent
)

// threadHistoryLimit is how many replies of a thread conclave does not
// know are loaded when a reply adopts it.
const threadHistoryLimit = 50

// Handle records one inbound message event durably and returns: no model
// call, no turn. The transport acknowledges the event after Handle returns
// nil; on an error it does not, so Slack delivers the event again. A
// retried or duplicated event is recorded once. Messages in channels with
// no registered agent, and replies in threads conclave does not know that
// name no agent, are ignored.
func (e *Engine) Handle(ctx context.Context, ev Event) error {
	if ev.Channel == "" || ev.TS == "" {
		return nil
	}
	if e.opts.BotUserID != "" && ev.UserID == e.opts.BotUserID {
		return nil
	}
	names, _, err := e.registeredNames(ctx, ev.Channel)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return nil
	}
	thread := ev.ThreadTS
	if thread == "" {
		thread = ev.TS
	}
	id := ConversationID(ev.Team, ev.Channel, thread)
	max := e.opts.MaxMessageChars
	switch ev.Kind {
	case EventEdited:
		err := e.deps.Store.UpdateMessage(ctx, id, ev.TS, capText(ev.Raw, max), capText(ev.Text, max))
		if err != nil && !errors.Is(err, memory.ErrNotFound) {
			return fmt.Errorf("agents: record edit of %s: %w", ev.TS, err)
		}
		return nil
	case EventDeleted:
		if err := e.deps.Store.DeleteMessage(ctx, id, ev.TS); err != nil {
			return fmt.Errorf("agents: record deletion of %s: %w", ev.TS, err)
		}
		return nil
	}
	text := capText(ev.Text, max)
	if thread != ev.TS && len(findMentions(text, e.forms(names))) == 0 && len(attemptedNames(text, e.opts.BaseDomains)) == 0 {
		snap, err := e.deps.Store.Snapshot(ctx, id)
		if err != nil {
			return fmt.Errorf("agents: look up conversation %s: %w", id, err)
		}
		if !snap.Exists {
			return nil // a thread conclave does not know, naming nobody
		}
	}
	m, err := e.messageOf(ctx, ev)
	if err != nil {
		return err
	}
	conv := memory.Conversation{ID: id, Team: ev.Team, Channel: ev.Channel, ThreadTS: thread}
	if _, err := e.deps.Store.RecordMessage(ctx, conv, m, ev.ID); err != nil {
		return fmt.Errorf("agents: record message %s: %w", ev.TS, err)
	}
	if e.opts.DispatchOnAck {
		// The turn waits for Slack's acknowledgement (Acked); should it
		// never come, the next sweep finds the conversation pending.
		e.awaitingAck.Store(ev.Channel+"/"+ev.TS, id)
		return nil
	}
	e.dispatchSoon(id)
	return nil
}

// Acked tells the engine that the transport acknowledged an event Handle
// recorded; with Options.DispatchOnAck its conversation goes to a worker
// only now, so no model call starts before Slack has its acknowledgement.
func (e *Engine) Acked(ev Event) {
	if id, ok := e.awaitingAck.LoadAndDelete(ev.Channel + "/" + ev.TS); ok {
		e.dispatchSoon(id.(string))
	}
}

// dispatchSoon hands a conversation straight to a worker; when too many
// wait already, the next sweep finds it.
func (e *Engine) dispatchSoon(id string) {
	select {
	case e.ready <- id:
	default:
		select {
		case e.nudge <- struct{}{}:
		default:
		}
	}
}

// messageOf turns an event into the stored message, attributing a paired
// user's message to the human agent.
func (e *Engine) messageOf(ctx context.Context, ev Event) (memory.Message, error) {
	max := e.opts.MaxMessageChars
	m := memory.Message{
		TS:      ev.TS,
		UserID:  ev.UserID,
		BotID:   ev.BotID,
		Kind:    kindPerson,
		Subtype: ev.Subtype,
		Raw:     capText(ev.Raw, max),
		Text:    capText(ev.Text, max),
		Name:    ev.UserName,
		At:      ev.At,
	}
	if m.At.IsZero() {
		m.At = tsTime(ev.TS)
	}
	switch {
	case ev.BotID != "" || ev.Subtype == "bot_message":
		m.Kind = kindBot
	case ev.UserID != "":
		agent, err := e.PairedAgent(ctx, ev.UserID)
		if err != nil {
			return m, fmt.Errorf("agents: look up pairing of %s: %w", ev.UserID, err)
		}
		if agent != "" {
			m.Kind, m.Agent = kindHuman, e.canonical(agent)
		}
	}
	return m, nil
}

// tsTime reads a Slack ts ("1700000000.000100") as a time.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	frac = (frac + "000000")[:6]
	us, _ := strconv.ParseInt(frac, 10, 64)
	return time.Unix(s, us*1000).UTC()
}

// lessTS orders Slack timestamps numerically.
func lessTS(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}

// Run runs the workers (at most MaxParallel conversations at once) and the
// sweeper, which polls the store for conversations with work: new
// messages, and deadlines (inactivity, call timeouts) that any replica may
// pick up. A conversation whose message this replica just recorded goes to
// a worker at once, without asking the store. When ctx ends, Run stops taking work, lets turns in flight
// finish for up to ShutdownGrace (then cancels them; their work stays
// queued for another replica), releases its locks and returns nil.
func (e *Engine) Run(ctx context.Context) error {
	turnCtx, cancelTurns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTurns()
	work := make(chan string)
	var wg sync.WaitGroup
	for range e.opts.MaxParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				e.process(ctx, turnCtx, id)
				e.setBusy(id, false)
			}
		}()
	}
	ticker := time.NewTicker(e.opts.SweepInterval)
	defer ticker.Stop()
	e.sweep(ctx, work)
sweep:
	for {
		select {
		case <-ctx.Done():
			break sweep
		case <-ticker.C:
			e.sweep(ctx, work)
		case <-e.nudge:
			e.sweep(ctx, work)
		case id := <-e.ready:
			e.dispatch(ctx, work, id)
		}
	}
	close(work)
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	grace := time.NewTimer(e.opts.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		e.log.Warn("shutdown grace over; cancelling turns in flight")
		cancelTurns()
		<-done
	}
	return nil
}

// sweep hands every due conversation no local worker is on to a worker.
func (e *Engine) sweep(ctx context.Context, work chan<- string) {
	ids, err := e.deps.Store.Due(ctx, e.now(), 4*e.opts.MaxParallel)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("list due conversations", slog.Any(logError, err))
		}
		return
	}
	for _, id := range ids {
		if !e.dispatch(ctx, work, id) {
			return
		}
	}
}

// dispatch hands a conversation no local worker is on to a worker; false
// when ctx ended first.
func (e *Engine) dispatch(ctx context.Context, work chan<- string, id string) bool {
	if !e.setBusy(id, true) {
		return true
	}
	select {
	case work <- id:
		return true
	case <-ctx.Done():
		e.setBusy(id, false)
		return false
	}
}

// setBusy marks a conversation taken (false when it already was) or free.
func (e *Engine) setBusy(id string, busy bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if busy {
		if e.busy[id] {
			return false
		}
		e.busy[id] = true
		return true
	}
	delete(e.busy, id)
	return true
}

// process works on one conversation while it has work: it takes the lock
// (another replica holding it will see the pending mark when it releases),
// runs steps until nothing is left, releases, and goes again when messages
// arrived meanwhile. runCtx ending stops new turns; turnCtx ending cancels
// the one in flight.
func (e *Engine) process(runCtx, turnCtx context.Context, id string) {
	log := e.log.With(slog.String(logConversation, id))
	for runCtx.Err() == nil {
		lock, err := e.deps.Store.AcquireLock(turnCtx, id, e.opts.LockTTL)
		if errors.Is(err, memory.ErrLocked) {
			return
		}
		if err != nil {
			log.Error("take conversation lock", slog.Any(logError, err))
			return
		}
		e.holdLock(runCtx, turnCtx, lock, log)
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(turnCtx), 5*time.Second)
		pending, err := e.deps.Store.ReleaseLock(releaseCtx, lock)
		cancel()
		if err != nil {
			log.Error("release conversation lock", slog.Any(logError, err))
			return
		}
		if !pending {
			return
		}
	}
}

// holdLock runs steps under a held lock, renewing it meanwhile; a lost lock
// cancels the step in flight, which then stops without posting.
func (e *Engine) holdLock(runCtx, turnCtx context.Context, lock memory.Lock, log *slog.Logger) {
	ctx, cancel := context.WithCancel(turnCtx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(e.opts.LockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := e.deps.Store.RenewLock(ctx, lock, e.opts.LockTTL); err != nil {
					if ctx.Err() == nil {
						log.Warn("conversation lock lost; stopping", slog.Any(logError, err))
						cancel()
					}
					return
				}
			}
		}
	}()
	defer func() {
		cancel()
		<-renewed
	}()
	for runCtx.Err() == nil {
		more, err := e.step(ctx, lock)
		if err != nil {
			if !errors.Is(err, memory.ErrLockLost) && ctx.Err() == nil {
				log.Error("conversation step", slog.Any(logError, err))
			}
			return
		}
		if !more {
			return
		}
	}
}
