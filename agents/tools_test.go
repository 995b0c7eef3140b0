package agents_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
)

// fakeToolbox offers "crm__lookup" and "crm__fail" for the selection
// "crm" and answers at once.
type fakeToolbox struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeToolbox) Tools(selection []string) []llm.Tool {
	for _, s := range selection {
		if s == "crm" {
			return []llm.Tool{{Name: "crm__lookup", Description: "Looks up."}, {Name: "crm__fail"}}
		}
	}
	return nil
}

func (f *fakeToolbox) Call(_ context.Context, name, args string) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, name+" "+args)
	f.mu.Unlock()
	if name == "crm__fail" {
		return "", errors.New("the CRM is down\nsecond line")
	}
	return "C1", nil
}

func withTools(tb *fakeToolbox, rounds int) func(*rig) {
	return func(r *rig) {
		r.opts.Agents = map[string]agents.AgentSettings{cora: {Tools: []string{"crm"}}}
		r.opts.MaxToolRounds = rounds
		r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Tools = tb })
	}
}

// The loop inside a turn's model call: calls of one round run and come
// back as one round; call ids are filled in when the model leaves them
// out; an error reads "error: <first line>"; a tool not offered does not
// run; after max_tool_rounds the
// request offers no tools; each call leaves one history line.
func TestToolLoop(t *testing.T) {
	tb := &fakeToolbox{}
	r := newRig(t, withTools(tb, 2))
	calls := llm.Response{ToolCalls: []llm.ToolCall{{Name: "crm__lookup", Arguments: `{"q":"Ada"}`}, {ID: "x", Name: "crm__fail"}, {ID: "y", Name: "crm__delete"}}, FinishReason: "tool_calls"}
	r.model.on(cora, "context-not-found", calls, calls, threading("C1", ""))
	r.model.on(cora, "context-found", "Covered.")
	r.model.on(elen, "default", "Thanks.")
	r.send("", "U1", "Alice", cora+" is C1 covered?")
	r.settle()

	reqs := r.model.calls(cora, "context-not-found")
	if len(reqs) != 3 {
		t.Fatalf("%d threading requests, want 3", len(reqs))
	}
	for i, req := range reqs {
		if (req.Tools != nil) != (i < 2) || len(req.ToolRounds) != i {
			t.Errorf("request %d: tools %v, %d rounds", i+1, req.Tools, len(req.ToolRounds))
		}
	}
	want := llm.ToolRound{Calls: []llm.ToolCall{{ID: "call_1_1", Name: "crm__lookup", Arguments: `{"q":"Ada"}`}, {ID: "x", Name: "crm__fail"}, {ID: "y", Name: "crm__delete"}},
		Results: []string{"C1", "error: the CRM is down", `error: no tool named "crm__delete" is available`}}
	if got := reqs[1].ToolRounds[0]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("round = %+v\nwant %+v", got, want)
	}
	if got := reqs[2].ToolRounds[1].Calls[0].ID; got != "call_2_1" {
		t.Errorf("second round's first id = %q", got)
	}
	if found := r.model.calls(cora, "context-found"); len(found) != 1 || len(found[0].Tools) != 2 || found[0].ToolRounds != nil {
		t.Errorf("context-found: %+v", found)
	}
	if elenReq := r.model.calls(elen, "default"); len(elenReq) != 1 || elenReq[0].Tools != nil {
		t.Fatalf("facilitator requests: %+v", elenReq)
	} else if h := strings.Join(messageTexts(elenReq[0]), "\n"); strings.Count(h, "(used crm__lookup)") != 2 || strings.Count(h, "(used crm__fail)") != 2 || strings.Contains(h, "crm__delete") {
		t.Errorf("facilitator history lacks the tool lines:\n%s", h)
	}
	if n := len(tb.calls); n != 4 || slices.ContainsFunc(tb.calls, func(c string) bool { return strings.HasPrefix(c, "crm__delete") }) {
		t.Errorf("tool calls %q: want 4, none of a tool not offered", tb.calls)
	}
}

// At most max_tool_calls_per_round calls of one round run; the others
// are answered "error: too many tool calls in one round" and leave no
// history line.
func TestToolCallsPerRound(t *testing.T) {
	tb := &fakeToolbox{}
	r := newRig(t, func(r *rig) { r.opts.MaxToolCallsPerRound = 2 }, withTools(tb, 2))
	var many []llm.ToolCall
	for i := range 5 {
		many = append(many, llm.ToolCall{ID: fmt.Sprint("c", i), Name: "crm__lookup", Arguments: fmt.Sprintf(`{"n":%d}`, i)})
	}
	calls := llm.Response{ToolCalls: many, FinishReason: "tool_calls"}
	r.model.on(cora, "context-not-found", calls, threading("C1", ""))
	r.model.on(cora, "context-found", "Covered.")
	r.model.on(elen, "default", "Thanks.")
	r.send("", "U1", "Alice", cora+" is C1 covered?")
	r.settle()

	reqs := r.model.calls(cora, "context-not-found")
	if len(reqs) != 2 {
		t.Fatalf("%d threading requests, want 2", len(reqs))
	}
	want := []string{"C1", "C1", "error: too many tool calls in one round", "error: too many tool calls in one round", "error: too many tool calls in one round"}
	if got := reqs[1].ToolRounds[0].Results; !slices.Equal(got, want) {
		t.Errorf("results = %q\nwant %q", got, want)
	}
	if got := strings.Join(tb.calls, ","); got != `crm__lookup {"n":0},crm__lookup {"n":1}` && got != `crm__lookup {"n":1},crm__lookup {"n":0}` {
		t.Errorf("tool calls run: %s", got)
	}
	if elenReq := r.model.calls(elen, "default"); len(elenReq) != 1 {
		t.Fatalf("facilitator requests: %+v", elenReq)
	} else if h := strings.Join(messageTexts(elenReq[0]), "\n"); strings.Count(h, "(used crm__lookup)") != 2 {
		t.Errorf("history has %d tool lines, want 2:\n%s", strings.Count(h, "(used crm__lookup)"), h)
	}
}

func messageTexts(r llm.Request) []string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.Content)
	}
	return out
}

// BenchmarkConversationWithTools is BenchmarkConversation with the expert
// calling one tool while threading: the difference is the engine's cost
// of a tool round (the tool and the model answer at once).
func BenchmarkConversationWithTools(b *testing.B) {
	r := newRig(b, withTools(&fakeToolbox{}, 8))
	lookup := llm.Response{ToolCalls: []llm.ToolCall{{ID: "a", Name: "crm__lookup", Arguments: `{}`}}, FinishReason: "tool_calls"}
	for b.Loop() {
		r.model.on(elen, "default", cora+" please check claim C1.", "Done.")
		r.model.on(cora, "context-not-found", lookup, threading("C1", ""))
		r.send("", "U1", "Alice", "Is claim C1 covered?")
		r.settle()
	}
}
