package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// convo is one conversation loaded under its lock for one step: the thread,
// its state machine and the channel's agents, plus what the step will
// commit. It turns what happens (messages, turns' outcomes) into the
// machine's transitions and carries out their effects.
type convo struct {
	e    *Engine
	lock memory.Lock
	conv memory.Conversation
	msgs []memory.Message      // the thread, in ts order
	m    *conversation.Machine // the state machine: the only writer of the state
	log  *slog.Logger
	roster
	out *outbox

	newMsgs  []memory.Message
	sessions []memory.SessionAppend
	appended map[string]bool    // namespace|key|ts appended while loaded
	notices  []notice           // ephemeral notices to send once committed
	traces   []memory.TurnTrace // finished turns' traces, for the next commit
	usage    []memory.Usage     // what finished turns spent, for the next commit
	// budget is today's budget totals as read with the load, for the
	// first check of a turn's budgets unless a commit came first.
	budget *budgetRead
	// overloaded is the agent a turn was refused for, the queue being
	// full (conversation.max_queued): its ⚠️ goes after routing.
	overloaded string
}

// roster is the channel's agents as a loaded conversation serves them.
type roster struct {
	names       []string             // registered agents served, canonical, in registration order
	forms       []nameForm           // their spellings
	registered  map[string]bool      // every registered agent, served or not
	unresolved  []nameForm           // spellings of registered agents whose identity cannot be resolved now
	agents      map[string]ens.Agent // resolved identities (registered agents and human agents)
	facilitator string               // the channel's facilitator ("" when none)
	start       string
	resolve     func(ctx context.Context, name string) (ens.Agent, error)
	log         *slog.Logger
}

// notice is an ephemeral notice for the author of a message.
type notice struct{ user, agent, text string }

// step routes new messages, runs at most one action (a turn, a
// conclusion, a timeout) and reports whether there is more to do now. It
// leaves what it did to the caller's commit, except that routing which
// sends notices is committed before they go, so that they are not sent
// twice: the other side effects of routing (reactions) may be repeated by
// whoever redoes the work of a holder that stopped before committing, and
// a post is committed as pending before it is made.
func (c *convo) step(ctx context.Context) (bool, error) {
	if c.m.Read().Pending() > 0 {
		// Posts wait to be made: nothing else happens before they are.
		if err := c.flush(ctx); err != nil {
			return false, err
		}
		return c.m.Read().Pending() == 0, nil
	}
	c.route(ctx)
	if c.overloaded != "" {
		c.turns().noticeOverload(ctx)
		if c.m.Read().Pending() > 0 {
			return false, nil // the notice waits to be posted
		}
	}
	next := c.m.Next(c.e.now())
	if next == conversation.ActSettle {
		// No facilitator to wake: the messages that would have woken one
		// lose their reaction.
		c.m.SettleFacilitator()
		return false, nil // the caller's commit sends the notices
	}
	if c.e.budgets.gates(next) {
		person, _ := exchangePerson(c.m.Read().SinceReopen(), c.conv, c.msgs)
		read := c.budget
		c.budget = nil
		scope, err := c.e.budgets.spent(ctx, c.conv.ID, c.conv.Channel, person, read, c.e.now(), c.log)
		if err != nil {
			return false, err
		}
		if scope != "" {
			return false, c.turns().refuse(ctx, scope, person) // the caller's commit concludes
		}
	}
	act := c.action(next)
	if act == nil {
		return false, nil // the caller's commit sends the notices
	}
	if len(c.notices) > 0 {
		if _, err := c.commit(ctx, commitHold); err != nil {
			return false, err
		}
		c.sendNotices(ctx)
	}
	if err := act(ctx); err != nil {
		return false, err
	}
	return c.m.Read().Pending() == 0 && c.m.Read().WorkDue(c.e.now()), nil
}

// load builds a step's view of a loaded conversation; added is the
// channel's run-time agents as read with the snapshot (nil: read them
// now).
func (e *Engine) load(ctx context.Context, lock memory.Lock, snap memory.Snapshot, added []string) (*convo, error) {
	var err error
	c := &convo{
		e:        e,
		lock:     lock,
		conv:     snap.Conversation,
		msgs:     snap.Messages,
		appended: make(map[string]bool),
		log: e.log.With(slog.String(logConversation, snap.Conversation.ID),
			slog.String(logChannel, snap.Conversation.Channel)),
	}
	if c.conv.ID == "" {
		c.conv.ID = lock.ConversationID
	}
	c.roster = roster{agents: make(map[string]ens.Agent), registered: make(map[string]bool), resolve: e.resolve, log: c.log}
	sort.SliceStable(c.msgs, func(i, j int) bool { return lessTS(c.msgs[i].TS, c.msgs[j].TS) })
	home := e.opts.rosterOf(c.conv.Channel)
	if added == nil {
		if added, err = e.registry.ChannelAgents(ctx, home); err != nil {
			return nil, fmt.Errorf("agents: list agents of %s: %w", home, err)
		}
	}
	names := e.channelNames(home, added)
	c.start = e.static[home].Start
	if c.start == "" {
		c.start = StartAll
	}
	var unresolved []string
	for _, n := range names {
		c.registered[n] = true
		var a ens.Agent
		var err error
		e.cpu.off(func() { a, err = e.resolve(ctx, n) })
		if err != nil {
			c.log.Warn("agent of the channel cannot be resolved; it is not served", slog.String(logAgent, n), slog.Any(logError, err))
			unresolved = append(unresolved, n)
			continue
		}
		c.agents[n] = a
		c.names = append(c.names, n)
		if a.Role == ens.RoleFacilitator {
			if c.facilitator != "" {
				c.log.Error("a second facilitator in the channel is ignored", slog.String(logAgent, n))
				continue
			}
			c.facilitator = n
		}
	}
	c.forms = e.forms(c.names)
	c.unresolved = e.forms(unresolved)
	if c.m, err = conversation.Load(snap.Conversation.State, limitsOf(&e.opts), c.facilitator, c.conv.ID[:min(8, len(c.conv.ID))]); err != nil {
		return nil, fmt.Errorf("agents: conversation %s: %w", snap.Conversation.ID, err)
	}
	c.out = c.newOutbox()
	return c, nil
}

// limitsOf are the guards the machine applies, as configured.
func limitsOf(o *Options) limits {
	return limits{
		MaxTurns:         o.MaxTurns,
		MaxTurnsPerAgent: o.MaxTurnsPerAgent,
		MaxQueued:        o.MaxQueued,
		CallTimeout:      o.CallTimeout,
		Timeout:          o.Timeout,
	}
}

// How a commit leaves the conversation.
type commitMode int

const (
	// commitHold: the holder goes on working. The deadline is no earlier
	// than the lock's expiry: until then the holder is on the work and
	// other replicas need not look (should it die, they find it then).
	commitHold commitMode = iota
	// commitRelease: the lock is released in the same round trip.
	commitRelease
)

// commit writes the state, the new messages and session entries, and the
// next deadline; it makes the notices safe to send (sendNotices). It reports
// whether the conversation was marked pending meanwhile, and fails with
// memory.ErrLockLost when the lock is gone.
func (c *convo) commit(ctx context.Context, mode commitMode) (bool, error) {
	c.react(ctx)
	conv := c.conv
	conv.State = c.m.Encode()
	now := c.e.now()
	deadline := c.m.Read().Deadline(now)
	if held := now.Add(c.e.opts.LockTTL); mode == commitHold && !deadline.IsZero() && deadline.Before(held) {
		deadline = held
	}
	pending, err := c.e.convs.Commit(ctx, c.lock, memory.Commit{
		Conversation: conv,
		Messages:     c.newMsgs,
		Sessions:     c.sessions,
		Deadline:     deadline,
		Release:      mode == commitRelease,
		PendingPosts: c.m.Read().Pending(),
		Traces:       c.traces,
		Usage:        c.usage,
	})
	if err != nil {
		return false, fmt.Errorf("agents: commit conversation %s: %w", c.conv.ID, err)
	}
	c.newMsgs, c.sessions, c.traces, c.usage = nil, nil, nil, nil
	c.budget = nil            // read before what this commit wrote
	c.conv.State = conv.State // what a streamed reply's marker is committed over
	return pending, nil
}

// sendNotices sends the ephemeral notices routing made, once the commit
// that records them (Noticed) is written: they are not sent twice.
func (c *convo) sendNotices(ctx context.Context) {
	for _, n := range c.notices {
		var err error
		c.e.cpu.off(func() { err = c.e.deps.Chat.PostEphemeral(ctx, c.conv.Channel, n.user, n.text) })
		if err != nil {
			c.log.Warn("post a notice of an agent that cannot be called", slog.String(logAgent, n.agent), slog.Any(logError, err))
		}
	}
	c.notices = nil
}

// agent returns the identity of a registered or human agent.
func (r *roster) agent(ctx context.Context, name string) (ens.Agent, bool) {
	if a, ok := r.agents[name]; ok {
		return a, true
	}
	a, err := r.resolve(ctx, name)
	if err != nil {
		r.log.Warn("agent cannot be resolved", slog.String(logAgent, name), slog.Any(logError, err))
		return a, false
	}
	r.agents[name] = a
	return a, true
}

// mentions lists the registered agents a message names, in order.
func (r *roster) mentions(text string) []string {
	return findMentions(text, r.forms)
}

// inbound is a thread message as the state machine sees it.
func (c *convo) inbound(m memory.Message) inbound {
	in := inbound{TS: m.TS, Kind: m.Kind, Author: author(m), UserID: m.UserID, Name: m.Name, At: m.At,
		End: turn.HasEnd(m.Text)}
	for _, n := range c.mentions(m.Text) {
		in.Named = append(in.Named, namedAgent{Agent: n, Role: conversation.Role(c.agents[n].Role)})
	}
	return in
}

// react makes the reaction changes the machine decided, in order.
func (c *convo) react(ctx context.Context) {
	for _, fx := range c.m.TakeEffects() {
		if fx.Done {
			c.e.reactions.set(ctx, c.conv.Channel, c.conv.ThreadTS, doneReaction, fx.Add)
		} else {
			c.e.reactions.set(ctx, c.conv.Channel, fx.TS, c.e.opts.WorkingReaction, fx.Add)
		}
	}
}

// author returns the agent that wrote m ("" for a person or a bot).
func author(m memory.Message) string {
	if m.Kind == kindAgent || m.Kind == kindHuman {
		return m.Agent
	}
	return ""
}

// route applies the routing rules to every message not routed yet, in ts
// order, after deciding whether the thread is a conversation at all.
func (c *convo) route(ctx context.Context) {
	var fresh []memory.Message
	for _, m := range c.msgs {
		if !c.m.Read().Routed(m.TS) {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) == 0 {
		return
	}
	if c.m.Read().Status() == statusNew || c.m.Read().Status() == statusIgnored {
		if !c.open(ctx, fresh) {
			for _, m := range fresh {
				c.routeOne(ctx, m, false)
			}
			c.m.Opened(false)
			return
		}
		fresh = fresh[:0]
		for _, m := range c.msgs {
			if !c.m.Read().Routed(m.TS) {
				fresh = append(fresh, m)
			}
		}
	}
	for _, m := range fresh {
		c.routeOne(ctx, m, true)
	}
}

// open decides whether the thread becomes a conversation: a new root by a
// person starts one (by the channel's start policy); otherwise a reply
// naming a registered agent adopts the thread, loading its history from
// Slack when conclave never saw its root.
func (c *convo) open(ctx context.Context, fresh []memory.Message) bool {
	var root *memory.Message
	for i := range c.msgs {
		if c.msgs[i].TS == c.conv.ThreadTS {
			root = &c.msgs[i]
		}
	}
	if root != nil && c.m.Read().Status() == statusNew && !c.m.Read().Routed(root.TS) && conversation.StartsOnRoot(c.inbound(*root), c.start, c.facilitator != "") {
		c.m.Opened(true)
		return true
	}
	// A direct message's thread that Slack opened (an assistant thread)
	// has no root of the person's: their first message there stands for it.
	if root == nil && c.m.Read().Status() == statusNew && len(fresh) > 0 && c.e.opts.rosterOf(c.conv.Channel) != c.conv.Channel &&
		conversation.StartsOnRoot(c.inbound(fresh[0]), c.start, c.facilitator != "") {
		c.m.Opened(true)
		return true
	}
	in := make([]inbound, len(fresh))
	for i, m := range fresh {
		in[i] = c.inbound(m)
	}
	first := conversation.Adopter(in, c.conv.ThreadTS) // the first reply that adopts the thread
	if first == "" {
		return false
	}
	c.m.Opened(true)
	if root == nil {
		c.loadHistory(ctx)
	}
	// What was written before the adopting reply is content.
	for _, m := range c.msgs {
		if !c.m.Read().Routed(m.TS) && lessTS(m.TS, first) {
			c.routeOne(ctx, m, false)
		}
	}
	c.log.Info("thread adopted", slog.String("thread_ts", c.conv.ThreadTS))
	return true
}

// loadHistory adds the latest replies of a thread conclave does not know,
// as already routed content.
func (c *convo) loadHistory(ctx context.Context) {
	var events []Event
	var err error
	c.e.cpu.off(func() {
		events, err = c.e.deps.Chat.ThreadHistory(ctx, c.conv.Channel, c.conv.ThreadTS, threadHistoryLimit)
	})
	if err != nil {
		c.log.Warn("load the history of an adopted thread", slog.Any(logError, err))
		return
	}
	have := make(map[string]bool, len(c.msgs))
	for _, m := range c.msgs {
		have[m.TS] = true
	}
	paired := make(map[string]string) // user → human agent
	for _, ev := range events {
		if have[ev.TS] || ev.TS == "" || c.e.opts.BotUserID != "" && ev.UserID == c.e.opts.BotUserID {
			continue
		}
		agent, known := paired[ev.UserID]
		if !known && ev.UserID != "" && !isBotEvent(ev) {
			var err error
			if agent, err = c.e.PairedAgent(ctx, ev.UserID); err != nil {
				c.log.Warn("history message: pairing of its author", slog.String("ts", ev.TS), slog.Any(logError, err))
				continue
			}
			paired[ev.UserID] = agent
		}
		m := c.e.messageOf(ev, agent)
		c.addMessage(m)
		c.routeOne(ctx, m, false)
	}
}

// addMessage adds a message to the thread and to the next commit.
func (c *convo) addMessage(m memory.Message) {
	c.newMsgs = append(c.newMsgs, m)
	i := sort.Search(len(c.msgs), func(i int) bool { return !lessTS(c.msgs[i].TS, m.TS) })
	c.msgs = append(c.msgs, memory.Message{})
	copy(c.msgs[i+1:], c.msgs[i:])
	c.msgs[i] = m
}

// routeOne routes one message through the state machine, then appends it
// to the sessions that see it and notices the names it tried to call. With
// triggers false the message is content only: it names, starts and wakes
// nobody.
func (c *convo) routeOne(ctx context.Context, m memory.Message, triggers bool) {
	in := c.inbound(m)
	r := c.m.Receive(in, triggers, c.e.now())
	if m.Kind == kindHuman {
		c.appendHuman(ctx, m)
	}
	c.noticeUnknown(ctx, m)
	if triggers && c.m.Read().Status() == statusOpen && !c.m.Read().Concluding() {
		for _, x := range c.unreached(m) {
			if isPersonKind(m.Kind) {
				// Once per name per conversation; an unknown name has
				// its notice already (noticeUnknown).
				if x.agent.EnsDomain != "" {
					c.notice(ctx, m, "unreached:"+x.agent.EnsDomain, x.agent.EnsDomain, x.hint())
				}
			} else if m.Kind == kindAgent && c.facilitator != "" {
				// The facilitator is told at once, whoever wrote it.
				c.log.Info("a call reaches no one; the facilitator is told", slog.String("wrote", x.wrote),
					slog.String(logAgent, x.agent.EnsDomain), slog.String("by", m.Agent), slog.String("ts", m.TS))
				c.m.AddNote(x.note(), c.e.now(), true)
			}
		}
	}
	// A message naming an agent is visible to it, content or not.
	for _, n := range in.Named {
		if n.Agent != in.Author {
			c.appendVisible(ctx, c.agents[n.Agent], m)
		}
	}
	if r.Restarted {
		c.log.Info("conversation restarted")
	}
	for _, name := range r.Refused {
		c.log.Warn("conversation overloaded; a turn is not queued", slog.String(logAgent, name),
			slog.String("ts", m.TS), slog.Int("queued", c.m.Read().Queued()))
		if c.overloaded == "" {
			c.overloaded = name
		}
	}
	if r.Concluded {
		c.log.Info("conversation concluded without a facilitator", slog.String("reason", r.Conclusion))
	}
	c.react(ctx)
}

// noticeUnknown tells a person or human agent who named an agent-shaped
// name that is not registered here, or a registered agent whose identity
// cannot be resolved now, that it was not called: once per name per
// conversation. Agents and bots doing it are only logged.
func (c *convo) noticeUnknown(ctx context.Context, m memory.Message) {
	for _, name := range findMentions(m.Text, c.unresolved) {
		c.notice(ctx, m, "unresolved:"+name, name,
			fmt.Sprintf("%s is an agent of this channel but could not be resolved right now, so it was not called.", name))
	}
	for _, n := range attemptedNames(m.Text, c.e.opts.BaseDomains) {
		name := c.e.canonical(n)
		if c.registered[name] {
			continue
		}
		c.notice(ctx, m, "name:"+name, name, fmt.Sprintf("%s is not an agent of this channel, so it was not called.", n))
	}
}

// notice shows text to the person who wrote m, once per key and
// conversation.
func (c *convo) notice(ctx context.Context, m memory.Message, key, agent, text string) {
	if !isPersonKind(m.Kind) || m.UserID == "" {
		c.log.Info("an agent that cannot be called was named", slog.String(logAgent, agent), slog.String("by", m.Agent), slog.String("ts", m.TS))
		return
	}
	if !c.m.Book().Notice(key) {
		return
	}
	c.notices = append(c.notices, notice{user: m.UserID, agent: agent, text: text})
}

// noticeOverload posts the one ⚠️ of an overload (until the queue has
// room again), as the facilitator when there is one.
func (s turnStep) noticeOverload(ctx context.Context) {
	c := s.c
	name := c.overloaded
	c.overloaded = ""
	if !c.m.OverloadNotice() {
		return
	}
	if c.facilitator != "" {
		name = c.facilitator
	}
	a, _ := c.agent(ctx, name)
	t := s.run.newTurn(c.m.TurnID(), a, "")
	s.notify(ctx, t, fmt.Sprintf("this conversation is overloaded (%d turns waiting); write again once they are answered", c.m.Read().Queued()))
}

// conclude asks the machine for the conclusion.
func (c *convo) conclude(ctx context.Context, r *concludeRequest) {
	if c.m.RequestConclude(r) {
		c.log.Info("conversation concluded without a facilitator", slog.String("reason", r.Reason))
	}
	c.react(ctx)
}

// action is what carries out the machine's choice; nil when there is
// nothing to run. It only chooses: what changes, changes when it runs.
func (c *convo) action(act action) func(context.Context) error {
	switch act {
	case conversation.ActConclude:
		return c.turns().conclude
	case conversation.ActGuard:
		return func(ctx context.Context) error {
			c.log.Warn("max_turns reached; concluding", slog.Int("turns", c.m.Read().Turns()))
			c.conclude(ctx, &concludeRequest{Reason: concludeByGuard})
			return nil
		}
	case conversation.ActExpireCalls:
		return func(context.Context) error {
			for _, a := range c.m.ExpireCalls(c.e.now()) {
				c.log.Info("call timed out", slog.String(logAgent, a))
			}
			return nil
		}
	case conversation.ActCall:
		return c.turns().call
	case conversation.ActFacilitator:
		return c.turns().facilitator
	case conversation.ActTimeout:
		return func(ctx context.Context) error {
			c.conclude(ctx, &concludeRequest{Reason: concludeByTimeout})
			return nil
		}
	}
	return nil
}

// turnIDFor is the id of a facilitator's turn running prompt: the id of
// its run that streamed before its holder died, if any — so the run again
// finds its message even when messages routed meanwhile took ids — else
// a new one. (A called agent's turn keeps the id it was queued with.)
func (c *convo) turnIDFor(agent, prompt string) string {
	if id := c.m.Read().StreamedTurn(agent, prompt); id != "" {
		return id
	}
	return c.m.TurnID()
}

// turnStep carries one turn out for the step: it asks the machine
// whether and how the turn runs, runs the turn's function (runner), and
// feeds what the turn produced into the machine and the conversation,
// its posts last (convo.deliver).
type turnStep struct {
	c   *convo
	run runner
	// description is the channel's description, gathered before a turn
	// runs (describe) for its input.
	description string
}

// input is what a turn of agent a reads of the conversation as it stands:
// the thread and the channel's description, converted at the engine's
// edge. The step adds what the kind of turn reads besides.
func (s turnStep) input(a ens.Agent) turn.Input {
	return turn.Input{Agent: a, Thread: threadOf(s.c.msgs), Description: s.description}
}

// sessionTurn runs a turn of t's agent in the memory session key of
// namespace ns, with the session's entries from other conversations in
// its input.
func (s turnStep) sessionTurn(ctx context.Context, t *turnRun, ns, key, prompt string) (turnResult, error) {
	entries, err := otherConversations(ctx, s.c.e.sessions, s.c.conv.ID, ns, key)
	if err != nil {
		return t.result(turnResult{}), err
	}
	in := s.input(t.agent)
	in.Entries = entries
	return s.run.sessionTurn(ctx, t, in, key, prompt)
}

func (c *convo) turns() turnStep { return turnStep{c: c, run: c.runner()} }

// finish logs and reports a turn, and hands its trace to the next commit.
func (s turnStep) finish(t *turnRun) {
	if tr, ok := s.run.done(t); ok {
		s.c.traces = append(s.c.traces, tr)
	}
	person, name := exchangePerson(s.c.m.Read().SinceReopen(), s.c.conv, s.c.msgs)
	s.c.usage = append(s.c.usage, turnUsage(t, s.c.conv.Channel, person, name)...)
}

// apply feeds what a turn produced so far into the machine: the history
// notes of the tools it used, and the markers of its streamed replies.
func (s turnStep) apply(r turnResult) {
	for _, n := range r.Notes {
		s.c.m.AddNote(n.Text, n.At, false)
	}
	for id, m := range r.Streamed {
		s.c.m.Book().Streamed(id, streamMark(m))
	}
}

// post makes a reply of turn t (prepared by the turn) through the
// outbox; the time it took goes in the turn's trace.
func (s turnStep) post(ctx context.Context, t *turnRun, a ens.Agent, postID, text string, p pendingPost) error {
	p.Turn = t.id
	p, ok := s.run.prepare(ctx, a, postID, text, p)
	if !ok {
		return nil
	}
	began := s.c.e.now()
	err := s.c.deliver(ctx, p)
	if tr := t.trace; tr != nil {
		took := s.c.e.now().Sub(began)
		tr.Timings.PostMS += took.Milliseconds()
		tr.posts = append(tr.posts, timeSpan{began, took})
	}
	return err
}

// notify posts a turn's ⚠️ notice through the outbox. One that cannot be
// posted now stays pending there; a lost lock leaves it to the next
// holder, which must not see it twice.
func (s turnStep) notify(ctx context.Context, t *turnRun, reason string) {
	p, ok := s.run.notice(t, reason)
	if !ok {
		return
	}
	if err := s.c.deliver(ctx, p); err != nil {
		s.c.log.Warn("post a failure notice", slog.String(logTurn, t.id), slog.Any(logError, err))
	}
}

// failed records a failed turn and posts its notice; it returns why the
// turn stopped when it is to be run again (runner.failed).
func (s turnStep) failed(ctx context.Context, t *turnRun, err error) error {
	if stop := s.run.failed(ctx, t, err); stop != nil {
		return stop
	}
	s.notify(ctx, t, turn.NoticeReason(err))
	return nil
}

// couldNotAnswer records that a named agent cannot answer, and why, in a
// history line never posted, which wakes the facilitator at once: it can
// ask someone else or tell the person.
func (s turnStep) couldNotAnswer(agent, reason string) {
	s.c.m.AddNote(fmt.Sprintf("(%s could not answer: %s)", agent, reason), s.c.e.now(), true)
}

// call runs the first queued turn: an expert or clone answering the
// message that named it, unless its call timed out while waiting or it is
// at its turn cap.
func (s turnStep) call(ctx context.Context) error {
	c := s.c
	q := c.m.Read().FirstQueued()
	now := c.e.now()
	a, registered := c.agents[q.Agent]
	if !registered {
		a = ens.Agent{Name: firstLabel(q.Agent), EnsDomain: q.Agent, Role: ens.RoleExpert}
	}
	t := s.run.newTurn(q.ID, a, "")
	t.report.Wait = now.Sub(q.Queued)
	s.run.working(t)
	defer s.finish(t)
	endCall := func() {
		c.m.EndCall(q, c.e.now())
		c.react(ctx)
	}
	switch c.m.Admit(q, registered, now) {
	case conversation.NotServed:
		endCall()
		s.couldNotAnswer(q.Agent, "it is no longer served in this channel")
		t.report.Outcome = "failed"
		t.report.Err = errors.New("agent no longer served in this channel")
		return nil
	case conversation.CallExpired:
		endCall()
		c.m.AddNote(fmt.Sprintf("(%s did not answer: timeout)", q.Agent), c.e.now(), true)
		t.report.Outcome = "timeout"
		return nil
	case conversation.AtCap:
		endCall()
		reason := fmt.Sprintf("it reached its limit of %d turns in this conversation", c.e.opts.MaxTurnsPerAgent)
		s.couldNotAnswer(q.Agent, reason)
		t.report.Outcome = "skipped"
		if c.m.CapNotice(q.Agent) {
			s.notify(ctx, t, reason)
		}
		return nil
	}
	c.m.StartTurn(q.Agent)
	s.description = describe(ctx, c)

	var text, unanswered string
	var meta map[string]string
	var err error
	if a.Role == ens.RoleClone {
		// A clone answers on its human's group session.
		ns, key, _ := c.sessionOf(a)
		var res turnResult
		res, err = s.sessionTurn(ctx, t, ns, key, templates.PromptDefault)
		s.apply(res)
		text = res.Text
	} else {
		text, meta, unanswered, err = s.expert(ctx, t)
	}
	if err != nil && ctx.Err() != nil {
		return s.failed(ctx, t, err) // to be run again: the call goes on
	}
	endCall()
	if err != nil {
		if err := s.failed(ctx, t, err); err != nil {
			return err
		}
		s.couldNotAnswer(q.Agent, turn.NoticeReason(err))
		return nil
	}
	if unanswered != "" {
		s.couldNotAnswer(q.Agent, unanswered)
	}
	if strings.TrimSpace(text) == "" {
		t.report.Outcome = "empty"
	}
	return s.post(ctx, t, a, t.id, text, pendingPost{Meta: meta})
}

// expert runs an expert: context-found when it is bound; otherwise
// threading (context-not-found), then, once bound, context-found in the
// same turn, after posting the threading message. unanswered says why an
// expert left unbound cannot answer (no key found, or its policy refused
// a new session); it is empty when the expert answered or asked for the
// key in its message.
func (s turnStep) expert(ctx context.Context, t *turnRun) (text string, meta map[string]string, unanswered string, err error) {
	c, a := s.c, t.agent
	ns := c.expertNamespace(a.EnsDomain)
	if key := c.m.Read().Binding(a.EnsDomain); key != "" {
		res, err := s.sessionTurn(ctx, t, ns, key, templates.PromptContextFound)
		s.apply(res)
		return res.Text, nil, "", err
	}
	known, err := c.e.sessions.RecentSessions(ctx, ns, maxKnownSessions)
	if err != nil {
		return "", nil, "", fmt.Errorf("list sessions of %s: %w", a.EnsDomain, err)
	}
	in := s.input(a)
	in.Known = known
	res, err := s.run.threading(ctx, t, in)
	s.apply(res)
	th := res.Threading
	if err != nil {
		return "", nil, "", err
	}
	if th.Key == "" {
		return th.Text, th.Meta, th.Unanswered, nil
	}
	c.bind(ctx, a, th.Key)
	meta = th.Meta
	if th.Text != "" {
		// A threading message that cannot be posted now stays first in
		// the outbox; the answer goes after it.
		if err := s.post(ctx, t, a, t.id+"-threading", th.Text, pendingPost{Meta: meta}); err != nil {
			return "", nil, "", err
		}
		meta = nil // recorded on the threading message
	}
	res, err = s.sessionTurn(ctx, t, ns, th.Key, templates.PromptContextFound)
	s.apply(res)
	return res.Text, meta, "", err
}

// facilitator runs the facilitator's turn over the whole thread. A reply
// holding :end: asks for the conclusion; what is left of it is posted
// first.
func (s turnStep) facilitator(ctx context.Context) error {
	c := s.c
	f := c.agents[c.roster.facilitator]
	s.description = describe(ctx, c)
	t := s.run.newTurn(c.turnIDFor(f.EnsDomain, templates.PromptDefault), f, templates.PromptDefault)
	s.run.working(t)
	defer s.finish(t)
	// Messages that arrive during the turn are routed after it and wake
	// the facilitator again.
	wake := c.m.StartFacilitator()
	res, err := s.run.facilitator(ctx, t, s.input(f))
	s.apply(res)
	text, prompt := res.Text, res.Prompt
	if err != nil && ctx.Err() != nil {
		return s.failed(ctx, t, err) // to be run again: the messages keep their reaction
	}
	c.m.FacilitatorDone(wake, c.e.now())
	c.react(ctx)
	if err != nil {
		return s.failed(ctx, t, err)
	}
	rest, hadEnd := turn.StripEnd(text)
	if hadEnd && c.callsAgents(rest, f.EnsDomain) {
		// A call beats an :end: in the same reply: the agent answers first.
		c.log.Info("the facilitator's reply calls an agent and holds :end:; the :end: is ignored", slog.String(logTurn, t.id))
		hadEnd = false
	}
	if !hadEnd {
		if why := c.stalled(rest, f.EnsDomain, c.m.Read().Recent(), c.m.Read().AgentTurns(), c.e.opts.MaxTurnsPerAgent); why != "" {
			return s.stall(ctx, t, why)
		}
		c.m.Book().Remember(rest)
	}
	if hadEnd {
		// :end: always concludes (SPEC §14.2); conclude may close silently.
		c.m.RequestConclude(&concludeRequest{Reason: concludeByEnd, EndReply: text, PrevPrompt: prompt})
		c.react(ctx)
		if !turn.HasWords(rest) {
			rest = "" // a lone signature ("🧭 :end:") is not worth a post
		}
	}
	if strings.TrimSpace(rest) == "" {
		t.report.Outcome = "empty"
	}
	return s.post(ctx, t, f, t.id, rest, pendingPost{EndReply: hadEnd})
}

// conclude runs the facilitator's conclude prompt once. The conversation
// is concluded even when the turn fails.
func (s turnStep) conclude(ctx context.Context) error {
	c := s.c
	r, _ := c.m.Read().Conclude()
	f, ok := c.agents[c.roster.facilitator]
	if !ok {
		c.m.Concluded(c.e.now(), false, false)
		c.react(ctx)
		return nil
	}
	s.description = describe(ctx, c)
	t := s.run.newTurn(c.turnIDFor(f.EnsDomain, templates.PromptConclude), f, templates.PromptConclude)
	s.run.working(t)
	defer s.finish(t)
	in := s.input(f)
	in.Conclude = turn.Conclude{Reason: concludeReasons[r.Reason], ByEnd: r.Reason == concludeByEnd,
		EndReply: r.EndReply, PrevPrompt: r.PrevPrompt, EndTS: r.EndTS}
	res, err := s.run.conclusion(ctx, t, in)
	s.apply(res)
	text := res.Text
	if err != nil && ctx.Err() != nil {
		t.report.Outcome = "cancelled"
		return ctx.Err()
	}
	// A conclusion without words (only :end:, emoji or white space) closes
	// silently: nothing is posted, the root still gets its ✅.
	rest, _ := turn.StripEnd(text)
	silent := err == nil && !turn.HasWords(rest)
	c.m.Concluded(c.e.now(), true, silent)
	c.react(ctx)
	c.log.Info("conversation concluded", slog.String("reason", r.Reason), slog.Bool("silent", silent))
	if err != nil {
		return s.failed(ctx, t, err)
	}
	if silent {
		t.report.Outcome = "empty"
		return nil
	}
	return s.post(ctx, t, f, t.id, text, pendingPost{Conclusion: true})
}

// refuse concludes the conversation without a model call, a daily budget
// of scope being spent, and gives the budget's notice once per
// conversation and day: in the thread, or, for a person's budget, to
// that person alone once the step commits.
func (s turnStep) refuse(ctx context.Context, scope, person string) error {
	c := s.c
	now := c.e.now()
	if !c.m.Read().Concluding() {
		// A conclusion already asked for (by :end:) keeps its trigger,
		// whose working reaction concluded takes off.
		c.m.RequestConclude(&concludeRequest{Reason: concludeByBudget})
	}
	c.m.Concluded(now, true, false)
	c.react(ctx)
	c.log.Info("conversation concluded", slog.String("reason", concludeByBudget), slog.String("scope", scope))
	key := "budget:" + scope + ":" + memory.UsageDay(now)
	if !c.m.Book().Notice(key) {
		return nil
	}
	name := c.facilitator
	if name == "" && len(c.names) > 0 {
		name = c.names[0]
	}
	if scope == budgetPerson {
		c.notices = append(c.notices, notice{user: person, agent: name, text: budgetNotice(scope)})
		return nil
	}
	id := c.m.TurnID()
	return c.deliver(ctx, pendingPost{PostID: id + "-budget", Turn: id, Agent: name, Text: budgetNotice(scope), Notice: true})
}
