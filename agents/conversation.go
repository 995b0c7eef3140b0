package agents

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/turn"
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
	chat workerChat // Slack, as the worker calls it
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
	// The channel's agents served, canonical, in registration order,
	// their spellings, its facilitator ("" when none) and the resolved
	// identities (registered agents and those the thread names): what a
	// turn reads of them.
	turn.Team
	registered map[string]bool // every registered agent, served or not
	unresolved []nameForm      // spellings of registered agents whose identity cannot be resolved now
	start      string
	resolve    func(ctx context.Context, name string) (ens.Agent, error)
	log        *slog.Logger
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
	c.chat = workerChat{chat: e.deps.Chat, cpu: e.cpu}
	resolve := func(ctx context.Context, name string) (a ens.Agent, err error) {
		e.cpu.off(func() { a, err = e.resolve(ctx, name) }) // the worker waits on an identity
		return a, err
	}
	c.roster = roster{Team: turn.Team{Agents: make(map[string]ens.Agent)}, registered: make(map[string]bool), resolve: resolve, log: c.log}
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
		a, err := resolve(ctx, n)
		if err != nil {
			c.log.Warn("agent of the channel cannot be resolved; it is not served", slog.String(logAgent, n), slog.Any(logError, err))
			unresolved = append(unresolved, n)
			continue
		}
		c.Agents[n] = a
		c.Names = append(c.Names, n)
		if a.Role == ens.RoleFacilitator {
			if c.Facilitator != "" {
				c.log.Error("a second facilitator in the channel is ignored", slog.String(logAgent, n))
				continue
			}
			c.Facilitator = n
		}
	}
	c.Forms = e.forms(c.Names)
	c.unresolved = e.forms(unresolved)
	if c.m, err = conversation.Load(snap.Conversation.State, limitsOf(&e.opts), c.Facilitator, c.conv.ID[:min(8, len(c.conv.ID))]); err != nil {
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
		if err := c.chat.PostEphemeral(ctx, c.conv.Channel, n.user, n.text); err != nil {
			c.log.Warn("post a notice of an agent that cannot be called", slog.String(logAgent, n.agent), slog.Any(logError, err))
		}
	}
	c.notices = nil
}

// gather resolves the identities a turn of agent a may read, so that its
// input holds them (turn.Team): the authors of the thread's agents' and
// human agents' messages, the participants paired with human agents, and
// the human a clone answers for.
func (s turnStep) gather(ctx context.Context, a ens.Agent) {
	c := s.c
	for _, m := range c.msgs {
		if m.Kind == kindAgent || m.Kind == kindHuman {
			c.agent(ctx, m.Agent)
		}
	}
	for _, p := range c.m.Read().Participants() {
		if p.Agent != "" {
			c.agent(ctx, p.Agent)
		}
	}
	if a.Role == ens.RoleClone && a.CloneOf != "" {
		c.agent(ctx, a.CloneOf)
	}
}

// agent returns the identity of a registered or human agent.
func (r *roster) agent(ctx context.Context, name string) (ens.Agent, bool) {
	if a, ok := r.Agents[name]; ok {
		return a, true
	}
	a, err := r.resolve(ctx, name)
	if err != nil {
		r.log.Warn("agent cannot be resolved", slog.String(logAgent, name), slog.Any(logError, err))
		return a, false
	}
	r.Agents[name] = a
	return a, true
}

// inbound is a thread message as the state machine sees it.
func (c *convo) inbound(m memory.Message) inbound {
	in := inbound{TS: m.TS, Kind: m.Kind, Author: author(m), UserID: m.UserID, Name: m.Name, At: m.At,
		End: turn.HasEnd(m.Text)}
	for _, n := range c.Mentions(m.Text) {
		in.Named = append(in.Named, namedAgent{Agent: n, Role: conversation.Role(c.Agents[n].Role)})
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
	if root != nil && c.m.Read().Status() == statusNew && !c.m.Read().Routed(root.TS) && conversation.StartsOnRoot(c.inbound(*root), c.start, c.Facilitator != "") {
		c.m.Opened(true)
		return true
	}
	// A direct message's thread that Slack opened (an assistant thread)
	// has no root of the person's: their first message there stands for it.
	if root == nil && c.m.Read().Status() == statusNew && len(fresh) > 0 && c.e.opts.rosterOf(c.conv.Channel) != c.conv.Channel &&
		conversation.StartsOnRoot(c.inbound(fresh[0]), c.start, c.Facilitator != "") {
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
	events, err := c.chat.ThreadHistory(ctx, c.conv.Channel, c.conv.ThreadTS, threadHistoryLimit)
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
			} else if m.Kind == kindAgent && c.Facilitator != "" {
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
			c.appendVisible(ctx, c.Agents[n.Agent], m)
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
