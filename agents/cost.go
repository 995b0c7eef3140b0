package agents

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
)

// Price is what a model costs, in USD per million tokens
// ([llm.prices."<model>"]).
type Price struct {
	Input  float64
	Output float64
}

// Cost is what in input and out output tokens cost at p, in USD.
func (p Price) Cost(in, out int64) float64 {
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6
}

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

// ModelUsage is what a turn spent on one model, as the endpoint reported
// it.
type ModelUsage struct {
	Model        string
	InputTokens  int64
	OutputTokens int64
	Calls        int64
	// CostUSD is the cost at the configured price; Priced is false when
	// the model has none (CostUSD is then 0).
	CostUSD float64
	Priced  bool
}

// modelName is the model a request asks for: its own, else its
// profile's.
func modelName(m Model, req llm.Request) string {
	if req.Model != "" {
		return req.Model
	}
	if p, err := m.Profile(req.Profile); err == nil {
		return p.Model
	}
	return ""
}

// spend adds one model call's tokens to the turn's usage. A call that
// failed without a reply costs nothing and is not counted.
func (c runner) spend(t *turn, model string, resp llm.Response, err error) {
	if err != nil && resp.PromptTokens == 0 && resp.CompletionTokens == 0 {
		return
	}
	in, out := int64(resp.PromptTokens), int64(resp.CompletionTokens)
	var u *ModelUsage
	for i := range t.report.Usage {
		if t.report.Usage[i].Model == model {
			u = &t.report.Usage[i]
		}
	}
	if u == nil {
		t.report.Usage = append(t.report.Usage, ModelUsage{Model: model})
		u = &t.report.Usage[len(t.report.Usage)-1]
	}
	u.InputTokens += in
	u.OutputTokens += out
	u.Calls++
	if p, ok := c.opts.Prices[model]; ok {
		u.Priced = true
		u.CostUSD += p.Cost(in, out)
	}
}

// usageOf is what a finished turn adds to the usage counters.
func (c *convo) usageOf(t *turn) []memory.Usage {
	if len(t.report.Usage) == 0 {
		return nil
	}
	person, name := c.exchangePerson()
	out := make([]memory.Usage, 0, len(t.report.Usage))
	for _, u := range t.report.Usage {
		if u.Model == "" {
			continue
		}
		out = append(out, memory.Usage{
			Person: person, PersonName: name, Channel: c.conv.Channel,
			Agent: t.agent.EnsDomain, AgentName: t.agent.Name, Model: u.Model,
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Calls: u.Calls,
		})
	}
	return out
}

// exchangePerson is the person whose message began the current exchange:
// the one who reopened the thread, else the root's author, else the
// first person who wrote ("" when none did).
func (c *convo) exchangePerson() (id, name string) {
	byTS := func(ts string) (memory.Message, bool) {
		for _, m := range c.msgs {
			if m.TS == ts {
				return m, true
			}
		}
		return memory.Message{}, false
	}
	var opening []string
	if len(c.st.SinceReopen) > 0 {
		opening = append(opening, c.st.SinceReopen[0])
	}
	opening = append(opening, c.conv.ThreadTS)
	for _, ts := range opening {
		if m, ok := byTS(ts); ok && isPersonKind(m.Kind) && m.UserID != "" {
			return m.UserID, m.Name
		}
	}
	for _, m := range c.msgs {
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

// channelBudget is a channel's daily budget: its own, else [budget]'s.
func (e *Engine) channelBudget(channel string) int64 {
	if n := e.static[channel].DailyTokens; n > 0 {
		return n
	}
	return e.opts.Budgets.PerChannel
}

// budgetWatch remembers the budgets past budgetWarnRatio already logged
// today, so that each is logged once (per replica).
type budgetWatch struct {
	mu     sync.Mutex
	logged map[string]bool // day + scope + group
	day    string
}

// crossed reports whether the budget of scope and group went past the
// warning ratio for the first time today.
func (w *budgetWatch) crossed(day, scope, group string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.day != day {
		w.day, w.logged = day, map[string]bool{}
	}
	k := scope + "\x00" + group
	if w.logged[k] {
		return false
	}
	w.logged[k] = true
	return true
}

// budgetsSpent checks, before act starts a turn, the daily budgets of the
// exchange's person, the channel and the workspace. When one is spent,
// the conversation concludes without a model call (reason "budget") and
// the thread gets the budget's notice, once per conversation and day
// (ephemeral to the person for theirs); budgetsSpent then reports true.
func (c *convo) budgetsSpent(ctx context.Context, act action) (bool, error) {
	b := c.e.opts.Budgets
	chLimit := c.e.channelBudget(c.conv.Channel)
	if c.e.deps.Spending == nil || (b.PerPerson == 0 && chLimit == 0 && b.Workspace == 0) {
		return false, nil
	}
	if act != actCall && act != actFacilitator && act != actConclude {
		return false, nil
	}
	person, _ := c.exchangePerson()
	var s memory.Spent
	var err error
	c.e.cpu.off(func() { s, err = c.e.deps.Spending.Spent(ctx, person, c.conv.Channel) })
	if err != nil {
		return false, fmt.Errorf("agents: read today's usage: %w", err)
	}
	now := c.e.now()
	day := memory.UsageDay(now)
	uses := budgetsOf(b, chLimit, s, person)
	for _, u := range uses {
		ratio := float64(u.spent) / float64(u.limit)
		if c.e.deps.OnBudget != nil {
			c.e.deps.OnBudget(u.scope, ratio)
		}
		group := map[string]string{budgetPerson: person, budgetChannel: c.conv.Channel}[u.scope]
		if ratio >= budgetWarnRatio && c.e.budgets.crossed(day, u.scope, group) {
			c.log.Warn("daily model budget 80% used", slog.String("scope", u.scope), slog.String("group", group),
				slog.Int64("spent", u.spent), slog.Int64("limit", u.limit))
		}
	}
	scope := spentBudget(uses)
	if scope == "" {
		return false, nil
	}
	c.m.requestConclude(&concludeRequest{Reason: concludeByBudget})
	c.m.concluded(now, true)
	c.react(ctx)
	c.log.Info("conversation concluded", slog.String("reason", concludeByBudget), slog.String("scope", scope))
	if key := "budget:" + scope + ":" + day; !c.st.Noticed[key] {
		if c.st.Noticed == nil {
			c.st.Noticed = make(map[string]bool)
		}
		c.st.Noticed[key] = true
		if err := c.noticeBudget(ctx, scope, person); err != nil {
			return true, err
		}
	}
	return true, nil
}

// noticeBudget posts a spent budget's notice: in the thread, or, for a
// person's budget, to that person alone once the step commits.
func (c *convo) noticeBudget(ctx context.Context, scope, person string) error {
	text := budgetNotice(scope)
	name := c.facilitator
	if name == "" && len(c.names) > 0 {
		name = c.names[0]
	}
	if scope == budgetPerson {
		c.notices = append(c.notices, notice{user: person, agent: name, text: text})
		return nil
	}
	id := c.m.turnID()
	return c.deliver(ctx, pendingPost{PostID: id + "-budget", Turn: id, Agent: name, Text: text, Notice: true})
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
