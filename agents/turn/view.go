package turn

import (
	"slices"
	"strings"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// Message kinds (Message.Kind), the conversation's.
const (
	kindPerson = conversation.KindPerson
	kindHuman  = conversation.KindHuman
	kindBot    = conversation.KindBot
	kindAgent  = conversation.KindAgent
)

// view builds what a turn's prompts see of its input: the messages
// visible to an agent, its history, the channel's members and the
// template fields (templates.Data).
type view struct {
	*Team
	in   Input
	msgs []Message // the thread, in ts order
	cfg  *Config
	conv string // the conversation's id
}

// view is the conversation as a turn's input gives it, for its prompts.
func (r Runner) view(in Input) view {
	return view{Team: in.Team, in: in, msgs: in.Thread, cfg: r.Config, conv: r.Place.Conversation}
}

func (c view) visibleTo(a ens.Agent) []Message { return c.Team.VisibleTo(a, c.msgs) }

// VisibleTo returns the messages of thread an agent sees: every one for
// the facilitator; for the others the messages that name them and their
// own replies.
func (t *Team) VisibleTo(a ens.Agent, thread []Message) []Message {
	if a.Role == ens.RoleFacilitator {
		return thread
	}
	var out []Message
	for _, m := range thread {
		if m.Kind == kindAgent && m.Agent == a.EnsDomain || slices.Contains(t.Mentions(m.Text), a.EnsDomain) {
			out = append(out, m)
		}
	}
	return out
}

// Label is how a message's author is written for other agents.
func (t *Team) Label(m Message) string {
	if m.Kind == kindAgent || m.Kind == kindHuman {
		a, _ := t.agent(m.Agent)
		return SpeakerLabel(a.Name, m.Agent)
	}
	name := m.Name
	if name == "" {
		name = "someone"
	}
	return SpeakerLabel(name, "")
}

// member is a message's author as templates see it.
func (c view) member(m Message) templates.Member {
	if m.Kind == kindAgent || m.Kind == kindHuman {
		a, _ := c.agent(m.Agent)
		return c.memberOf(a)
	}
	return templates.Person(m.Name)
}

// history turns thread messages into an agent's history: its own replies
// as assistant, the others as user with their author; with notes, the
// unposted history lines in time order. Agents' messages and notes of the
// current exchange are marked as its answers, which the budget cuts last.
func (c view) history(a ens.Agent, msgs []Message, withNotes bool) []HistoryMessage {
	var notes []conversation.Note
	if withNotes {
		notes = c.in.Notes
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
		out = append(out, HistoryMessage{Role: llm.RoleUser, Author: c.Label(m), Content: m.Text, Answer: answer})
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
	if c.in.ExchangeStart == "" {
		return time.Time{}
	}
	for _, m := range c.msgs {
		if m.TS == c.in.ExchangeStart {
			return m.At
		}
	}
	return time.Time{}
}

// members is ChannelMembers for agent self: itself, the channel's other
// agents in registration order, then human agents and people in the order
// they first wrote; no duplicates, never conclave's own bot user.
func (c view) members(self ens.Agent) []templates.Member {
	out := []templates.Member{c.memberOf(self)}
	seen := map[string]bool{self.EnsDomain: true}
	for _, n := range c.Names {
		if !seen[n] {
			seen[n] = true
			out = append(out, c.memberOf(c.Agents[n]))
		}
	}
	for _, p := range c.in.Participants {
		switch {
		case p.Agent != "":
			if seen[p.Agent] {
				continue
			}
			seen[p.Agent] = true
			a, _ := c.agent(p.Agent)
			out = append(out, c.memberOf(a))
		case p.UserID == "" || p.UserID == c.cfg.BotUserID:
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
func (c view) data(a ens.Agent, visible []Message, sessionID string, count int) templates.Data {
	max := c.cfg.MaxMessageChars
	d := templates.Data{
		ConversationId:           c.conv,
		ChannelDescription:       CapText(c.in.Description, max),
		ChannelMembers:           c.members(a),
		ConversationMessageCount: count,
		MemorySessionId:          sessionID,
		Vars:                     c.cfg.Vars,
	}
	d.Messages, d.ExchangeMessageCount = c.discussion(visible)
	if a.Role == ens.RoleClone && a.CloneOf != "" {
		if human, ok := c.agent(a.CloneOf); ok {
			d.CloneOf = c.memberOf(human)
		}
	}
	request := func(m Message) templates.Request {
		return templates.Request{Content: CapText(m.Text, max), Author: c.member(m)}
	}
	initial := -1
	for i, m := range visible {
		if a.Role == ens.RoleFacilitator || slices.Contains(c.Mentions(m.Text), a.EnsDomain) {
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
func (c view) exchangeRequest(visible []Message) (Message, bool) {
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
			(m.Kind == kindAgent && m.Agent != c.Facilitator) || (m.Kind == kindPerson && !c.isPersonRequest(m)) {
			continue
		}
		return m, true
	}
	return Message{}, false
}

// inExchange tells, per message ts of the thread, whether it belongs to
// the current exchange: from the message that began it (the root, or the
// person's message that last reopened the thread) on; every message when
// the reopening message is gone.
func (c view) inExchange() map[string]bool {
	in := make(map[string]bool, len(c.msgs))
	started := c.in.ExchangeStart == ""
	for _, m := range c.msgs {
		started = started || m.TS == c.in.ExchangeStart
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
func (c view) discussion(visible []Message) ([]templates.Message, int) {
	inExchange := c.inExchange()
	out := make([]templates.Message, len(visible))
	count := 0
	for i, m := range visible {
		in := inExchange[m.TS]
		if in {
			count++
		}
		out[i] = templates.Message{Author: c.member(m), Content: CapText(m.Text, c.cfg.MaxMessageChars), Time: m.At, InExchange: in}
	}
	return out, count
}

// isPersonRequest reports whether a message asks something of the
// conversation as a person wrote it: by a person or human agent, more than
// :end: with a signature, and not an acknowledgement the facilitator
// closed silently.
func (c view) isPersonRequest(m Message) bool {
	if !conversation.IsPersonKind(m.Kind) || slices.Contains(c.in.Acknowledged, m.TS) {
		return false
	}
	rest, hadEnd := StripEnd(m.Text)
	return !hadEnd || HasWords(rest)
}

// memberOf is the template member for an agent.
func (c view) memberOf(a ens.Agent) templates.Member {
	return Member(a, c.cfg.Agents[a.EnsDomain].SessionPattern)
}

// Member is the template member for agent a, with the format of its
// memory keys (.SessionFormat): its key_format attribute, else pattern
// (its session_pattern).
func Member(a ens.Agent, pattern string) templates.Member {
	format := strings.TrimSpace(a.Attribute(keyFormatAttribute))
	if format == "" {
		format = pattern
	}
	standsFor := ""
	if a.Role == ens.RoleClone {
		standsFor = a.CloneOf
	}
	return templates.Agent(templates.AgentInfo{
		Name:          a.Name,
		EnsDomain:     a.EnsDomain,
		Owner:         a.Owner,
		Addresses:     a.Addresses,
		Attributes:    a.Attributes,
		SessionFormat: format,
		StandsFor:     standsFor,
	})
}

// keyFormatAttribute is the agent attribute that describes its memory
// keys in words ("claim number, e.g. CLM-123456").
const keyFormatAttribute = "key_format"
