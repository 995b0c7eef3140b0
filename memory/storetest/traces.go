package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
)

// traceTests are the suite's cases on turn traces and feedback.
var traceTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"Traces/commit and read", testTraces},
	{"Traces/bounded per conversation", testTraceBound},
	{"Traces/bounded over all conversations", testTraceTotalBound},
	{"Traces/lost lock writes none", testTraceLostLock},
	{"Traces/feedback", testFeedback},
	{"Traces/bad input", testTraceBadInput},
	{"Traces/retention", testTraceRetention},
	{"Traces/conversations by an id's start", testTraceConversations},
}

func (h *harness) traces(t *testing.T, id string) memory.Traces {
	t.Helper()
	tr, err := h.s.Traces(h.ctx, id)
	if err != nil {
		t.Fatalf("Traces(%s): %v", id, err)
	}
	return tr
}

func turnIDs(tr memory.Traces) []string {
	var ids []string
	for _, t := range tr.Turns {
		ids = append(ids, t.TurnID)
	}
	return ids
}

// TraceBody is a trace body of n bytes that compresses poorly, so that
// bounds measured on stored (compressed) bytes are exercised.
func TraceBody(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1 // #nosec G115 -- a test pattern's seed: wrapping is what it wants
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte('a' + x%26)
	}
	return b
}

func testTraces(t *testing.T, h *harness) {
	if tr := h.traces(t, "c1"); len(tr.Turns) != 0 || len(tr.Feedback) != 0 {
		t.Fatalf("traces of an unknown conversation = %+v, want none", tr)
	}
	if _, err := h.s.TraceRef(h.ctx, "C1", "1700000000.000100"); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("TraceRef before any trace: %v, want ErrNotFound", err)
	}
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	big := bytes.Repeat([]byte(`{"role":"user","content":"the same words again"}`), 2000)
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Traces: []memory.TurnTrace{
		{TurnID: "t1", Body: []byte(`{"turn":"t1"}`)},
		{TurnID: "t2", Body: big},
	}})
	h.commit(t, l, memory.Commit{Conversation: conv("c1")})
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Traces: []memory.TurnTrace{{TurnID: "t3", Body: []byte("third")}}})
	tr := h.traces(t, "c1")
	want(t, "turns", turnIDs(tr), []string{"t1", "t2", "t3"})
	if len(tr.Turns) == 3 {
		if string(tr.Turns[0].Body) != `{"turn":"t1"}` || !bytes.Equal(tr.Turns[1].Body, big) || string(tr.Turns[2].Body) != "third" {
			t.Errorf("bodies read back differ from those committed")
		}
	}
	id, err := h.s.TraceRef(h.ctx, "C1", "1700000000.000100")
	if err != nil || id != "c1" {
		t.Errorf("TraceRef = %q, %v; want c1", id, err)
	}
	if _, err := h.s.TraceRef(h.ctx, "C1", "1700000000.000999"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("TraceRef of another thread: %v, want ErrNotFound", err)
	}
}

func testTraceBound(t *testing.T, h *harness) {
	h = h.reopen(t, memory.Options{TraceMaxBytes: 10_000})
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	for i := 1; i <= 6; i++ {
		h.commit(t, l, memory.Commit{Conversation: conv("c1"), Traces: []memory.TurnTrace{
			{TurnID: fmt.Sprintf("t%d", i), Body: TraceBody(i, 3000)},
		}})
	}
	// About 3 KB each once stored: the newest fit, the oldest went.
	got := turnIDs(h.traces(t, "c1"))
	if len(got) < 2 || len(got) > 5 || got[len(got)-1] != "t6" || got[0] == "t1" {
		t.Errorf("turns kept = %v, want the newest few, t1 dropped", got)
	}
	// A trace larger than the bound alone is still kept, as the newest.
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Traces: []memory.TurnTrace{{TurnID: "huge", Body: TraceBody(9, 40_000)}}})
	want(t, "turns after one over the bound", turnIDs(h.traces(t, "c1")), []string{"huge"})
}

// testTraceTotalBound holds the bound over all traces: past it, whole
// conversations' traces go, the least recently traced first; their
// conversations stay, and take traces again.
func testTraceTotalBound(t *testing.T, h *harness) {
	const bound = 30_000 // three traces of about 8 KB fit, four do not
	h = h.reopen(t, memory.Options{TraceMaxBytes: 10_000, TraceTotalMaxBytes: bound})
	locks := map[string]memory.Lock{}
	trace := func(id, turn string, body []byte) {
		t.Helper()
		l, ok := locks[id]
		if !ok {
			h.record(t, id, h.msg("1700000000.000100", "hi "+id), "Ev-"+id)
			l = h.lock(t, id, time.Minute)
			locks[id] = l
		}
		c := conv(id)
		c.State = []byte("state of " + id)
		h.commit(t, l, memory.Commit{Conversation: c, Traces: []memory.TurnTrace{{TurnID: turn, Body: body}}})
		h.clock.Advance(time.Millisecond) // orders the commits; no expiry is near
	}
	kept := func(when string, ids ...string) {
		t.Helper()
		var got []string
		for _, id := range []string{"c1", "c2", "c3", "c4", "c5"} {
			if len(h.traces(t, id).Turns) > 0 {
				got = append(got, id)
			}
		}
		want(t, "conversations with traces "+when, got, ids)
	}
	trace("c1", "t1", TraceBody(1, 8000))
	trace("c2", "t2", TraceBody(2, 8000))
	trace("c3", "t3", TraceBody(3, 8000))
	trace("c1", "t1b", []byte("a second, small turn")) // c1 is now the most recently traced
	kept("under the bound", "c1", "c2", "c3")
	trace("c4", "t4", TraceBody(4, 8000))
	kept("past the bound once", "c1", "c3", "c4")
	trace("c5", "t5", TraceBody(5, 8000))
	kept("past the bound twice", "c1", "c4", "c5")
	for _, id := range []string{"c2", "c3"} {
		snap := h.snapshot(t, id)
		if !snap.Exists || string(snap.Conversation.State) != "state of "+id || len(snap.Messages) != 1 {
			t.Errorf("%s after its traces were evicted = %+v, want its state and message kept", id, snap)
		}
	}
	// Traced again, an evicted conversation keeps its new turn only, and
	// the least recently traced (c1) makes room.
	trace("c2", "t2b", TraceBody(6, 8000))
	kept("once c2 is traced again", "c2", "c4", "c5")
	want(t, "turns of c2", turnIDs(h.traces(t, "c2")), []string{"t2b"})
}

func testTraceLostLock(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	h.release(t, l)
	_, err := h.s.Commit(h.ctx, l, memory.Commit{Conversation: conv("c1"), Traces: []memory.TurnTrace{{TurnID: "t1", Body: []byte("x")}}})
	if !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("Commit after release: %v, want ErrLockLost", err)
	}
	if got := turnIDs(h.traces(t, "c1")); len(got) != 0 {
		t.Errorf("a commit refused wrote traces %v", got)
	}
}

func testFeedback(t *testing.T, h *harness) {
	at := h.clock.Now()
	for _, f := range []memory.Feedback{
		{TurnID: "t2", User: "U2", Value: "positive", At: at},
		{TurnID: "t1", User: "U1", Value: "positive", At: at},
		{TurnID: "t1", User: "U1", Value: "negative", At: at.Add(time.Second)}, // replaces the first
	} {
		if err := h.s.RecordFeedback(h.ctx, "c1", f); err != nil {
			t.Fatalf("RecordFeedback: %v", err)
		}
	}
	var got []string
	for _, f := range h.traces(t, "c1").Feedback {
		got = append(got, fmt.Sprintf("%s %s %s %s", f.TurnID, f.User, f.Value, f.At.UTC().Format(time.TimeOnly)))
	}
	want(t, "feedback", got, []string{"t1 U1 negative 03:04:06", "t2 U2 positive 03:04:05"})
}

func testTraceBadInput(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	_, err := h.s.Commit(h.ctx, l, memory.Commit{Conversation: conv("c1"), Traces: []memory.TurnTrace{{Body: []byte("x")}}})
	if err == nil || !strings.Contains(err.Error(), "trace without a turn id") {
		t.Errorf("Commit of a trace without a turn id: %v", err)
	}
	cases := []struct {
		name, conv string
		f          memory.Feedback
		msg        string
	}{
		{"no conversation", "", memory.Feedback{TurnID: "t1", User: "U1", Value: "positive"}, "conversation id is empty"},
		{"no turn", "c1", memory.Feedback{User: "U1", Value: "positive"}, "feedback needs a turn, a user and a value"},
		{"no user", "c1", memory.Feedback{TurnID: "t1", Value: "positive"}, "feedback needs a turn, a user and a value"},
		{"no value", "c1", memory.Feedback{TurnID: "t1", User: "U1"}, "feedback needs a turn, a user and a value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := h.s.RecordFeedback(h.ctx, tc.conv, tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("RecordFeedback: %v, want %q", err, tc.msg)
			}
		})
	}
}

func testTraceRetention(t *testing.T, h *harness) {
	const ttl = 2 * time.Second
	h = h.reopen(t, memory.Options{TraceRetention: ttl})
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Traces: []memory.TurnTrace{{TurnID: "t1", Body: []byte("x")}}})
	if err := h.s.RecordFeedback(h.ctx, "c1", memory.Feedback{TurnID: "t1", User: "U1", Value: "positive", At: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	h.advance(ttl + time.Second)
	if tr := h.traces(t, "c1"); len(tr.Turns) != 0 || len(tr.Feedback) != 0 {
		t.Errorf("traces after their retention = %v, %v; want none", turnIDs(tr), tr.Feedback)
	}
	if _, err := h.s.TraceRef(h.ctx, "C1", "1700000000.000100"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("TraceRef after the retention: %v, want ErrNotFound", err)
	}
}
