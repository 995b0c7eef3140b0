package agents

import "testing"

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
