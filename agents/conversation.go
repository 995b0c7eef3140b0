package agents

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// convo is one conversation loaded under its lock for one step: the thread,
// its state machine and the channel's agents, plus what the step will
// commit. It turns what happens (messages, turns' outcomes) into the
// machine's transitions and carries out their effects.
type convo struct {
	e    *Engine
	lock memory.Lock
	conv memory.Conversation
	msgs []memory.Message // the thread, in ts order
	st   *convState
	m    *machine // the state machine over st
	log  *slog.Logger
	roster
	out *outbox

	newMsgs  []memory.Message
	sessions []memory.SessionAppend
	appended map[string]bool    // namespace|key|ts appended while loaded
	notices  []notice           // ephemeral notices to send once committed
	traces   []memory.TurnTrace // finished turns' traces, for the next commit
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
	if len(c.st.Outbox) > 0 {
		// Posts wait to be made: nothing else happens before they are.
		if err := c.flush(ctx); err != nil {
			return false, err
		}
		return len(c.st.Outbox) == 0, nil
	}
	c.route(ctx)
	if c.overloaded != "" {
		c.noticeOverload(ctx)
		if len(c.st.Outbox) > 0 {
			return false, nil // the notice waits to be posted
		}
	}
	act := c.action(c.m.next(c.e.now()))
	if act == nil {
		return false, nil // the caller's commit sends the notices
	}
	if len(c.notices) > 0 {
		if _, err := c.commit(ctx, commitHold); err != nil {
			return false, err
		}
	}
	if err := act(ctx); err != nil {
		return false, err
	}
	return len(c.st.Outbox) == 0 && c.m.workDue(c.e.now()), nil
}

// load builds a step's view of a loaded conversation; added is the
// channel's run-time agents as read with the snapshot (nil: read them
// now).
func (e *Engine) load(ctx context.Context, lock memory.Lock, snap memory.Snapshot, added []string) (*convo, error) {
	st, err := decodeState(snap.Conversation.State)
	if err != nil {
		return nil, fmt.Errorf("agents: conversation %s: %w", snap.Conversation.ID, err)
	}
	c := &convo{
		e:        e,
		lock:     lock,
		conv:     snap.Conversation,
		msgs:     snap.Messages,
		st:       st,
		appended: make(map[string]bool),
		log: e.log.With(slog.String(logConversation, snap.Conversation.ID),
			slog.String(logChannel, snap.Conversation.Channel)),
	}
	if c.conv.ID == "" {
		c.conv.ID = lock.ConversationID
	}
	c.roster = roster{agents: make(map[string]ens.Agent), registered: make(map[string]bool), resolve: e.resolve, log: c.log}
	sort.SliceStable(c.msgs, func(i, j int) bool { return lessTS(c.msgs[i].TS, c.msgs[j].TS) })
	if added == nil {
		if added, err = e.deps.Store.ChannelAgents(ctx, c.conv.Channel); err != nil {
			return nil, fmt.Errorf("agents: list agents of %s: %w", c.conv.Channel, err)
		}
	}
	names := e.channelNames(c.conv.Channel, added)
	c.start = e.static[c.conv.Channel].Start
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
	c.m = &machine{st: st, lim: limitsOf(&e.opts), facilitator: c.facilitator, idPrefix: c.conv.ID[:min(8, len(c.conv.ID))]}
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
// next deadline, then sends the notices it made safe to send. It reports
// whether the conversation was marked pending meanwhile, and fails with
// memory.ErrLockLost when the lock is gone.
func (c *convo) commit(ctx context.Context, mode commitMode) (bool, error) {
	c.react(ctx)
	conv := c.conv
	conv.State = c.st.encode()
	now := c.e.now()
	deadline := c.m.deadline(now)
	if held := now.Add(c.e.opts.LockTTL); mode == commitHold && !deadline.IsZero() && deadline.Before(held) {
		deadline = held
	}
	pending, err := c.e.deps.Store.Commit(ctx, c.lock, memory.Commit{
		Conversation: conv,
		Messages:     c.newMsgs,
		Sessions:     c.sessions,
		Deadline:     deadline,
		Release:      mode == commitRelease,
		PendingPosts: len(c.st.Outbox),
		Traces:       c.traces,
	})
	if err != nil {
		return false, fmt.Errorf("agents: commit conversation %s: %w", c.conv.ID, err)
	}
	c.newMsgs, c.sessions, c.traces = nil, nil, nil
	c.conv.State = conv.State // what a streamed reply's marker is committed over
	for _, n := range c.notices {
		var err error
		c.e.cpu.off(func() { err = c.e.deps.Chat.PostEphemeral(ctx, c.conv.Channel, n.user, n.text) })
		if err != nil {
			c.log.Warn("post a notice of an agent that cannot be called", slog.String(logAgent, n.agent), slog.Any(logError, err))
		}
	}
	c.notices = nil
	return pending, nil
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
func (r *roster) mentions(m memory.Message) []string {
	return findMentions(m.Text, r.forms)
}

// inbound is a thread message as the state machine sees it.
func (c *convo) inbound(m memory.Message) inbound {
	in := inbound{TS: m.TS, Kind: m.Kind, Author: author(m), UserID: m.UserID, Name: m.Name, At: m.At,
		End: strings.Contains(m.Text, endToken)}
	for _, n := range c.mentions(m) {
		in.Named = append(in.Named, namedAgent{Agent: n, Role: c.agents[n].Role})
	}
	return in
}

// react makes the reaction changes the machine decided, in order.
func (c *convo) react(ctx context.Context) {
	for _, fx := range c.m.takeEffects() {
		if fx.Done {
			c.e.reactions.set(ctx, c.conv.Channel, c.conv.ThreadTS, doneReaction, fx.Add)
		} else {
			c.e.reactions.set(ctx, c.conv.Channel, fx.TS, c.e.opts.WorkingReaction, fx.Add)
		}
	}
}

func isPersonKind(kind string) bool { return kind == kindPerson || kind == kindHuman }

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
		if !c.st.Routed[m.TS] {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) == 0 {
		return
	}
	if c.st.Status == statusNew || c.st.Status == statusIgnored {
		if !c.open(ctx, fresh) {
			for _, m := range fresh {
				c.routeOne(ctx, m, false)
			}
			c.st.Status = statusIgnored
			return
		}
		fresh = fresh[:0]
		for _, m := range c.msgs {
			if !c.st.Routed[m.TS] {
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
	if root != nil && c.st.Status == statusNew && !c.st.Routed[root.TS] && startsOnRoot(c.inbound(*root), c.start, c.facilitator != "") {
		c.st.Status = statusOpen
		return true
	}
	in := make([]inbound, len(fresh))
	for i, m := range fresh {
		in[i] = c.inbound(m)
	}
	first := adopter(in, c.conv.ThreadTS) // the first reply that adopts the thread
	if first == "" {
		return false
	}
	c.st.Status = statusOpen
	if root == nil {
		c.loadHistory(ctx)
	}
	// What was written before the adopting reply is content.
	for _, m := range c.msgs {
		if !c.st.Routed[m.TS] && lessTS(m.TS, first) {
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
	r := c.m.receive(in, triggers, c.e.now())
	if m.Kind == kindHuman {
		c.appendHuman(ctx, m)
	}
	c.noticeUnknown(ctx, m)
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
			slog.String("ts", m.TS), slog.Int("queued", len(c.st.Queue)))
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
	if c.st.Noticed[key] {
		return
	}
	c.st.Noticed[key] = true
	c.notices = append(c.notices, notice{user: m.UserID, agent: agent, text: text})
}

// noticeOverload posts the one ⚠️ of an overload (until the queue has
// room again), as the facilitator when there is one.
func (c *convo) noticeOverload(ctx context.Context) {
	name := c.overloaded
	c.overloaded = ""
	if !c.m.overloadNotice() {
		return
	}
	if c.facilitator != "" {
		name = c.facilitator
	}
	a, _ := c.agent(ctx, name)
	run := c.runner()
	t := run.newTurn(c.m.turnID(), a, "")
	run.notify(ctx, t, fmt.Sprintf("this conversation is overloaded (%d turns waiting); write again once they are answered", len(c.st.Queue)))
}

// conclude asks the machine for the conclusion.
func (c *convo) conclude(ctx context.Context, r *concludeRequest) {
	if c.m.requestConclude(r) {
		c.log.Info("conversation concluded without a facilitator", slog.String("reason", r.Reason))
	}
	c.react(ctx)
}

// action is what carries out the machine's choice; nil when there is
// nothing to run.
func (c *convo) action(act action) func(context.Context) error {
	run := c.runner()
	switch act {
	case actConclude:
		return run.concludeTurn
	case actGuard:
		return func(ctx context.Context) error {
			c.log.Warn("max_turns reached; concluding", slog.Int("turns", c.st.Turns))
			c.conclude(ctx, &concludeRequest{Reason: concludeByGuard})
			return nil
		}
	case actExpireCalls:
		return func(context.Context) error {
			for _, a := range c.m.expireCalls(c.e.now()) {
				c.log.Info("call timed out", slog.String(logAgent, a))
			}
			return nil
		}
	case actCall:
		return run.callTurn
	case actFacilitator:
		return run.facilitatorTurn
	case actSettle:
		c.m.settleFacilitator()
		return nil
	case actTimeout:
		return func(ctx context.Context) error {
			c.conclude(ctx, &concludeRequest{Reason: concludeByTimeout})
			return nil
		}
	}
	return nil
}
