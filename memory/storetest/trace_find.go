package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
)

// traceFinder is what a store offers to find a conversation from the
// first characters of its id (a turn reference of a ⚠️ notice).
type traceFinder interface {
	TraceConversations(ctx context.Context, idPrefix string) ([]string, error)
}

// testTraceConversations: the conversations with traces are found by the
// start of their id, sorted; a conversation without traces is not.
func testTraceConversations(t *testing.T, h *harness) {
	f, ok := h.s.(traceFinder)
	if !ok {
		t.Skip("the store does not find conversations by an id's start")
	}
	for i, id := range []string{"a9355e42-0001", "a9355e42-0002", "b1000000-0001"} {
		h.record(t, id, h.msg("170000000"+string(rune('0'+i))+".000100", "hi"), "Ev"+id)
		l := h.lock(t, id, time.Minute)
		h.commit(t, l, memory.Commit{Conversation: conv(id), Traces: []memory.TurnTrace{{TurnID: id + "-t1", Body: []byte("x")}}})
	}
	h.record(t, "a9355e42-0003", h.msg("1700000009.000100", "hi"), "Ev3") // no trace
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"a9355e42", []string{"a9355e42-0001", "a9355e42-0002"}},
		{"b1", []string{"b1000000-0001"}},
		{"c0", nil},
	} {
		got, err := f.TraceConversations(h.ctx, tt.prefix)
		if err != nil {
			t.Fatalf("TraceConversations(%q): %v", tt.prefix, err)
		}
		want(t, "conversations of "+tt.prefix, got, tt.want)
	}
}
