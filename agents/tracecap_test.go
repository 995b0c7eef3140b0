package agents

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/templates"
)

func TestCapTraceEntry(t *testing.T) {
	big := strings.Repeat("r", 3<<20)
	request, _ := json.Marshal(map[string]string{"content": strings.Repeat(`q"`, 1<<20)})
	for _, limit := range []int{64 << 10, 4 << 10, 1 << 10} {
		tr := &Trace{TurnID: "T1", Agent: "elen", Outcome: "ok",
			Calls: []TraceCall{{Request: request, Response: &TraceResponse{Content: "short reply"}}},
			Tools: []TraceTool{{Name: "crm__big", Arguments: `{"q":1}`, Result: big}}}
		body, err := capTraceEntry(tr, limit)
		if err != nil || len(body) > limit {
			t.Fatalf("limit %d: %d bytes, %v", limit, len(body), err)
		}
		var back Trace
		if err := json.Unmarshal(body, &back); err != nil || back.TurnID != "T1" || back.Agent != "elen" || len(back.Tools) != 1 {
			t.Errorf("limit %d: the entry does not decode as the trace: %v\n%.300s", limit, err, body)
		}
		if limit >= 4<<10 && (!strings.Contains(back.Tools[0].Result, "…[cut ") || back.Calls[0].Response.Content != "short reply") {
			t.Errorf("limit %d: the largest fields are not the ones cut, with a mark:\n%.300s", limit, body)
		}
	}
	small := &Trace{TurnID: "T2", Calls: []TraceCall{{Request: json.RawMessage(`{"a":1}`)}}}
	if body, err := capTraceEntry(small, 1<<20); err != nil || string(body) != mustJSON(t, small) {
		t.Errorf("an entry within the bound changed: %s, %v", body, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTraceEntryBounded: a turn whose reply is far larger than the entry
// bound stores a trace within it.
func TestTraceEntryBounded(t *testing.T) {
	const limit = 8 << 10
	r := newRig(t, withTraces(), func(r *rig) { r.opts.TraceEntryMaxBytes = limit })
	r.model.on(elen, templates.PromptDefault, strings.Repeat("a long answer ", 20000))
	root := r.send("", "U1", "Alice", "tell me everything")
	r.settle()
	kept, err := r.store.Traces(context.Background(), ConversationID(team, chanA, root.TS))
	if err != nil || len(kept.Turns) == 0 {
		t.Fatalf("traces: %d, %v", len(kept.Turns), err)
	}
	for _, k := range kept.Turns {
		if len(k.Body) > limit || !strings.Contains(string(k.Body), "…[cut ") {
			t.Errorf("turn %s stored %d bytes (bound %d), cut: %v", k.TurnID, len(k.Body), limit, strings.Contains(string(k.Body), "…[cut "))
		}
	}
}
