package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/internal/redact"
	"github.com/conclavehq/conclave/internal/testlog"
	"github.com/conclavehq/conclave/templates"
)

func withTraces(secrets ...string) func(*rig) {
	return func(r *rig) {
		r.opts.Traces = true
		r.opts.Replica = "replica-1"
		r.opts.Mask = redact.New(redact.Secrets{Values: secrets})
	}
}

// TestTurnTraces: every turn leaves a trace in the store with the
// commit that ends it: who, which phase, the request and each response,
// the tools run, what was posted; secrets are masked.
func TestTurnTraces(t *testing.T) {
	for _, store := range []string{"in-process", "redis"} {
		t.Run(store, func(t *testing.T) {
			tb := &fakeToolbox{}
			configure := []func(*rig){withTraces("sk-very-secret"), withTools(tb, 2)}
			if store == "redis" {
				configure = append([]func(*rig){withRedis}, configure...)
			}
			r := newRig(t, configure...)
			lookup := llm.Response{ToolCalls: []llm.ToolCall{{ID: "a", Name: "crm__lookup", Arguments: `{"token":"sk-very-secret"}`}, {ID: "b", Name: "crm__fail"}}, FinishReason: "tool_calls"}
			r.model.on(cora, templates.PromptContextNotFound, lookup, threading("C1", ""))
			r.model.on(cora, templates.PromptContextFound, "Covered.")
			r.model.on(elen, templates.PromptDefault, "Cora says it is covered.")
			root := r.send("", "U1", "Alice", cora+" is C1 covered?")
			r.settle()

			id := agents.ConversationID(team, chanA, root.TS)
			ref, err := r.store.TraceRef(context.Background(), chanA, root.TS)
			if err != nil || ref != id {
				t.Fatalf("TraceRef = %q, %v; want %s", ref, err, id)
			}
			traces, err := agents.ReadTraces(context.Background(), r.store, id)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tr := range traces {
				got = append(got, agents.FirstLabel(tr.Agent)+" "+tr.Phase+" "+tr.Outcome)
			}
			if want := []string{"cora context-found ok", "elen default ok"}; !slices.Equal(got, want) {
				t.Fatalf("turns = %q, want %q", got, want)
			}
			cora := traces[0]
			if cora.Conversation != id || cora.Channel != chanA || cora.ThreadTS != root.TS || cora.Replica != "replica-1" || cora.Role != "expert" {
				t.Errorf("ids = %+v", cora)
			}
			if len(cora.Calls) != 3 || cora.Calls[2].Response == nil || cora.Calls[2].Response.Content != "Covered." {
				t.Fatalf("calls = %+v, want three, the last answering Covered.", cora.Calls)
			}
			var first struct {
				Messages []struct{ Role, Content string }
				Tools    []struct{ Name string }
			}
			if err := json.Unmarshal(cora.Calls[0].Request, &first); err != nil {
				t.Fatal(err)
			}
			if len(first.Messages) < 2 || !strings.Contains(first.Messages[len(first.Messages)-1].Content, "context-not-found") || len(first.Tools) != 2 {
				t.Errorf("first request = %s", cora.Calls[0].Request)
			}
			if calls := cora.Calls[0].Response.ToolCalls; len(calls) != 2 || calls[0].Name != "crm__lookup" {
				t.Errorf("first response's tool calls = %+v", calls)
			}
			tools := fmt.Sprint(cora.Tools)
			for _, want := range []string{"crm__lookup", "C1 ok", "crm__fail", "error: the CRM is down error", "[redacted]"} {
				if !strings.Contains(tools, want) {
					t.Errorf("tools = %s, want %q in it", tools, want)
				}
			}
			wantPrompts := []agents.TracePrompt{{Prompt: "system", File: "built-in"}, {Prompt: "context-not-found", File: "built-in"}, {Prompt: "context-found", File: "built-in"}}
			if !slices.Equal(cora.Prompts, wantPrompts) {
				t.Errorf("prompts = %+v, want %+v", cora.Prompts, wantPrompts)
			}
			if len(cora.Posted) != 1 || len(traces[1].Posted) != 1 {
				t.Errorf("posted = %v and %v, want one post each", cora.Posted, traces[1].Posted)
			}
			body, _ := json.Marshal(traces)
			if strings.Contains(string(body), "sk-very-secret") {
				t.Errorf("a secret is in a trace: %s", body)
			}
		})
	}
}

// TestTraceOfFailedTurn: a failed turn's trace gives the call's reason
// class and the notice it posted, never the error's text.
func TestTraceOfFailedTurn(t *testing.T) {
	r := newRig(t, withTraces())
	r.model.on(elen, templates.PromptDefault, &llm.Error{Status: 502, Reason: llm.ReasonServer})
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	traces, err := agents.ReadTraces(context.Background(), r.store, agents.ConversationID(team, chanA, root.TS))
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 1 {
		t.Fatalf("%d traces, want 1", len(traces))
	}
	tr := traces[0]
	if tr.Outcome != "failed" || tr.Notice != "the model endpoint returned HTTP 502" || len(tr.Calls) != 1 || tr.Calls[0].Error != tr.Notice {
		t.Errorf("trace = %+v", tr)
	}
}

// TestTracesOff: trace.enabled = false writes none.
func TestTracesOff(t *testing.T) {
	r := newRig(t)
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	if traces, err := agents.ReadTraces(context.Background(), r.store, agents.ConversationID(team, chanA, root.TS)); err != nil || len(traces) != 0 {
		t.Errorf("traces = %v, %v; want none", traces, err)
	}
}

// TestPromptBodiesOnlyAtDebug: each model call logs the request body and
// the reply at debug level, secrets masked, and nothing of them at info.
func TestPromptBodiesOnlyAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var logs testlog.Buffer
		r := newRig(t, func(r *rig) {
			r.opts.Mask = redact.New(redact.Secrets{Values: []string{"sk-very-secret"}})
			r.logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
		})
		r.model.on(elen, templates.PromptDefault, "the reply, sk-very-secret")
		r.send("", "U1", "Alice", "the prompt body")
		r.settle()
		logged := logs.String()
		has := strings.Contains(logged, "llm: request") && strings.Contains(logged, "the prompt body") && strings.Contains(logged, "the reply")
		if has != (level == slog.LevelDebug) {
			t.Errorf("at %s, bodies logged = %v:\n%s", level, has, logged)
		}
		if strings.Contains(logged, "sk-very-secret") {
			t.Errorf("a secret was logged:\n%s", logged)
		}
	}
}
