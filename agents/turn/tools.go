package turn

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/conclavehq/conclave/agents/llm"
)

// toolsFor lists the tools a turn's request offers: the selection of the
// prompt's settings when they have one, else the agent's configuration.
func (r Runner) toolsFor(agent string, fromSettings *[]string) []llm.Tool {
	if r.Tools == nil {
		return nil
	}
	selection := r.Config.Agents[agent].Tools
	if fromSettings != nil {
		selection = *fromSettings
	}
	if len(selection) == 0 {
		return nil
	}
	return r.Tools.Tools(selection)
}

// complete asks the model, running the tools it calls: each round's calls
// run in parallel, their results go back as tool messages and the model is
// asked again, at most max_tool_rounds times; the request after the last
// round offers no tools, so the model has to answer. Each call leaves one
// history line "(used <tool>)".
func (r Runner) complete(ctx context.Context, t *Turn, req llm.Request) (llm.Response, error) {
	for round := 0; ; round++ {
		if round >= r.Config.MaxToolRounds {
			req.Tools = nil
		}
		began := r.Now()
		resp, err := r.callModel(ctx, t, req)
		r.traceCall(t, req, resp, err, began)
		r.logBodies(ctx, req, resp, err)
		r.spend(t, ModelName(r.Model, req), resp, err)
		t.Report.PromptTokens += resp.PromptTokens
		t.Report.CompletionTokens += resp.CompletionTokens
		if err != nil || len(req.Tools) == 0 || len(resp.ToolCalls) == 0 {
			return resp, err
		}
		calls := slices.Clone(resp.ToolCalls)
		for i := range calls {
			if calls[i].ID == "" { // some compatible servers leave it out; results need one
				calls[i].ID = fmt.Sprintf("call_%d_%d", round+1, i+1)
			}
		}
		results := r.runTools(ctx, t, req.Tools, calls)
		if err := ctx.Err(); err != nil {
			return llm.Response{}, err
		}
		req.ToolRounds = append(slices.Clip(req.ToolRounds), llm.ToolRound{Content: resp.Content, Calls: calls, Results: results})
	}
}

// errTooManyToolCalls is the result of each call past
// max_tool_calls_per_round in one round.
const errTooManyToolCalls = "error: too many tool calls in one round"

// runTools runs one round's calls in parallel and returns their results,
// in the order of the calls. Only the tools offered run: a model naming
// another tool of the same server gets an error, so an agent never uses
// more than its selection. Only the first max_tool_calls_per_round calls
// run; the rest are answered errTooManyToolCalls.
func (r Runner) runTools(ctx context.Context, t *Turn, offered []llm.Tool, calls []llm.ToolCall) []string {
	results := make([]string, len(calls))
	ran := make([]bool, len(calls))
	traced := make([]TraceTool, len(calls))
	began := r.Now()
	var wg sync.WaitGroup
	for i, call := range calls {
		if i >= r.Config.MaxToolCallsPerRound {
			results[i] = errTooManyToolCalls
			continue
		}
		if !slices.ContainsFunc(offered, func(o llm.Tool) bool { return o.Name == call.Name }) {
			results[i] = fmt.Sprintf("error: no tool named %q is available", call.Name)
			traced[i] = traceTool(call, results[i], ToolUnavailable, r.Now(), 0)
			continue
		}
		ran[i] = true
		wg.Go(func() {
			called := r.Now()
			text, err := r.Tools.Call(ctx, call.Name, call.Arguments)
			outcome := ToolOK
			if err != nil {
				outcome = ToolError
				text = "error: " + FirstLine(err.Error()) // the toolbox keeps servers' secrets out of it
				r.Log.Info("tool call failed", slog.String(logAgent, t.Agent.EnsDomain), slog.String(logTurn, t.ID),
					slog.String("tool", call.Name), slog.Any(logError, err))
			}
			if strings.TrimSpace(text) == "" {
				text = "(no output)"
			}
			results[i] = CapText(text, r.Config.MaxMessageChars)
			traced[i] = traceTool(call, results[i], outcome, called, r.Now().Sub(called))
		})
	}
	r.off(wg.Wait)
	if t.Trace != nil {
		t.Trace.Tools = append(t.Trace.Tools, traced...)
		t.Trace.Timings.ToolsMS += r.Now().Sub(began).Milliseconds()
	}
	for i, call := range calls {
		if ran[i] {
			t.toolResults = append(t.toolResults, results[i])
			t.notes = append(t.notes, Note{Text: fmt.Sprintf("(used %s)", call.Name), At: r.Now()})
			t.Report.ToolCalls++
		}
	}
	return results
}
