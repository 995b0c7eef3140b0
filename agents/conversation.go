package agents

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// convo is one conversation loaded under its lock for one step: the thread,
// the engine state and the channel's agents, plus what the step will
// commit.
type convo struct {
	e    *Engine
	lock memory.Lock
	conv memory.Conversation
	msgs []memory.Message // the thread, in ts order
	st   *convState
	log  *slog.Logger

	names       []string             // registered agents served, canonical, in registration order
	forms       []nameForm           // their spellings
	registered  map[string]bool      // every registered agent, served or not
	unresolved  []nameForm           // spellings of registered agents whose identity cannot be resolved now
	agents      map[string]ens.Agent // resolved identities (registered agents and human agents)
	facilitator string               // the channel's facilitator ("" when none)
	start       string

	newMsgs  []memory.Message
	sessions []memory.SessionAppend
	appended map[string]bool // namespace|key|ts appended while loaded
	notices  []notice        // ephemeral notices to send once committed
	fresh    map[string]bool // posts of the outbox recorded by this step and not tried yet
	// overloaded is the agent a turn was refused for, the queue being
	// full (conversation.max_queued): its ⚠️ goes after routing.
	overloaded string
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
	act := c.next(ctx)
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
	return len(c.st.Outbox) == 0 && c.workDue(), nil
}

// workDue reports whether something waits to be done now: what next
// would act on.
func (c *convo) workDue() bool {
	now := c.e.now()
	d := c.st.deadline(now, c.e.opts.Timeout, c.e.opts.MaxTurns, c.facilitator != "")
	return !d.IsZero() && !d.After(now)
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
		e:          e,
		lock:       lock,
		conv:       snap.Conversation,
		msgs:       snap.Messages,
		st:         st,
		agents:     make(map[string]ens.Agent),
		registered: make(map[string]bool),
		appended:   make(map[string]bool),
		log: e.log.With(slog.String(logConversation, snap.Conversation.ID),
			slog.String(logChannel, snap.Conversation.Channel)),
	}
	if c.conv.ID == "" {
		c.conv.ID = lock.ConversationID
	}
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
		a, err := e.resolve(ctx, n)
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
	return c, nil
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
	conv := c.conv
	conv.State = c.st.encode()
	now := c.e.now()
	deadline := c.st.deadline(now, c.e.opts.Timeout, c.e.opts.MaxTurns, c.facilitator != "")
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
	})
	if err != nil {
		return false, fmt.Errorf("agents: commit conversation %s: %w", c.conv.ID, err)
	}
	c.newMsgs, c.sessions = nil, nil
	for _, n := range c.notices {
		if err := c.e.deps.Chat.PostEphemeral(ctx, c.conv.Channel, n.user, n.text); err != nil {
			c.log.Warn("post a notice of an agent that cannot be called", slog.String(logAgent, n.agent), slog.Any(logError, err))
		}
	}
	c.notices = nil
	return pending, nil
}

// agent returns the identity of a registered or human agent.
func (c *convo) agent(ctx context.Context, name string) (ens.Agent, bool) {
	if a, ok := c.agents[name]; ok {
		return a, true
	}
	a, err := c.e.resolve(ctx, name)
	if err != nil {
		c.log.Warn("agent cannot be resolved", slog.String(logAgent, name), slog.Any(logError, err))
		return a, false
	}
	c.agents[name] = a
	return a, true
}

// mentions lists the registered agents a message names, in order.
func (c *convo) mentions(m memory.Message) []string {
	return findMentions(m.Text, c.forms)
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
	if root != nil && c.st.Status == statusNew && !c.st.Routed[root.TS] && isPersonKind(root.Kind) {
		named := len(c.mentions(*root)) > 0
		if named || c.start == StartAll && c.facilitator != "" {
			c.st.Status = statusOpen
			return true
		}
	}
	first := "" // the first reply that adopts the thread
	for _, m := range fresh {
		if m.TS != c.conv.ThreadTS && m.Kind != kindBot && len(c.mentions(m)) > 0 {
			first = m.TS
			break
		}
	}
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
	events, err := c.e.deps.Chat.ThreadHistory(ctx, c.conv.Channel, c.conv.ThreadTS, threadHistoryLimit)
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

// routeOne routes one message. With triggers false the message is content
// only: it names, starts and wakes nobody.
func (c *convo) routeOne(ctx context.Context, m memory.Message, triggers bool) {
	st := c.st
	st.Routed[m.TS] = true
	st.touch(m.At)
	if isPersonKind(m.Kind) {
		c.addParticipant(m)
	}
	if m.Kind == kindHuman {
		c.appendHuman(ctx, m)
	}
	c.noticeUnknown(ctx, m)
	by := author(m)
	names := c.mentions(m)
	// A message naming an agent is visible to it, content or not.
	for _, name := range names {
		if name != by {
			c.appendVisible(ctx, c.agents[name], m)
		}
	}
	if !triggers || m.Kind == kindBot {
		return
	}
	if st.Status == statusConcluded {
		if !isPersonKind(m.Kind) || strings.Contains(m.Text, endToken) {
			return
		}
		c.restart(ctx)
	}
	if st.Conclude != nil {
		return
	}
	if isPersonKind(m.Kind) && strings.Contains(m.Text, endToken) {
		c.requestConclude(ctx, &concludeRequest{Reason: concludeByPerson, Trigger: m.TS})
		return
	}
	if m.Kind == kindHuman {
		c.answered(m.Agent)
	}
	for _, name := range names {
		if name == by {
			continue
		}
		switch c.agents[name].Role {
		case ens.RoleFacilitator:
			// The facilitator sees every message; naming it only wakes it.
		case ens.RoleHuman:
			c.call(name, m.TS)
		default:
			c.enqueue(ctx, name, m.TS)
		}
	}
	if by == "" || by != c.facilitator {
		c.wakeFacilitator(ctx, m.TS)
	}
}

// wakeFacilitator marks the facilitator due because of the message at ts,
// which carries the working reaction until the facilitator's turn ends.
func (c *convo) wakeFacilitator(ctx context.Context, ts string) {
	c.st.FacilitatorDue = true
	if c.facilitator == "" || slices.Contains(c.st.WakeBy, ts) {
		return
	}
	c.st.WakeBy = append(c.st.WakeBy, ts)
	c.working(ctx, ts, +1)
}

// settleFacilitator clears the facilitator's due mark: its turn ran (or
// will not run), so the messages that woke it lose the working reaction.
func (c *convo) settleFacilitator(ctx context.Context) {
	for _, ts := range c.st.WakeBy {
		c.working(ctx, ts, -1)
	}
	c.st.WakeBy = nil
	c.st.FacilitatorDue = false
}

func (c *convo) addParticipant(m memory.Message) {
	for i, p := range c.st.Participants {
		if m.Kind == kindHuman && p.Agent == m.Agent || m.Kind == kindPerson && p.Agent == "" && p.UserID == m.UserID {
			if m.Name != "" {
				c.st.Participants[i].Name = m.Name
			}
			return
		}
	}
	p := participant{UserID: m.UserID, Name: m.Name}
	if m.Kind == kindHuman {
		p.Agent = m.Agent
	}
	c.st.Participants = append(c.st.Participants, p)
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

// enqueue queues a turn for an expert or clone named by the message at ts.
// An agent already waiting is not queued twice: its turn sees both messages.
func (c *convo) enqueue(ctx context.Context, name, ts string) {
	for i, q := range c.st.Queue {
		if q.Agent == name {
			if !slices.Contains(q.triggers(), ts) {
				c.st.Queue[i].Also = append(c.st.Queue[i].Also, ts)
				c.working(ctx, ts, +1)
			}
			return
		}
	}
	if len(c.st.Queue) >= c.e.opts.MaxQueued {
		c.log.Warn("conversation overloaded; a turn is not queued", slog.String(logAgent, name),
			slog.String("ts", ts), slog.Int("queued", len(c.st.Queue)))
		if c.overloaded == "" {
			c.overloaded = name
		}
		return
	}
	c.st.Queue = append(c.st.Queue, queuedTurn{
		ID:      c.turnID(),
		Agent:   name,
		Trigger: ts,
		Queued:  c.e.now(),
	})
	sort.SliceStable(c.st.Queue, func(i, j int) bool { return lessTS(c.st.Queue[i].Trigger, c.st.Queue[j].Trigger) })
	c.working(ctx, ts, +1)
}

// noticeOverload posts the one ⚠️ of an overload (until the queue has
// room again), as the facilitator when there is one.
func (c *convo) noticeOverload(ctx context.Context) {
	name := c.overloaded
	c.overloaded = ""
	if c.st.Noticed[noticeOverloaded] {
		return
	}
	c.st.Noticed[noticeOverloaded] = true
	if c.facilitator != "" {
		name = c.facilitator
	}
	a, _ := c.agent(ctx, name)
	t := c.newTurn(c.turnID(), a, "")
	c.notify(ctx, t, fmt.Sprintf("this conversation is overloaded (%d turns waiting); write again once they are answered", len(c.st.Queue)))
}

// noticeOverloaded marks, in convState.Noticed, that the overload ⚠️ was
// posted; it is cleared when a queued turn starts.
const noticeOverloaded = "overloaded"

// call records a call to a human agent, bounded by call_timeout.
func (c *convo) call(name, ts string) {
	for _, h := range c.st.Calls {
		if h.Agent == name {
			return
		}
	}
	c.st.Calls = append(c.st.Calls, humanCall{Agent: name, Trigger: ts, Deadline: c.e.now().Add(c.e.opts.CallTimeout)})
}

// answered ends the calls to a human agent that just wrote.
func (c *convo) answered(name string) {
	calls := c.st.Calls[:0]
	for _, h := range c.st.Calls {
		if h.Agent != name {
			calls = append(calls, h)
		}
	}
	c.st.Calls = calls
}

func (c *convo) turnID() string {
	id := c.conv.ID
	if len(id) > 8 {
		id = id[:8]
	}
	return c.st.nextID(id + "-t")
}

// working counts the turns a message triggered; the message carries the
// working reaction while any is queued or running.
func (c *convo) working(ctx context.Context, ts string, delta int) {
	if ts == "" {
		return
	}
	before := c.st.Working[ts]
	after := max(before+delta, 0)
	if after == 0 {
		delete(c.st.Working, ts)
	} else {
		c.st.Working[ts] = after
	}
	if (before == 0) != (after == 0) {
		c.e.reactions.set(ctx, c.conv.Channel, ts, c.e.opts.WorkingReaction, after > 0)
	}
}

// addNote adds a history line that is never posted, and wakes the
// facilitator.
func (c *convo) addNote(text string) {
	c.st.Notes = append(c.st.Notes, note{ID: c.st.nextID("n"), Text: text, At: c.e.now()})
	c.st.FacilitatorDue = true
}

// cancelQueue drops every queued turn and pending call.
func (c *convo) cancelQueue(ctx context.Context) {
	for _, q := range c.st.Queue {
		c.dequeued(ctx, q)
	}
	c.st.Queue = nil
	c.st.Calls = nil
}

// dequeued releases the working reaction of the messages a queued turn
// answers.
func (c *convo) dequeued(ctx context.Context, q queuedTurn) {
	for _, ts := range q.triggers() {
		c.working(ctx, ts, -1)
	}
}

// requestConclude asks for the conclusion: queued turns are cancelled; the
// facilitator runs conclude next, or, without one, the conversation ends
// silently.
func (c *convo) requestConclude(ctx context.Context, r *concludeRequest) {
	c.cancelQueue(ctx)
	c.settleFacilitator(ctx)
	if c.facilitator == "" {
		c.st.Status = statusConcluded
		c.log.Info("conversation concluded without a facilitator", slog.String("reason", r.Reason))
		return
	}
	c.st.Conclude = r
	c.working(ctx, r.Trigger, +1)
}

// restart reopens a concluded conversation: the ✅ goes, the loop guards
// start again; bindings and the group id stay.
func (c *convo) restart(ctx context.Context) {
	c.st.Status = statusOpen
	c.st.Reopened = true
	c.st.Turns = 0
	c.st.AgentTurns = make(map[string]int)
	for k := range c.st.Noticed {
		if strings.HasPrefix(k, "cap:") {
			delete(c.st.Noticed, k)
		}
	}
	c.e.reactions.set(ctx, c.conv.Channel, c.conv.ThreadTS, doneReaction, false)
	c.log.Info("conversation restarted")
}

// next picks the step's action: a pending conclusion, expired calls, the
// next queued turn, the facilitator's wake-up, or the inactivity
// conclusion. nil when nothing is to be done now.
func (c *convo) next(ctx context.Context) func(context.Context) error {
	st := c.st
	now := c.e.now()
	if st.Status != statusOpen {
		return nil
	}
	if st.Conclude != nil {
		return c.concludeTurn
	}
	if st.Turns >= c.e.opts.MaxTurns {
		return func(ctx context.Context) error {
			c.log.Warn("max_turns reached; concluding", slog.Int("turns", st.Turns))
			c.requestConclude(ctx, &concludeRequest{Reason: concludeByGuard})
			return nil
		}
	}
	var expired []humanCall
	calls := st.Calls[:0]
	for _, h := range st.Calls {
		if !h.Deadline.After(now) {
			expired = append(expired, h)
		} else {
			calls = append(calls, h)
		}
	}
	st.Calls = calls
	if len(expired) > 0 {
		return func(context.Context) error {
			for _, h := range expired {
				c.addNote(fmt.Sprintf("(%s did not answer: timeout)", h.Agent))
				c.log.Info("call timed out", slog.String(logAgent, h.Agent))
			}
			return nil
		}
	}
	if len(st.Queue) > 0 {
		return c.callTurn
	}
	if st.FacilitatorDue && len(st.Calls) == 0 {
		if c.facilitator == "" {
			c.settleFacilitator(ctx)
			return nil
		}
		return c.facilitatorTurn
	}
	if !st.busy() && c.e.opts.Timeout > 0 && !st.LastActivity.IsZero() && !st.LastActivity.Add(c.e.opts.Timeout).After(now) {
		return func(ctx context.Context) error {
			c.requestConclude(ctx, &concludeRequest{Reason: concludeByTimeout})
			return nil
		}
	}
	return nil
}
