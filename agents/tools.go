package agents

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/turn"
)

// Toolbox is the MCP tools agents may use (turn.Toolbox).
type Toolbox = turn.Toolbox

// toolsFor lists the tools a turn's request offers: the selection of the
// prompt's settings when they have one, else the agent's configuration.
func toolsFor(tools Toolbox, opts *Options, agent string, fromSettings *[]string) []llm.Tool {
	if tools == nil {
		return nil
	}
	selection := opts.Agents[agent].Tools
	if fromSettings != nil {
		selection = *fromSettings
	}
	if len(selection) == 0 {
		return nil
	}
	return tools.Tools(selection)
}

// complete asks the model, running the tools it calls: each round's calls
// run in parallel, their results go back as tool messages and the model is
// asked again, at most max_tool_rounds times; the request after the last
// round offers no tools, so the model has to answer. Each call leaves one
// history line "(used <tool>)".
func (c runner) complete(ctx context.Context, t *turnRun, req llm.Request) (llm.Response, error) {
	for round := 0; ; round++ {
		if round >= c.opts.MaxToolRounds {
			req.Tools = nil
		}
		began := c.now()
		resp, err := c.callModel(ctx, t, req)
		c.tracer.traceCall(t, req, resp, err, began)
		c.tracer.logBodies(ctx, req, resp, err)
		c.spend(t, modelName(c.deps.Model, req), resp, err)
		t.report.PromptTokens += resp.PromptTokens
		t.report.CompletionTokens += resp.CompletionTokens
		if err != nil || len(req.Tools) == 0 || len(resp.ToolCalls) == 0 {
			return resp, err
		}
		calls := slices.Clone(resp.ToolCalls)
		for i := range calls {
			if calls[i].ID == "" { // some compatible servers leave it out; results need one
				calls[i].ID = fmt.Sprintf("call_%d_%d", round+1, i+1)
			}
		}
		results := c.runTools(ctx, t, req.Tools, calls)
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
func (c runner) runTools(ctx context.Context, t *turnRun, offered []llm.Tool, calls []llm.ToolCall) []string {
	results := make([]string, len(calls))
	ran := make([]bool, len(calls))
	traced := make([]TraceTool, len(calls))
	began := c.now()
	var wg sync.WaitGroup
	for i, call := range calls {
		if i >= c.opts.MaxToolCallsPerRound {
			results[i] = errTooManyToolCalls
			continue
		}
		if !slices.ContainsFunc(offered, func(o llm.Tool) bool { return o.Name == call.Name }) {
			results[i] = fmt.Sprintf("error: no tool named %q is available", call.Name)
			traced[i] = t.traceTool(call, results[i], toolUnavailable, c.now(), 0)
			continue
		}
		ran[i] = true
		wg.Go(func() {
			called := c.now()
			text, err := c.deps.Tools.Call(ctx, call.Name, call.Arguments)
			outcome := toolOK
			if err != nil {
				outcome = toolError
				text = "error: " + firstLine(err.Error()) // the toolbox keeps servers' secrets out of it
				c.log.Info("tool call failed", slog.String(logAgent, t.agent.EnsDomain), slog.String(logTurn, t.id),
					slog.String("tool", call.Name), slog.Any(logError, err))
			}
			if strings.TrimSpace(text) == "" {
				text = "(no output)"
			}
			results[i] = capText(text, c.opts.MaxMessageChars)
			traced[i] = t.traceTool(call, results[i], outcome, called, c.now().Sub(called))
		})
	}
	c.cpu.off(wg.Wait)
	if t.trace != nil {
		t.trace.Tools = append(t.trace.Tools, traced...)
		t.trace.Timings.ToolsMS += c.now().Sub(began).Milliseconds()
	}
	for i, call := range calls {
		if ran[i] {
			t.toolResults = append(t.toolResults, results[i])
			t.notes = append(t.notes, turn.Note{Text: fmt.Sprintf("(used %s)", call.Name), At: c.now()})
			t.report.ToolCalls++
		}
	}
	return results
}
