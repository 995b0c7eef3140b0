package agents_test

import (
	"context"
	"errors"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
)

// tooLargeToolbox fails every call as the tools hub fails a call whose
// answer passed tools.max_result_bytes (agents/tools TestResultTooLarge
// holds the hub to that error text).
type tooLargeToolbox struct{ fakeToolbox }

func (*tooLargeToolbox) Call(context.Context, string, string) (string, error) {
	return "", errors.New("result too large")
}

// A tool result over tools.max_result_bytes reaches the model as exactly
// "error: result too large" (SPEC §14.1).
func TestToolResultTooLarge(t *testing.T) {
	tb := &tooLargeToolbox{}
	r := newRig(t, func(r *rig) {
		r.opts.Agents = map[string]agents.AgentSettings{cora: {Tools: []string{"crm"}}}
		r.opts.MaxToolRounds = 1
		r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Tools = tb })
	})
	calls := llm.Response{ToolCalls: []llm.ToolCall{{ID: "x", Name: "crm__lookup", Arguments: `{"q":"Ada"}`}}, FinishReason: "tool_calls"}
	r.model.on(cora, "context-not-found", calls, threading("C1", ""))
	r.model.on(cora, "context-found", "Covered.")
	r.model.on(elen, "default", "Thanks.")
	r.send("", "U1", "Alice", cora+" is C1 covered?")
	r.settle()
	reqs := r.model.calls(cora, "context-not-found")
	if len(reqs) < 2 || len(reqs[1].ToolRounds) != 1 {
		t.Fatalf("%d threading requests, want a second one with the tool round", len(reqs))
	}
	if got := reqs[1].ToolRounds[0].Results; len(got) != 1 || got[0] != "error: result too large" {
		t.Errorf("tool results the model read = %q, want exactly [\"error: result too large\"]", got)
	}
}
