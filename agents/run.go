package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/memory"
)

// Message kinds stored in memory.Message.Kind.
const (
	kindPerson = conversation.KindPerson // a Slack user not paired to a human agent
	kindHuman  = conversation.KindHuman  // a Slack user paired to a human agent (Agent set)
	kindBot    = conversation.KindBot    // another app's bot: content only
	kindAgent  = conversation.KindAgent  // a reply posted by conclave for an agent
)

// threadHistoryLimit is how many replies of a thread conclave does not
// know are loaded when a reply adopts it.
const threadHistoryLimit = 50

// Record records one inbound message event durably and returns: no model
// call, no turn. The transport acknowledges the event after Record returns
// nil, then calls the ticket's Dispatch, which hands the conversation to a
// worker: no turn of the message (no model call) starts before the
// acknowledgement was written. On an error the transport does not
// acknowledge, so Slack delivers the event again. A retried or duplicated
// event is recorded once. Messages in channels with no registered agent,
// and replies in threads conclave does not know that name no agent, are
// ignored (their ticket is zero). Should Dispatch never be called, the
// sweeper finds the conversation due.
//
// A message takes one store round trip when Deps.Inbound is a
// memory.Recorder (off Redis Cluster): what the event needs (the
// channel's agents, the author's pairing, whether a reply's thread is a
// conversation) is read and the message recorded when that read cannot
// change the outcome; otherwise, and for edits and deletions, one round
// trip reads and one records.
//
// An error that says the store did not answer (refused, cut, timed out,
// loading) matches ErrStoreUnavailable: the same Record may succeed in a
// moment.
func (e *Engine) Record(ctx context.Context, ev Event) (Ticket, error) {
	t, err := e.record(ctx, ev)
	if memory.Unavailable(err) {
		err = unavailableError{err}
	}
	return t, err
}

// ErrStoreUnavailable matches the errors of Record that say the store did
// not answer, when trying again shortly can help.
var ErrStoreUnavailable = errors.New("agents: store unavailable")

// unavailableError is a store error marked as ErrStoreUnavailable; it reads
// as the store error.
type unavailableError struct{ err error }

func (u unavailableError) Error() string   { return u.err.Error() }
func (u unavailableError) Unwrap() []error { return []error{ErrStoreUnavailable, u.err} }

func (e *Engine) record(ctx context.Context, ev Event) (Ticket, error) {
	if ev.Channel == "" || ev.TS == "" {
		return Ticket{}, nil
	}
	if e.opts.BotUserID != "" && ev.UserID == e.opts.BotUserID {
		return Ticket{}, nil
	}
	thread := ev.ThreadTS
	if thread == "" {
		thread = ev.TS
	}
	id := ConversationID(ev.Team, ev.Channel, thread)
	home := e.opts.rosterOf(ev.Channel)
	q := memory.Lookup{Channel: home}
	if ev.Kind == EventMessage {
		if !isBotEvent(ev) {
			q.User = ev.UserID
			e.budgets.hint(id, ev.Channel, ev.UserID) // maybe the exchange's person: its totals are read with the load
		}
		if thread != ev.TS {
			q.Conversation = id
		}
	}
	conv := memory.Conversation{ID: id, Team: ev.Team, Channel: ev.Channel, ThreadTS: thread}
	var found memory.Found
	rec, oneTrip := e.inbound.(memory.Recorder)
	if oneTrip && ev.Kind == EventMessage {
		done, err := rec.RecordLooked(ctx, e.intake(ev, conv, q))
		if err != nil {
			return Ticket{}, fmt.Errorf("agents: record message %s: %w", ev.TS, err)
		}
		if done.Met {
			return e.ticket(conv), nil
		}
		found = done.Found // decide with what was read, as below
	} else {
		var err error
		if found, err = e.inbound.Lookup(ctx, q); err != nil {
			return Ticket{}, fmt.Errorf("agents: look up message %s: %w", ev.TS, err)
		}
	}
	names := e.channelNames(home, found.ChannelAgents)
	if len(names) == 0 {
		return Ticket{}, nil
	}
	switch ev.Kind {
	case EventEdited, EventDeleted:
		return Ticket{}, e.recordChange(ctx, id, ev)
	}
	m := e.messageOf(ev, found.HumanAgent)
	if thread != ev.TS && !found.Exists && home == ev.Channel && len(findMentions(m.Text, e.forms(names))) == 0 && len(attemptedNames(m.Text, e.opts.BaseDomains)) == 0 {
		return Ticket{}, nil // a thread conclave does not know, naming nobody
	}
	if _, err := e.inbound.RecordMessage(ctx, conv, m, ev.ID); err != nil {
		return Ticket{}, fmt.Errorf("agents: record message %s: %w", ev.TS, err)
	}
	return e.ticket(conv), nil
}

// intake is a message event to record in one round trip with what its
// recording depends on, under conditions that make the outcome the one
// Record would reach with the same reads: the channel has agents (asked
// of the store only when the configuration declares none), the author is
// paired with no human agent (the message is then a person's), and a
// reply's thread is a conversation. When a condition fails, Record
// decides with what the store read: a reply adopting a thread conclave
// does not know (it names an agent) is recorded in a second round trip,
// so that the common reply is not scanned for names before the ack.
func (e *Engine) intake(ev Event, conv memory.Conversation, q memory.Lookup) memory.Intake {
	return memory.Intake{
		Conversation:      conv,
		Message:           e.messageOf(ev, ""),
		EventID:           ev.ID,
		Lookup:            q,
		NeedChannelAgents: len(e.static[q.Channel].Agents) == 0,
		NeedUnpaired:      q.User != "",
		NeedExists:        conv.ThreadTS != ev.TS,
	}
}

// ticket is the ticket of a recorded message: it hands the message's
// conversation to a worker.
func (e *Engine) ticket(conv memory.Conversation) Ticket {
	t := task{id: conv.ID, channel: conv.Channel}
	return Ticket{dispatch: func() { e.dispatchSoon(t) }}
}

// recordChange records an edit (new text, no turn) or a deletion.
func (e *Engine) recordChange(ctx context.Context, id string, ev Event) error {
	if ev.Kind == EventDeleted {
		if err := e.inbound.DeleteMessage(ctx, id, ev.TS); err != nil {
			return fmt.Errorf("agents: record deletion of %s: %w", ev.TS, err)
		}
		return nil
	}
	max := e.opts.MaxMessageChars
	err := e.inbound.UpdateMessage(ctx, id, ev.TS, turn.CapText(ev.Raw, max), turn.CapText(ev.Text, max))
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return fmt.Errorf("agents: record edit of %s: %w", ev.TS, err)
	}
	return nil
}

// Ticket is what Record hands back for a recorded message: Dispatch hands
// its conversation to a worker. The transport calls it once the event's
// acknowledgement was written (a transport with nothing to acknowledge
// calls it at once). The zero Ticket's Dispatch does nothing.
type Ticket struct{ dispatch func() }

// NewTicket returns a ticket whose Dispatch calls dispatch: for
// transports' test doubles of the engine.
func NewTicket(dispatch func()) Ticket { return Ticket{dispatch: dispatch} }

// Dispatch hands the recorded message's conversation to a worker.
func (t Ticket) Dispatch() {
	if t.dispatch != nil {
		t.dispatch()
	}
}

// task is a conversation to work on, with its channel when known (its
// agents are then read in the round trip that loads it).
type task struct{ id, channel string }

// dispatchSoon hands a conversation straight to a worker; when too many
// wait already, the next sweep finds it.
func (e *Engine) dispatchSoon(t task) {
	select {
	case e.ready <- t:
	default:
		select {
		case e.nudge <- struct{}{}:
		default:
		}
	}
}

func isBotEvent(ev Event) bool { return ev.BotID != "" || ev.Subtype == "bot_message" }

// messageOf turns an event into the stored message; paired is the human
// agent its author is paired with ("" when none), to whom the message is
// attributed.
func (e *Engine) messageOf(ev Event, paired string) memory.Message {
	max := e.opts.MaxMessageChars
	m := memory.Message{
		TS:      ev.TS,
		UserID:  ev.UserID,
		BotID:   ev.BotID,
		Kind:    kindPerson,
		Subtype: ev.Subtype,
		Raw:     turn.CapText(ev.Raw, max),
		Text:    turn.CapText(ev.Text, max),
		Name:    ev.UserName,
		At:      ev.At,
		Trace:   ev.Trace,
	}
	if m.At.IsZero() {
		m.At = TSTime(ev.TS)
	}
	switch {
	case isBotEvent(ev):
		m.Kind = kindBot
	case ev.UserID != "" && paired != "":
		m.Kind, m.Agent = kindHuman, e.canonical(paired)
	}
	return m
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
	work := make(chan task)
	var wg sync.WaitGroup
	for range e.opts.MaxParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range work {
				e.process(ctx, turnCtx, t)
				if e.workers.free(t.id) {
					e.dispatchSoon(t)
				}
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
		case t := <-e.ready:
			e.dispatch(ctx, work, t)
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
	if n := e.reactions.queued(); n > 0 {
		e.log.Info("waiting for reaction changes", slog.Int("changes", n))
	}
	e.reactions.wait()
	return nil
}

// sweep hands every due conversation no local worker is on to a worker.
func (e *Engine) sweep(ctx context.Context, work chan<- task) {
	ids, err := e.convs.Due(ctx, e.now(), 4*e.opts.MaxParallel)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("list due conversations", slog.Any(logError, err))
		}
		return
	}
	for _, id := range ids {
		if e.opts.Owns != nil && !e.opts.Owns(id) {
			continue
		}
		if !e.dispatch(ctx, work, task{id: id}) {
			return
		}
	}
}

// dispatch hands a conversation no local worker is on to a worker; false
// when ctx ended first.
func (e *Engine) dispatch(ctx context.Context, work chan<- task, t task) bool {
	if !e.workers.take(t.id) {
		return true
	}
	select {
	case work <- t:
		return true
	case <-ctx.Done():
		e.workers.free(t.id)
		return false
	}
}

// workers is which conversations a local worker is on (busy), and
// which were handed over again meanwhile (again): the worker on one takes
// it up once more when it is done.
type workers struct {
	mu    sync.Mutex
	busy  map[string]bool
	again map[string]bool
}

func newWorkers() *workers {
	return &workers{busy: make(map[string]bool), again: make(map[string]bool)}
}

// take marks a conversation taken; false when it already was, in which
// case the worker on it takes it up once more when done (free) unless its
// last look at the store came later (lookedAgain): the message that
// brought the conversation here may have been recorded after that look,
// and would otherwise wait for a sweep.
func (w *workers) take(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy[id] {
		w.again[id] = true
		return false
	}
	w.busy[id] = true
	return true
}

// lookedAgain is called by a worker just before the store call that
// releases the conversation and reports whether it is pending: that call
// sees every message recorded before it, so hand-overs until then need no
// second look.
func (w *workers) lookedAgain(id string) {
	w.mu.Lock()
	delete(w.again, id)
	w.mu.Unlock()
}

// free marks a conversation free and reports whether it was handed over
// again meanwhile.
func (w *workers) free(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	again := w.again[id]
	delete(w.busy, id)
	delete(w.again, id)
	return again
}

// running reports whether a local worker is on a conversation.
func (w *workers) running(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.busy[id]
}

// process works on one conversation while it has work: it takes the lock
// and loads the conversation in one round trip (another replica holding
// the lock will see the pending mark when it releases), runs steps until
// nothing is left, releases, and goes again when messages arrived
// meanwhile. runCtx ending stops new turns; turnCtx ending cancels the one
// in flight.
func (e *Engine) process(runCtx, turnCtx context.Context, t task) {
	e.cpu.take()
	defer e.cpu.give()
	log := e.log.With(slog.String(logConversation, t.id))
	for runCtx.Err() == nil {
		spent := e.budgets.query(t.id, t.channel)
		lock, snap, found, err := e.convs.AcquireAndLoad(turnCtx, t.id, e.opts.LockTTL, memory.Lookup{Channel: e.opts.rosterOf(t.channel), Spent: spent})
		if errors.Is(err, memory.ErrLocked) {
			return
		}
		if err != nil {
			log.Error("take and load conversation", slog.Any(logError, err))
			return
		}
		var added []string // nil: not read yet
		if t.channel != "" {
			added = append([]string{}, found.ChannelAgents...)
		}
		t.channel = snap.Conversation.Channel
		if !e.holdLock(runCtx, turnCtx, lock, snap, added, readOf(spent, found), log) {
			return
		}
	}
}

// holdLock runs steps under a held lock, renewing it meanwhile, and
// releases it; it reports whether the conversation was marked pending
// meanwhile (there is more to do). added is the channel's run-time agents
// read with snap (nil: read them now), budget today's budget totals read
// with it (nil: none). A lost lock cancels the step in
// flight, which then stops without posting.
//
// A step that has more to do commits and goes on with what it holds,
// unless a message arrived meanwhile (the commit says so): then the
// conversation is loaded again, so that the message is routed before the
// next turn. The last commit releases the lock in the same round trip.
func (e *Engine) holdLock(runCtx, turnCtx context.Context, lock memory.Lock, snap memory.Snapshot, added []string, budget *budgetRead, log *slog.Logger) bool {
	ctx, cancel := context.WithCancel(turnCtx)
	defer cancel()
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		e.renew(renewCtx, lock, log, cancel)
	}()
	stopRenewal := func() {
		stopRenewing()
		<-renewed
	}
	defer stopRenewal()

	if !snap.Exists {
		return e.release(turnCtx, lock, false, log) // nothing to do, nothing to write
	}
	c, err := e.load(ctx, lock, snap, added)
	if err == nil {
		c.budget = budget
	}
	for err == nil {
		var more, pending bool
		if more, err = c.step(ctx); err != nil {
			break
		}
		if !more || runCtx.Err() != nil {
			stopRenewal()
			e.workers.lookedAgain(lock.ConversationID)
			if pending, err = c.commit(ctx, commitRelease); err != nil {
				break
			}
			c.sendNotices(ctx)
			return pending
		}
		if pending, err = c.commit(ctx, commitHold); err != nil {
			continue
		}
		c.sendNotices(ctx)
		if !pending {
			continue
		}
		if snap, err = e.convs.Load(ctx, lock); err == nil {
			c, err = e.load(ctx, lock, snap, nil)
		}
	}
	if !errors.Is(err, memory.ErrLockLost) && ctx.Err() == nil {
		log.Error("conversation step", slog.Any(logError, err))
	}
	// What the step did not commit stays due (the store keeps it due from
	// the lock's expiry on); a turn stopped by shutdown leaves it due at
	// once, for another replica.
	return e.release(turnCtx, lock, turnCtx.Err() != nil, log)
}

// renew keeps a held lock alive until ctx ends, renewing it every third
// of its TTL. A renewal that fails for a transient reason (the store
// unreachable for a moment) is tried again, more often, for as long as
// the lease it had may still run; only a lock known lost, or a lease run
// out, stops the holder (lost is called). The lease is measured from
// when each successful renewal was sent, on this process's clock: never
// later than the store's own expiry.
func (e *Engine) renew(ctx context.Context, lock memory.Lock, log *slog.Logger, lost func()) {
	ttl := e.opts.LockTTL
	expires := time.Now().Add(ttl * 9 / 10) // acquired just before: with a margin
	wait := ttl / 3
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		sent := time.Now()
		err := e.locks.RenewLock(ctx, lock, ttl)
		switch {
		case err == nil:
			expires, wait, failures = sent.Add(ttl), ttl/3, 0
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, memory.ErrLockLost):
			log.Warn("conversation lock lost; stopping", slog.Any(logError, err))
			lost()
			return
		}
		left := time.Until(expires)
		if left <= 0 {
			log.Warn("conversation lock could not be renewed before its lease ran out; stopping",
				slog.Int("failures", failures+1), slog.Any(logError, err))
			lost()
			return
		}
		failures++
		wait = min(max(ttl/30, 10*time.Millisecond), left)
		log.Warn("conversation lock renewal failed; trying again while the lease runs",
			slog.Int("failures", failures), slog.Duration("lease_left", left), slog.Any(logError, err))
	}
}

// release releases a lock without committing, marking the conversation
// pending first when its work must be taken up at once; it reports
// whether the conversation is pending.
func (e *Engine) release(turnCtx context.Context, lock memory.Lock, markPending bool, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(turnCtx), 5*time.Second)
	defer cancel()
	if markPending {
		if err := e.convs.MarkPending(ctx, lock.ConversationID); err != nil {
			log.Error("leave the conversation due", slog.Any(logError, err))
		}
	}
	e.workers.lookedAgain(lock.ConversationID)
	pending, err := e.locks.ReleaseLock(ctx, lock)
	if err != nil {
		log.Error("release conversation lock", slog.Any(logError, err))
		return false
	}
	return pending
}

// cpuTokens bounds the workers computing at once (see Engine.cpu): a
// worker holds a token while it works on a conversation and gives it back
// while it waits on the outside (off). Nil: no bound.
type cpuTokens chan struct{}

// take waits for a token; give gives it back.
func (c cpuTokens) take() {
	if c != nil {
		c <- struct{}{}
	}
}

func (c cpuTokens) give() {
	if c != nil {
		<-c
	}
}

// off runs f, a call to the outside a worker waits on, with the worker's
// token given back meanwhile. Only the goroutine running process, which
// holds a token, calls it.
func (c cpuTokens) off(f func()) {
	if c == nil {
		f()
		return
	}
	c.give()
	defer c.take()
	f()
}
