package agents_test

import (
	"context"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/templates"
)

// TestTraceEntryBounded: a turn whose reply is far larger than the entry
// bound stores a trace within it.
func TestTraceEntryBounded(t *testing.T) {
	const limit = 8 << 10
	r := newRig(t, withTraces(), func(r *rig) { r.opts.TraceEntryMaxBytes = limit })
	r.model.on(elen, templates.PromptDefault, strings.Repeat("a long answer ", 20000))
	root := r.send("", "U1", "Alice", "tell me everything")
	r.settle()
	kept, err := r.store.Traces(context.Background(), agents.ConversationID(team, chanA, root.TS))
	if err != nil || len(kept.Turns) == 0 {
		t.Fatalf("traces: %d, %v", len(kept.Turns), err)
	}
	for _, k := range kept.Turns {
		if len(k.Body) > limit || !strings.Contains(string(k.Body), "…[cut ") {
			t.Errorf("turn %s stored %d bytes (bound %d), cut: %v", k.TurnID, len(k.Body), limit, strings.Contains(string(k.Body), "…[cut "))
		}
	}
}
