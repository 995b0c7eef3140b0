package storetest

import (
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
)

// manageTests are the suite's cases on managing memory sessions
// (memory.Manager): listing them and forgetting one.
var manageTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"Manage/session infos", testSessionInfos},
	{"Manage/forget a session and its traces", testForgetSession},
	{"Manage/forget what is not there", testForgetUnknown},
	{"Manage/forgotten traces leave the bound over all", testForgetTraceBound},
}

func (h *harness) manager(t *testing.T) memory.Manager {
	t.Helper()
	m, ok := h.s.(memory.Manager)
	if !ok {
		t.Fatalf("%T is no memory.Manager", h.s)
	}
	return m
}

func (h *harness) infos(t *testing.T, ns, prefix string) []memory.SessionInfo {
	t.Helper()
	got, err := h.manager(t).SessionInfos(h.ctx, ns, prefix)
	if err != nil {
		t.Fatalf("SessionInfos(%s, %q): %v", ns, prefix, err)
	}
	return got
}

// commitSession commits, as conversation id's turn, entries to a session
// of ns and a trace of that turn, with a rating on it.
func (h *harness) commitSession(t *testing.T, id, ns, key string, contents ...string) {
	t.Helper()
	es := entries(contents...)
	for i := range es {
		es[i].ConversationID = id
	}
	l := h.lock(t, id, time.Minute)
	c := conv(id)
	c.ThreadTS = "1700000000." + id
	h.commit(t, l, memory.Commit{
		Conversation: c, Release: true,
		Sessions: []memory.SessionAppend{{Namespace: ns, Key: key, Entries: es}},
		Traces:   []memory.TurnTrace{{TurnID: id + "-t1", Body: []byte("the prompt held " + contents[0])}},
	})
	if err := h.s.RecordFeedback(h.ctx, id, memory.Feedback{TurnID: id + "-t1", User: "U1", Value: "up", At: start}); err != nil {
		t.Fatalf("RecordFeedback(%s): %v", id, err)
	}
}

func testSessionInfos(t *testing.T, h *harness) {
	if got := h.infos(t, "ns", ""); len(got) != 0 {
		t.Errorf("infos of an empty namespace = %+v, want none", got)
	}
	later := start.Add(time.Hour)
	for _, a := range []memory.SessionAppend{
		{Namespace: "ns", Key: "order-2", Entries: entries("abc")},
		{Namespace: "ns", Key: "order-1", Entries: entries("hello", "hi")},
		{Namespace: "ns", Key: "order-1", Entries: []memory.SessionEntry{{Role: "assistant", Content: "done", At: later}}},
		{Namespace: "ns", Key: "ticket-9", Entries: entries("x")},
		{Namespace: "other", Key: "order-3", Entries: entries("y")},
	} {
		if err := h.s.AppendSession(h.ctx, a); err != nil {
			t.Fatalf("AppendSession(%s/%s): %v", a.Namespace, a.Key, err)
		}
	}
	got := h.infos(t, "ns", "")
	wantInfos := []memory.SessionInfo{
		{Key: "order-1", Entries: 3, Bytes: len("hello") + len("hi") + len("done"), Updated: later},
		{Key: "order-2", Entries: 1, Bytes: 3, Updated: start},
		{Key: "ticket-9", Entries: 1, Bytes: 1, Updated: start},
	}
	if len(got) != len(wantInfos) {
		t.Fatalf("infos = %+v, want %+v", got, wantInfos)
	}
	for i := range got {
		if got[i].Key != wantInfos[i].Key || got[i].Entries != wantInfos[i].Entries ||
			got[i].Bytes != wantInfos[i].Bytes || !got[i].Updated.Equal(wantInfos[i].Updated) {
			t.Errorf("info %d = %+v, want %+v", i, got[i], wantInfos[i])
		}
	}
	var keys []string
	for _, in := range h.infos(t, "ns", "order-") {
		keys = append(keys, in.Key)
	}
	want(t, "keys with prefix order-", keys, []string{"order-1", "order-2"})
	if got := h.infos(t, "ns", "nope"); len(got) != 0 {
		t.Errorf("infos with an unmatched prefix = %+v, want none", got)
	}
}

func testForgetSession(t *testing.T, h *harness) {
	h.commitSession(t, "c1", "ns", "cust-1", "my card ends 4242")
	h.commitSession(t, "c2", "ns", "cust-1", "I moved to Lyon")
	h.commitSession(t, "c3", "ns", "cust-2", "someone else")
	h.commitSession(t, "c4", "other", "cust-1", "another agent's memory")

	f, err := h.manager(t).ForgetSession(h.ctx, "ns", "cust-1")
	if err != nil {
		t.Fatalf("ForgetSession: %v", err)
	}
	if f.Entries != 2 {
		t.Errorf("forgot %d entries, want 2", f.Entries)
	}
	want(t, "conversations forgotten", f.Conversations, []string{"c1", "c2"})

	if got := h.session(t, "ns", "cust-1", 0); len(got) != 0 {
		t.Errorf("the forgotten session reads %v", got)
	}
	keys, err := h.s.Sessions(h.ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	want(t, "sessions of ns", keys, []string{"cust-2"})
	recent, err := h.s.RecentSessions(h.ctx, "ns", 0)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "recent sessions of ns", recent, []string{"cust-2"})
	for _, id := range []string{"c1", "c2"} {
		if tr := h.traces(t, id); len(tr.Turns) != 0 || len(tr.Feedback) != 0 {
			t.Errorf("traces of %s after forgetting = %d turns, %d ratings; want none", id, len(tr.Turns), len(tr.Feedback))
		}
	}
	// What other sessions and conversations hold stays.
	for _, id := range []string{"c3", "c4"} {
		if tr := h.traces(t, id); len(tr.Turns) != 1 || len(tr.Feedback) != 1 {
			t.Errorf("traces of %s = %d turns, %d ratings; want 1 and 1", id, len(tr.Turns), len(tr.Feedback))
		}
	}
	want(t, "cust-2", h.session(t, "ns", "cust-2", 0), []string{"someone else"})
	want(t, "other's cust-1", h.session(t, "other", "cust-1", 0), []string{"another agent's memory"})

	// The key starts afresh.
	if err := h.s.AppendSession(h.ctx, memory.SessionAppend{Namespace: "ns", Key: "cust-1", Entries: entries("new start")}); err != nil {
		t.Fatal(err)
	}
	want(t, "cust-1 after a new append", h.session(t, "ns", "cust-1", 0), []string{"new start"})
}

// testForgetTraceBound: traces removed with a forgotten session no longer
// count toward trace.max_bytes, so no other conversation's go for them.
func testForgetTraceBound(t *testing.T, h *harness) {
	h = h.reopen(t, memory.Options{TraceMaxBytes: 10_000, TraceTotalMaxBytes: 30_000}) // three traces of 8 KB fit
	for i, id := range []string{"c2", "c1", "c3", "c4"} {
		if id == "c4" {
			if _, err := h.manager(t).ForgetSession(h.ctx, "ns", "cust-1"); err != nil {
				t.Fatalf("ForgetSession: %v", err)
			}
		}
		es := entries("said in " + id)
		es[0].ConversationID = id
		c := conv(id)
		c.ThreadTS = "1700000000." + id
		h.commit(t, h.lock(t, id, time.Minute), memory.Commit{
			Conversation: c, Release: true,
			Sessions: []memory.SessionAppend{{Namespace: "ns", Key: "cust-" + id[1:], Entries: es}},
			Traces:   []memory.TurnTrace{{TurnID: id + "-t1", Body: TraceBody(i, 8000)}},
		})
		h.clock.Advance(time.Millisecond) // orders the commits
	}
	for id, traced := range map[string]bool{"c1": false, "c2": true, "c3": true, "c4": true} {
		if got := len(h.traces(t, id).Turns) > 0; got != traced {
			t.Errorf("%s has traces: %v, want %v", id, got, traced)
		}
	}
}

func testForgetUnknown(t *testing.T, h *harness) {
	m := h.manager(t)
	_, err := m.ForgetSession(h.ctx, "ns", "never")
	wantErr(t, "forget an unknown session", err, memory.ErrNotFound)
	h.commitSession(t, "c1", "ns", "k", "x")
	if _, err := m.ForgetSession(h.ctx, "ns", "k"); err != nil {
		t.Fatalf("ForgetSession: %v", err)
	}
	_, err = m.ForgetSession(h.ctx, "ns", "k")
	wantErr(t, "forget a session twice", err, memory.ErrNotFound)
	if _, err := m.ForgetSession(h.ctx, "ns", ""); err == nil {
		t.Error("forgetting an empty key succeeded")
	}
	want(t, "sessions after the bad calls", h.sessionKeys(t, "ns"), nil)
}

func (h *harness) sessionKeys(t *testing.T, ns string) []string {
	t.Helper()
	keys, err := h.s.Sessions(h.ctx, ns)
	if err != nil {
		t.Fatalf("Sessions(%s): %v", ns, err)
	}
	return keys
}
