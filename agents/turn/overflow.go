package turn

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/conclavehq/conclave/agents/llm"
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
// once more. A second refusal is ErrContextOverflow, which the turn's
// notice says in so many words.
func (r Runner) completeFitting(ctx context.Context, t *Turn, req llm.Request) (llm.Response, error) {
	resp, err := r.complete(ctx, t, req)
	if err == nil || !llm.IsContextOverflow(err) || t.fit == nil || ctx.Err() != nil {
		return resp, err
	}
	half := t.fit.budget / 2
	r.Log.Warn("the request exceeded the model's context window; retrying with half the history budget",
		slog.String(logAgent, t.Agent.EnsDomain), slog.String(logTurn, t.ID), slog.Int("budget", half), slog.Any(logError, err))
	shorter, err := r.rebuild(t, half)
	if err != nil {
		return llm.Response{}, err
	}
	resp, err = r.complete(ctx, t, shorter)
	if err != nil && llm.IsContextOverflow(err) {
		return resp, fmt.Errorf("%w: %w", ErrContextOverflow, err)
	}
	return resp, err
}

// rebuild builds the turn's last request again within budget.
func (r Runner) rebuild(t *Turn, budget int) (llm.Request, error) {
	tp := t.fit.prompt
	tp.BudgetOverride = budget
	req, info, err := BuildRequest(t.prompts, r.Model, tp)
	if err != nil {
		return llm.Request{}, err
	}
	req.Tools = r.toolsFor(t.Agent.EnsDomain, info.Tools)
	return req, nil
}
