package agents

import (
	"context"
	"log/slog"
	"strings"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// expertNamespace is whose memory an expert's sessions are in: its ENS
// name, or "<ens>#<channel>" with expert.session_scope = "channel".
func (c *convo) expertNamespace(name string) string {
	return expertNamespace(&c.e.opts, c.conv.Channel, name)
}

// expertNamespace is whose memory an expert's sessions are in, for a
// conversation of channel.
func expertNamespace(o *Options, channel, name string) string {
	if o.SessionScope == ScopeChannel {
		return ExpertNamespace(name, o.rosterOf(channel))
	}
	return ExpertNamespace(name, "")
}

// rosterOf is the channel whose agents, start rule, description and memory
// scopes a conversation of channel has: DirectChannel for a direct
// message when it is set, else channel itself.
func (o *Options) rosterOf(channel string) string {
	if o.DirectChannel != "" && strings.HasPrefix(channel, "D") {
		return o.DirectChannel
	}
	return channel
}

// humanOf is the human a clone or human agent stands for: a clone's
// CloneOf, a standalone clone itself.
func humanOf(a ens.Agent) string {
	if a.Role == ens.RoleClone && a.CloneOf != "" {
		return a.CloneOf
	}
	return a.EnsDomain
}

// groupID returns the conversation's clone/human session id, computing and
// freezing it at first use (at the latest a clone's first turn): the
// agents that took part in the conversation so far, as the authors of its
// routed messages or named in them (human agents who wrote among them),
// each clone counted as its human, and the channel's facilitator whether
// or not it spoke before the clone (SPEC §14.2): a twin named directly and
// the same twin called by the facilitator share one memory. Other agents
// of the channel that took no part are not in it, so adding one to the
// channel changes no group.
func (c *convo) groupID() string {
	if g := c.m.Read().Group(); g != "" {
		return g
	}
	human := func(name string) string {
		if a, ok := c.Agents[name]; ok {
			return humanOf(a)
		}
		return name // a human agent, or an agent no longer served
	}
	var names []string
	if c.Facilitator != "" {
		names = append(names, c.Facilitator)
	}
	for _, m := range c.msgs {
		if !c.m.Read().Routed(m.TS) {
			continue
		}
		if a := author(m); a != "" {
			names = append(names, human(a))
		}
		for _, n := range c.Mentions(m.Text) {
			names = append(names, human(n))
		}
	}
	g := GroupSessionID(names)
	c.m.Book().Group(g)
	return g
}

// sessionOf returns the memory session an expert or clone reads and
// appends to in this conversation; ok is false for an unbound expert and
// for other roles.
func (c *convo) sessionOf(a ens.Agent) (namespace, key string, ok bool) {
	switch a.Role {
	case ens.RoleExpert:
		key := c.m.Read().Binding(a.EnsDomain)
		return c.expertNamespace(a.EnsDomain), key, key != ""
	case ens.RoleClone, ens.RoleHuman:
		return CloneNamespace(&c.e.opts, humanOf(a), c.conv.Channel), c.groupID(), true
	}
	return "", "", false
}

// entryOf is the session entry of a thread message: the agent's own reply
// as assistant, anything else as user with its author.
func (c *convo) entryOf(ctx context.Context, self string, m turn.Message) memory.SessionEntry {
	e := memory.SessionEntry{Role: llm.RoleUser, Content: m.Text, ConversationID: c.conv.ID, TS: m.TS, At: m.At}
	if m.Kind == kindAgent && m.Agent == self {
		e.Role = llm.RoleAssistant
		return e
	}
	if m.Kind == kindHuman || m.Kind == kindAgent {
		c.agent(ctx, m.Agent) // resolved for its label
	}
	e.Author = c.Label(m)
	return e
}

// appendSession adds entries to the next commit, each message at most once
// per session.
func (c *convo) appendSession(namespace, key string, entries ...memory.SessionEntry) {
	var fresh []memory.SessionEntry
	for _, e := range entries {
		id := namespace + "|" + key + "|" + e.TS
		if c.appended[id] {
			continue
		}
		c.appended[id] = true
		fresh = append(fresh, e)
	}
	if len(fresh) == 0 {
		return
	}
	c.sessions = append(c.sessions, memory.SessionAppend{Namespace: namespace, Key: key, Entries: fresh})
}

// appendVisible appends a message that an expert or clone sees to its
// session, when it has one.
func (c *convo) appendVisible(ctx context.Context, a ens.Agent, m memory.Message) {
	if a.Role != ens.RoleExpert && a.Role != ens.RoleClone {
		return
	}
	ns, key, ok := c.sessionOf(a)
	if !ok {
		return
	}
	c.appendSession(ns, key, c.entryOf(ctx, a.EnsDomain, turnMessage(m)))
}

// appendHuman stores a human agent's message in its group session, where
// its twin reads it.
func (c *convo) appendHuman(ctx context.Context, m memory.Message) {
	a, ok := c.agent(ctx, m.Agent)
	if !ok {
		return
	}
	a.Role = ens.RoleHuman
	ns, key, _ := c.sessionOf(a)
	c.appendSession(ns, key, c.entryOf(ctx, "", turnMessage(m)))
}

// bind binds an expert to a session and appends what it saw of this
// conversation so far.
func (c *convo) bind(ctx context.Context, a ens.Agent, key string) {
	c.m.Book().Bind(a.EnsDomain, key)
	ns := c.expertNamespace(a.EnsDomain)
	var entries []memory.SessionEntry
	for _, m := range c.VisibleTo(a, threadOf(c.msgs)) {
		entries = append(entries, c.entryOf(ctx, a.EnsDomain, m))
	}
	c.appendSession(ns, key, entries...)
	c.log.Info("expert bound to a session", slog.String(logAgent, a.EnsDomain), slog.String("session", key))
}

// otherConversations reads a session's entries that do not come from this
// conversation conv (those are in the thread already), as a turn reads
// them.
func otherConversations(ctx context.Context, sessions Sessions, conv, namespace, key string) ([]turn.SessionEntry, error) {
	entries, err := sessions.ReadSession(ctx, namespace, key, 0)
	if err != nil {
		return nil, err
	}
	out := make([]turn.SessionEntry, 0, len(entries))
	for _, e := range entries {
		if e.ConversationID != conv {
			out = append(out, turn.SessionEntry{Role: e.Role, Author: e.Author, Content: e.Content, At: e.At})
		}
	}
	return out, nil
}
