package agents

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/memory"
)

// Price is what a model costs, in USD per million tokens
// ([llm.prices."<model>"]) (turn.Price).
type Price = turn.Price

// Budgets are the daily token budgets ([budget]); 0 is unlimited. A
// channel's own budget ([[channels]] daily_tokens) is in its
// ChannelConfig.
type Budgets struct {
	PerPerson  int64
	PerChannel int64
	Workspace  int64
}

// Spending reads today's usage counters, which commits write (memory's
// stores implement it).
type Spending interface {
	// Spent reads today's (UTC) token totals of a person, a channel and
	// the workspace.
	Spent(ctx context.Context, person, channel string) (memory.Spent, error)
}

// ModelUsage is what a turn spent on one model, as the endpoint
// reported it (turn.ModelUsage).
type ModelUsage = turn.ModelUsage

// turnUsage is what a finished turn of a conversation in channel adds
// to the usage counters, on behalf of the exchange's person.
func turnUsage(t *turn.Turn, channel, person, name string) []memory.Usage {
	if len(t.Report.Usage) == 0 {
		return nil
	}
	out := make([]memory.Usage, 0, len(t.Report.Usage))
	for _, u := range t.Report.Usage {
		if u.Model == "" {
			continue
		}
		out = append(out, memory.Usage{
			Person: person, PersonName: name, Channel: channel,
			Agent: t.Agent.EnsDomain, AgentName: t.Agent.Name, Model: u.Model,
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Calls: u.Calls,
		})
	}
	return out
}

// exchangePerson is the person whose message began the current exchange:
// the one who reopened the thread, else the root's author, else the
// first person who wrote ("" when none did).
func exchangePerson(sinceReopen []string, conv memory.Conversation, msgs []memory.Message) (id, name string) {
	byTS := func(ts string) (memory.Message, bool) {
		for _, m := range msgs {
			if m.TS == ts {
				return m, true
			}
		}
		return memory.Message{}, false
	}
	var opening []string
	if len(sinceReopen) > 0 {
		opening = append(opening, sinceReopen[0])
	}
	opening = append(opening, conv.ThreadTS)
	for _, ts := range opening {
		if m, ok := byTS(ts); ok && isPersonKind(m.Kind) && m.UserID != "" {
			return m.UserID, m.Name
		}
	}
	for _, m := range msgs {
		if isPersonKind(m.Kind) && m.UserID != "" {
			return m.UserID, m.Name
		}
	}
	return "", ""
}

// Budget scopes, as the gauge and the logs name them.
const (
	budgetPerson    = "person"
	budgetChannel   = "channel"
	budgetWorkspace = "workspace"
)

// budgetWarnRatio is the share of a budget past which it is logged once.
const budgetWarnRatio = 0.8

// budgetUse is one budget as a turn's start finds it.
type budgetUse struct {
	scope string
	limit int64
	spent int64
}

// budgetsOf lists the budgets a turn of channel is held to, with what
// today's counters hold, broadest first: the notice names the first one
// spent. A budget of 0 is unlimited and left out.
func budgetsOf(b Budgets, channelLimit int64, s memory.Spent, person string) []budgetUse {
	var out []budgetUse
	if b.Workspace > 0 {
		out = append(out, budgetUse{budgetWorkspace, b.Workspace, s.Workspace})
	}
	if channelLimit > 0 {
		out = append(out, budgetUse{budgetChannel, channelLimit, s.Channel})
	}
	if b.PerPerson > 0 && person != "" {
		out = append(out, budgetUse{budgetPerson, b.PerPerson, s.Person})
	}
	return out
}

// spentBudget is the first budget used up ("" when none is).
func spentBudget(uses []budgetUse) string {
	for _, u := range uses {
		if u.spent >= u.limit {
			return u.scope
		}
	}
	return ""
}

// budgetNotice is the thread's notice of a spent budget.
func budgetNotice(scope string) string {
	what := map[string]string{budgetWorkspace: "the workspace", budgetChannel: "this channel", budgetPerson: "your messages"}[scope]
	return fmt.Sprintf("⚠️ The daily model budget of %s is spent; it resets at 00:00 UTC.", what)
}

// budgetKeeper checks the daily budgets before a turn starts. It
// remembers the budgets past budgetWarnRatio already logged today, so
// that each is logged once (per replica), and which budgets each
// conversation's turns are likely to count against, so that their totals
// are read with the conversation.
type budgetKeeper struct {
	budgets  Budgets
	channels map[string]int64 // a channel's own budget ([[channels]] daily_tokens)
	spending Spending         // nil: no budget is checked
	onBudget func(scope string, ratio float64)

	mu     sync.Mutex
	logged map[string]bool // scope + group, for day
	day    string
	hints  map[string]budgetHint // by conversation
}

// budgetHint is what a conversation's load reads of the budget totals
// besides the workspace's: its channel's, and the people's its turns were
// last counted for on this replica or whose messages it recorded since,
// latest first.
type budgetHint struct {
	channel string
	people  []string
}

// Bounds of budgetKeeper.hints: conversations remembered, people each.
const (
	budgetHintConvs  = 4096
	budgetHintPeople = 3
)

func newBudgetKeeper(o *Options, d *Deps) *budgetKeeper {
	k := &budgetKeeper{budgets: o.Budgets, channels: map[string]int64{}, spending: d.Spending, onBudget: d.OnBudget,
		hints: map[string]budgetHint{}}
	for _, ch := range o.Channels {
		if ch.DailyTokens > 0 {
			k.channels[ch.ID] = ch.DailyTokens
		}
	}
	return k
}

// channelBudget is a channel's daily budget: its own, else [budget]'s.
func (k *budgetKeeper) channelBudget(channel string) int64 {
	if n := k.channels[channel]; n > 0 {
		return n
	}
	return k.budgets.PerChannel
}

// on reports whether any budget is checked.
func (k *budgetKeeper) on() bool {
	return k.spending != nil && (k.budgets != (Budgets{}) || len(k.channels) > 0)
}

// gates reports whether act starts a turn that budgets hold back.
func (k *budgetKeeper) gates(act action) bool {
	return k.on() && (act == conversation.ActCall || act == conversation.ActFacilitator || act == conversation.ActConclude)
}

// budgetRead is what the round trip that loaded a conversation read of
// today's budget totals (memory.Lookup.Spent): the first check after the
// load uses it when it holds the totals the check needs.
type budgetRead struct {
	channel string
	spent   map[string]memory.Spent // by person, as memory.Found.Spent
}

// of returns the totals of a turn of person in channel when the read
// holds those of the budgets checked.
func (r *budgetRead) of(k *budgetKeeper, channel, person string) (memory.Spent, bool) {
	if r == nil || r.channel != channel && k.channelBudget(channel) > 0 {
		return memory.Spent{}, false
	}
	if k.budgets.PerPerson <= 0 {
		person = "" // its total is not needed
	}
	s, ok := r.spent[person]
	return s, ok
}

// query is what the load of conversation convID, of channel ("" when
// unknown), reads of the budget totals: nil when no budget is checked.
func (k *budgetKeeper) query(convID, channel string) *memory.SpentQuery {
	if !k.on() {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	h := k.hints[convID]
	if channel == "" {
		channel = h.channel
	}
	return &memory.SpentQuery{Channel: channel, People: slices.Clone(h.people)}
}

// readOf is the budget read of a load that asked q (nil: none).
func readOf(q *memory.SpentQuery, f memory.Found) *budgetRead {
	if q == nil || f.Spent == nil {
		return nil
	}
	return &budgetRead{channel: q.Channel, spent: f.Spent}
}

// hint remembers that conversation convID is in channel and that its
// turns may count against person's budget ("" is none), for its next load.
func (k *budgetKeeper) hint(convID, channel, person string) {
	if !k.on() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	h, known := k.hints[convID]
	if !known && len(k.hints) >= budgetHintConvs {
		for id := range k.hints { // any one: a miss costs one read
			delete(k.hints, id)
			break
		}
	}
	h.channel = channel
	if person != "" && k.budgets.PerPerson > 0 {
		people := append([]string{person}, slices.DeleteFunc(slices.Clone(h.people), func(p string) bool { return p == person })...)
		h.people = people[:min(len(people), budgetHintPeople)]
	}
	k.hints[convID] = h
}

// spent checks the budgets of a turn of person in conversation convID of
// channel and returns the scope of the first budget spent ("" when none
// is). It uses the totals read with the conversation when they hold the
// turn's, else reads them. It reports each budget's used share
// (OnBudget) and logs, once a day, a budget past budgetWarnRatio.
func (k *budgetKeeper) spent(ctx context.Context, convID, channel, person string, read *budgetRead, now time.Time, log *slog.Logger) (string, error) {
	s, ok := read.of(k, channel, person)
	if !ok {
		var err error
		if s, err = k.spending.Spent(ctx, person, channel); err != nil {
			return "", fmt.Errorf("agents: read today's usage: %w", err)
		}
	}
	k.hint(convID, channel, person)
	uses := budgetsOf(k.budgets, k.channelBudget(channel), s, person)
	for _, u := range uses {
		ratio := float64(u.spent) / float64(u.limit)
		if k.onBudget != nil {
			k.onBudget(u.scope, ratio)
		}
		group := map[string]string{budgetPerson: person, budgetChannel: channel}[u.scope]
		if ratio >= budgetWarnRatio && k.firstToday(memory.UsageDay(now), u.scope, group) {
			log.Warn("daily model budget 80% used", slog.String("scope", u.scope), slog.String("group", group),
				slog.Int64("spent", u.spent), slog.Int64("limit", u.limit))
		}
	}
	return spentBudget(uses), nil
}

// firstToday reports whether the budget of scope and group is noted for
// the first time on day.
func (k *budgetKeeper) firstToday(day, scope, group string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.day != day {
		k.day, k.logged = day, map[string]bool{}
	}
	key := scope + "\x00" + group
	if k.logged[key] {
		return false
	}
	k.logged[key] = true
	return true
}

// usageTotals are a turn's tokens over its models and their cost, which
// is known only when every model it called has a price.
func usageTotals(us []ModelUsage) (in, out int64, cost *float64) {
	var sum float64
	priced := len(us) > 0
	for _, u := range us {
		in += u.InputTokens
		out += u.OutputTokens
		sum += u.CostUSD
		priced = priced && u.Priced
	}
	if priced {
		cost = &sum
	}
	return in, out, cost
}
