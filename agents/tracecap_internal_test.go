package agents

import (
	"encoding/json"
	"strings"
	"testing"
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
