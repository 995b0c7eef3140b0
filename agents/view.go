package agents

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// view builds what a turn's prompts see of a loaded conversation: the
// messages visible to an agent, its history, the channel's members and
// the template fields (templates.Data). It changes nothing of the
// conversation (the roster learns identities it resolves).
type view struct {
	*roster
	conv memory.Conversation
	msgs []turn.Message      // the thread, in ts order, as a turn reads it
	st   conversation.Reader // participants and notes
	opts *Options
	// description is the channel's description, gathered by the step
	// before the turn (describe).
	description string
	log         *slog.Logger
}

// view is the conversation as it stands, for a turn's prompts.
func (c *convo) view() view {
	return view{roster: &c.roster, conv: c.conv, msgs: threadOf(c.msgs), st: c.m.Read(), opts: &c.e.opts, log: c.log}
}

// describe is the channel's description for a turn's prompts, read from
// Slack (the transport caches it) before the turn runs; "" when it cannot
// be read.
func describe(ctx context.Context, c *convo) string {
	desc, err := c.e.deps.Chat.ChannelDescription(ctx, c.e.opts.rosterOf(c.conv.Channel))
	if err != nil {
		c.log.Warn("channel description", slog.Any(logError, err))
	}
	return desc
}

// visibleTo returns the thread messages an agent sees: every one for the
// facilitator; for the others the messages that name them and their own
// replies.
func (c view) visibleTo(a ens.Agent) []turn.Message {
	if a.Role == ens.RoleFacilitator {
		return c.msgs
	}
	var out []turn.Message
	for _, m := range c.msgs {
		if m.Kind == kindAgent && m.Agent == a.EnsDomain || slices.Contains(c.mentions(m.Text), a.EnsDomain) {
			out = append(out, m)
		}
	}
	return out
}

// label is how a message's author is written for other agents.
func (r *roster) label(ctx context.Context, m turn.Message) string {
	if m.Kind == kindAgent || m.Kind == kindHuman {
		a, _ := r.agent(ctx, m.Agent)
		return turn.SpeakerLabel(a.Name, m.Agent)
	}
	name := m.Name
	if name == "" {
		name = "someone"
	}
	return turn.SpeakerLabel(name, "")
}

// member is a message's author as templates see it.
func (c view) member(ctx context.Context, m turn.Message) templates.Member {
	if m.Kind == kindAgent || m.Kind == kindHuman {
		a, _ := c.agent(ctx, m.Agent)
		return c.memberOf(a)
	}
	return templates.Person(m.Name)
}

// history turns thread messages into an agent's history: its own replies
// as assistant, the others as user with their author; with notes, the
// unposted history lines in time order. Agents' messages and notes of the
// current exchange are marked as its answers, which the budget cuts last.
func (c view) history(ctx context.Context, a ens.Agent, msgs []turn.Message, withNotes bool) []HistoryMessage {
	var notes []conversation.Note
	if withNotes {
		notes = c.st.Notes()
	}
	inExchange := c.inExchange()
	began := c.exchangeBegan()
	noteLine := func(n conversation.Note) HistoryMessage {
		return HistoryMessage{Role: llm.RoleUser, Content: n.Text, Answer: !n.At.Before(began)}
	}
	out := make([]HistoryMessage, 0, len(msgs)+len(notes))
	n := 0
	for _, m := range msgs {
		for n < len(notes) && notes[n].At.Before(m.At) {
			out = append(out, noteLine(notes[n]))
			n++
		}
		answer := inExchange[m.TS] && (m.Kind == kindAgent || m.Kind == kindHuman)
		if m.Kind == kindAgent && m.Agent == a.EnsDomain {
			out = append(out, HistoryMessage{Role: llm.RoleAssistant, Content: m.Text, Answer: answer})
			continue
		}
		out = append(out, HistoryMessage{Role: llm.RoleUser, Author: c.label(ctx, m), Content: m.Text, Answer: answer})
	}
	for ; n < len(notes); n++ {
		out = append(out, noteLine(notes[n]))
	}
	return out
}

// exchangeBegan is when the current exchange began: the time of the
// person's message that last reopened the thread; zero (every note
// belongs to it) before a reopening or when that message is gone.
func (c view) exchangeBegan() time.Time {
	if c.st.ExchangeStart() == "" {
		return time.Time{}
	}
	for _, m := range c.msgs {
		if m.TS == c.st.ExchangeStart() {
			return m.At
		}
	}
	return time.Time{}
}

// members is ChannelMembers for agent self: itself, the channel's other
// agents in registration order, then human agents and people in the order
// they first wrote; no duplicates, never conclave's own bot user.
func (c view) members(ctx context.Context, self ens.Agent) []templates.Member {
	out := []templates.Member{c.memberOf(self)}
	seen := map[string]bool{self.EnsDomain: true}
	for _, n := range c.names {
		if !seen[n] {
			seen[n] = true
			out = append(out, c.memberOf(c.agents[n]))
		}
	}
	for _, p := range c.st.Participants() {
		switch {
		case p.Agent != "":
			if seen[p.Agent] {
				continue
			}
			seen[p.Agent] = true
			a, _ := c.agent(ctx, p.Agent)
			out = append(out, c.memberOf(a))
		case p.UserID == "" || p.UserID == c.opts.BotUserID:
		default:
			if seen["user:"+p.UserID] {
				continue
			}
			seen["user:"+p.UserID] = true
			out = append(out, templates.Person(p.Name))
		}
	}
	return out
}

// data fills the template fields of a turn of agent a that sees visible.
func (c view) data(ctx context.Context, a ens.Agent, visible []turn.Message, sessionID string, count int) templates.Data {
	max := c.opts.MaxMessageChars
	d := templates.Data{
		ConversationId:           c.conv.ID,
		ChannelDescription:       capText(c.description, max),
		ChannelMembers:           c.members(ctx, a),
		ConversationMessageCount: count,
		MemorySessionId:          sessionID,
		Vars:                     c.opts.TemplateVars,
	}
	d.Messages, d.ExchangeMessageCount = c.discussion(ctx, visible)
	if a.Role == ens.RoleClone && a.CloneOf != "" {
		if human, ok := c.agent(ctx, a.CloneOf); ok {
			d.CloneOf = c.memberOf(human)
		}
	}
	request := func(m turn.Message) templates.Request {
		return templates.Request{Content: capText(m.Text, max), Author: c.member(ctx, m)}
	}
	initial := -1
	for i, m := range visible {
		if a.Role == ens.RoleFacilitator || slices.Contains(c.mentions(m.Text), a.EnsDomain) {
			initial = i
			break
		}
	}
	if initial < 0 && len(visible) > 0 {
		initial = 0
	}
	if initial >= 0 {
		d.InitialRequest = request(visible[initial])
		d.LatestRequest = d.InitialRequest
	}
	for i := len(visible) - 1; i >= 0; i-- {
		if m := visible[i]; !(m.Kind == kindAgent && m.Agent == a.EnsDomain) {
			d.LatestRequest = request(m)
			break
		}
	}
	d.LatestPersonRequest = d.InitialRequest
	for i := len(visible) - 1; i >= 0; i-- {
		if m := visible[i]; c.isPersonRequest(m) {
			d.LatestPersonRequest = request(m)
			break
		}
	}
	d.Request = d.InitialRequest
	if m, ok := c.exchangeRequest(visible); ok {
		d.Request = request(m)
	}
	return d
}

// exchangeRequest is .Request for an agent that sees visible: the message
// that began the current exchange when the agent sees it, else the first
// message of the exchange it sees that is not an answer (an expert's,
// clone's or human agent's reply) nor a bare :end:. A person's answer to
// the facilitator's question comes after the opening message, so it is
// never the request while the opening message is there.
func (c view) exchangeRequest(visible []turn.Message) (turn.Message, bool) {
	inExchange := c.inExchange()
	var opening string
	for _, m := range c.msgs {
		if inExchange[m.TS] && c.isPersonRequest(m) {
			opening = m.TS
			break
		}
	}
	for _, m := range visible {
		if m.TS == opening {
			return m, true
		}
	}
	for _, m := range visible {
		if !inExchange[m.TS] || m.Kind == kindHuman || m.Kind == kindBot ||
			(m.Kind == kindAgent && m.Agent != c.facilitator) || (m.Kind == kindPerson && !c.isPersonRequest(m)) {
			continue
		}
		return m, true
	}
	return turn.Message{}, false
}

// inExchange tells, per message ts of the thread, whether it belongs to
// the current exchange: from the message that began it (the root, or the
// person's message that last reopened the thread) on; every message when
// the reopening message is gone.
func (c view) inExchange() map[string]bool {
	in := make(map[string]bool, len(c.msgs))
	started := c.st.ExchangeStart() == ""
	for _, m := range c.msgs {
		started = started || m.TS == c.st.ExchangeStart()
		in[m.TS] = started
	}
	if !started {
		for ts := range in {
			in[ts] = true
		}
	}
	return in
}

// discussion is .Messages for an agent that sees visible, and how many of
// them belong to the current exchange: those from the message that began
// it (the root, or the person's message that last reopened the thread).
func (c view) discussion(ctx context.Context, visible []turn.Message) ([]templates.Message, int) {
	inExchange := c.inExchange()
	out := make([]templates.Message, len(visible))
	count := 0
	for i, m := range visible {
		in := inExchange[m.TS]
		if in {
			count++
		}
		out[i] = templates.Message{Author: c.member(ctx, m), Content: capText(m.Text, c.opts.MaxMessageChars), Time: m.At, InExchange: in}
	}
	return out, count
}

// isPersonRequest reports whether a message asks something of the
// conversation as a person wrote it: by a person or human agent, more than
// :end: with a signature, and not an acknowledgement the facilitator
// closed silently.
func (c view) isPersonRequest(m turn.Message) bool {
	if !isPersonKind(m.Kind) || c.st.Acknowledged(m.TS) {
		return false
	}
	rest, hadEnd := turn.StripEnd(m.Text)
	return !hadEnd || turn.HasWords(rest)
}

// memberOf is the template member for an agent (TemplateMember).
func (c view) memberOf(a ens.Agent) templates.Member { return TemplateMember(a, c.opts) }

// TemplateMember is the template member for agent a under the engine's
// options o, with the format of its memory keys (.SessionFormat): its
// key_format attribute, else its session_pattern.
func TemplateMember(a ens.Agent, o *Options) templates.Member {
	format := strings.TrimSpace(a.Attribute(keyFormatAttribute))
	if format == "" {
		format = o.Agents[a.EnsDomain].SessionPattern
	}
	return memberWithFormat(a, format)
}

// keyFormatAttribute is the agent attribute that describes its memory
// keys in words ("claim number, e.g. CLM-123456").
const keyFormatAttribute = "key_format"

// threadOf is the thread as a turn reads it: the store's messages
// converted at the engine's edge.
func threadOf(msgs []memory.Message) []turn.Message {
	out := make([]turn.Message, len(msgs))
	for i, m := range msgs {
		out[i] = turnMessage(m)
	}
	return out
}

// turnMessage is a stored message as a turn reads it.
func turnMessage(m memory.Message) turn.Message {
	return turn.Message{TS: m.TS, Kind: m.Kind, Agent: m.Agent, Name: m.Name, Text: m.Text, At: m.At}
}
