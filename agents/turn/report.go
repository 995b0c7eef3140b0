package turn

import "time"

// Report describes one turn, for logs and metrics.
type Report struct {
	Conversation     string
	TurnID           string
	Agent            string
	Role             string
	Phase            string // default, conclude, context-not-found, context-found
	Outcome          string // ok, empty, failed, skipped, timeout, cancelled
	Wait             time.Duration
	Duration         time.Duration
	PromptTokens     int
	CompletionTokens int
	ToolCalls        int // tools the model called in this turn
	// Usage is what the turn spent, per model.
	Usage []ModelUsage
	Err   error
}

// ModelUsage is what a turn spent on one model.
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

// Price is a model's price in USD per million tokens (llm.prices).
type Price struct {
	Input  float64
	Output float64
}

// Cost is what in input and out output tokens cost at p, in USD.
func (p Price) Cost(in, out int64) float64 {
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6
}

// spend adds one model call's tokens to the turn's usage. A call that
// failed without a reply costs nothing and is not counted.
func (r *Report) spend(prices map[string]Price, model string, in, out int64) {
	var u *ModelUsage
	for i := range r.Usage {
		if r.Usage[i].Model == model {
			u = &r.Usage[i]
		}
	}
	if u == nil {
		r.Usage = append(r.Usage, ModelUsage{Model: model})
		u = &r.Usage[len(r.Usage)-1]
	}
	u.InputTokens += in
	u.OutputTokens += out
	u.Calls++
	if p, ok := prices[model]; ok {
		u.Priced = true
		u.CostUSD += p.Cost(in, out)
	}
}
