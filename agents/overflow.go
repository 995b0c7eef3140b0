package agents

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/turn"
)

// fitting is what a turn's last request was built from, so that it can
// be built again with a smaller input budget.
type fitting struct {
	prompt TurnPrompt
	budget int // the input budget it was built to
}

// completeFitting calls the model as complete does; when the endpoint
// answers that the request exceeds the model's context window, it builds
// the request again with the history cut to half its budget and tries
// once more. A second refusal is turn.ErrContextOverflow, which the turn's
// notice says in so many words.
func (c runner) completeFitting(ctx context.Context, t *turnRun, req llm.Request) (llm.Response, error) {
	resp, err := c.complete(ctx, t, req)
	if err == nil || !llm.IsContextOverflow(err) || t.fit == nil || ctx.Err() != nil {
		return resp, err
	}
	half := t.fit.budget / 2
	c.log.Warn("the request exceeded the model's context window; retrying with half the history budget",
		slog.String(logAgent, t.agent.EnsDomain), slog.String(logTurn, t.id), slog.Int("budget", half), slog.Any(logError, err))
	shorter, err := c.rebuild(t, half)
	if err != nil {
		return llm.Response{}, err
	}
	resp, err = c.complete(ctx, t, shorter)
	if err != nil && llm.IsContextOverflow(err) {
		return resp, fmt.Errorf("%w: %w", turn.ErrContextOverflow, err)
	}
	return resp, err
}

// rebuild builds the turn's last request again within budget.
func (c runner) rebuild(t *turnRun, budget int) (llm.Request, error) {
	tp := t.fit.prompt
	tp.BudgetOverride = budget
	req, info, err := BuildRequest(t.prompts, c.deps.Model, tp)
	if err != nil {
		return llm.Request{}, err
	}
	req.Tools = toolsFor(c.deps.Tools, c.opts, t.agent.EnsDomain, info.Tools)
	return req, nil
}
