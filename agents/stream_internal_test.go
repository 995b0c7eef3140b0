package agents

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/templates"
)

// The run again of a facilitator's turn that streamed before a crash takes
// that turn's id, even when ids were taken meanwhile; other turns get new
// ids.
func TestTurnIDForReusesAStreamedTurn(t *testing.T) {
	st := &convState{Seq: 7, Streamed: map[string]streamMark{
		"conv-012-t3": {TS: "1.000002", Agent: "elen.eth", Prompt: "default"},
	}}
	c := &convo{m: loadMachine(t, st, limits{}, "", "conv-012")}
	if got := c.turnIDFor("elen.eth", "default"); got != "conv-012-t3" {
		t.Errorf("turnIDFor(default) = %q, want the streamed turn's id", got)
	}
	if got := c.turnIDFor("elen.eth", "conclude"); got == "conv-012-t3" || got == "" {
		t.Errorf("turnIDFor(conclude) = %q, want a new id", got)
	}
	if got := c.turnIDFor("otto.eth", "default"); got == "conv-012-t3" || got == c.turnIDFor("otto.eth", "default") {
		t.Errorf("turnIDFor(another agent) = %q, want new, distinct ids", got)
	}
}

func TestShownText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"Done. :end:", "Done."},
		{"Done. :en", "Done."},
		{"Here:\n```go\nx := 1", "Here:\n```go\nx := 1\n```"},
		{"Plain text ", "Plain text"},
	} {
		if got := shownText(tt.in); got != tt.want {
			t.Errorf("shownText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"A first sentence. ", true}, {"A first sentence.", false}, {"Version 3.5 is", false},
		{"A line\n", true}, {"Why? Because", true}, {"Quoted.\" Then", true}, {"No end yet", false},
	} {
		if got := firstSentence(tt.in); got != tt.want {
			t.Errorf("firstSentence(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// streamingModel is the fake model with a Stream method that records
// which agent's prompts were streamed.
type streamingModel struct {
	*fakeModel
	mu       sync.Mutex
	streamed []string
}

func (m *streamingModel) Stream(ctx context.Context, r llm.Request, onText func(string)) (llm.Response, error) {
	m.mu.Lock()
	m.streamed = append(m.streamed, r.Agent+"|"+r.Prompt)
	m.mu.Unlock()
	return m.fakeModel.Complete(ctx, r)
}

// Plain-text turns stream; a threading turn (JSON the engine reads) never
// does.
func TestWhichTurnsStream(t *testing.T) {
	var sm *streamingModel
	r := newRig(t, func(r *rig) {
		r.opts.Stream = true
		sm = &streamingModel{fakeModel: r.model}
		r.e = r.engine(fakePrompts{}, func(d *Deps) { d.Model = sm })
	})
	r.model.on(elen, templates.PromptDefault, "I am "+elen+"; "+cora+" please look.", "Thanks. :end:")
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.model.on(cora, templates.PromptContextFound, "Here is "+cora+" with the answer.")
	r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()
	want := []string{elen + "|default", cora + "|context-found", elen + "|default", elen + "|conclude"}
	if !reflect.DeepEqual(sm.streamed, want) {
		t.Errorf("streamed %q, want %q", sm.streamed, want)
	}
	if n := len(r.model.calls(cora, templates.PromptContextNotFound)); n != 1 {
		t.Errorf("%d threading calls, want 1, not streamed", n)
	}
}
