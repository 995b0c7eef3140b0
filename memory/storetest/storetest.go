// Package storetest is the conformance suite of memory.Store: every
// implementation runs it, so the conversation engine can rely on one set of
// semantics whichever store is configured.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/memory"
)

// Factory returns a fresh, empty store built with o. The suite sets o.Now
// to its own clock and closes the store when the test ends.
type Factory func(t *testing.T, o memory.Options) memory.Store

// Run runs the whole suite against the stores newStore makes. Subtests run
// in parallel, each on its own store.
//
// Expiry (locks, nonces, conversation retention) is exercised by moving the
// suite's clock and sleeping for the same time, so that stores measuring
// expiry with their own clock (Redis) and with Options.Now (in-process)
// are held to the same rules. Only lower bounds of elapsed time are relied
// on, except in the retention test, which leaves seconds of slack.
func Run(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"RecordMessage/new", testRecordNew},
		{"RecordMessage/duplicate event id", testDuplicateEventID},
		{"RecordMessage/duplicate channel and ts", testDuplicateTS},
		{"RecordMessage/duplicate marks pending", testDuplicateMarksPending},
		{"RecordMessage/message already committed", testRecordCommitted},
		{"RecordMessage/ordering by ts", testMessageOrder},
		{"RecordMessage/bad input", testRecordBadInput},
		{"RecordMessage/concurrent same message", testRecordConcurrent},
		{"RecordMessage/round trip", testRoundTrip},
		{"RecordLooked/conditions met", testRecordLookedMet},
		{"RecordLooked/conditions not met", testRecordLookedNotMet},
		{"RecordLooked/duplicate", testRecordLookedDuplicate},
		{"RecordLooked/bad input", testRecordLookedBadInput},
		{"UpdateMessage", testUpdateMessage},
		{"DeleteMessage", testDeleteMessage},
		{"Snapshot/unknown", testSnapshotUnknown},
		{"Lock/contention", testLockContention},
		{"Lock/concurrent acquire", testLockConcurrent},
		{"Lock/expiry", testLockExpiry},
		{"Lock/renewal", testLockRenewal},
		{"Lock/lost lock writes nothing", testLostLockWritesNothing},
		{"Lock/bad ttl", testLockBadTTL},
		{"Pending/release reports new message", testReleaseReportsPending},
		{"Pending/release without news", testReleaseQuiet},
		{"Pending/load of unknown conversation", testLoadUnknown},
		{"AcquireAndLoad", testAcquireAndLoad},
		{"AcquireAndLoad/locked", testAcquireAndLoadLocked},
		{"AcquireAndLoad/bad input", testAcquireAndLoadBadInput},
		{"Due/work taken and not committed", testTakenWorkStaysDue},
		{"Commit/state and messages", testCommit},
		{"Commit/reports pending", testCommitReportsPending},
		{"Commit/release", testCommitRelease},
		{"Commit/conversation id", testCommitConversationID},
		{"Commit/sessions", testCommitSessions},
		{"Commit/pending posts", testPendingPosts},
		{"Due/ordering and limits", testDueOrder},
		{"Due/deadline survives load", testDeadlineSurvivesLoad},
		{"Sessions/append and read", testSessions},
		{"Sessions/recent first", testRecentSessions},
		{"Sessions/bounded", testSessionBound},
		{"Sessions/large append", testSessionLargeAppend},
		{"Sessions/bad input", testSessionBadInput},
		{"Sessions/stored time", testSessionStoredTime},
		{"ChannelAgents", testChannelAgents},
		{"Lookup", testLookup},
		{"PairHuman", testPairHuman},
		{"Wallets", testWallets},
		{"Nonces", testNonces},
		{"Nonces/spent once under concurrency", testNonceConcurrent},
		{"Nonces/expiry", testNonceExpiry},
		{"Retention/conversation ttl", testConversationTTL},
		{"Ping", testPing},
	}
	tests = append(tests, traceTests...)
	tests = append(tests, usageTests...)
	tests = append(tests, manageTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, open(t, newStore, memory.Options{}))
		})
	}
}

// start is the suite clock's starting time.
var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type harness struct {
	ctx   context.Context
	s     memory.Store
	clock *testclock.Clock
	new   Factory
}

func open(t *testing.T, f Factory, o memory.Options) *harness {
	t.Helper()
	clock := testclock.New(start)
	o.Now = clock.Now
	s := f(t, o)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &harness{ctx: t.Context(), s: s, clock: clock, new: f}
}

// reopen returns a fresh store with other options.
func (h *harness) reopen(t *testing.T, o memory.Options) *harness {
	t.Helper()
	return open(t, h.new, o)
}

// advance moves the suite's clock and lets the same time pass for real.
func (h *harness) advance(d time.Duration) {
	h.clock.Advance(d)
	time.Sleep(d)
}

func conv(id string) memory.Conversation {
	return memory.Conversation{ID: id, Team: "T1", Channel: "C1", ThreadTS: "1700000000.000100"}
}

func (h *harness) msg(ts, text string) memory.Message {
	return memory.Message{TS: ts, UserID: "U1", Kind: "person", Raw: text, Text: text, Name: "Ann", At: h.clock.Now()}
}

func (h *harness) record(t *testing.T, id string, m memory.Message, eventID string) bool {
	t.Helper()
	ok, err := h.s.RecordMessage(h.ctx, conv(id), m, eventID)
	if err != nil {
		t.Fatalf("RecordMessage(%s, %s, %q): %v", id, m.TS, eventID, err)
	}
	return ok
}

func (h *harness) snapshot(t *testing.T, id string) memory.Snapshot {
	t.Helper()
	snap, err := h.s.Snapshot(h.ctx, id)
	if err != nil {
		t.Fatalf("Snapshot(%s): %v", id, err)
	}
	return snap
}

func (h *harness) texts(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	for _, m := range h.snapshot(t, id).Messages {
		out = append(out, m.TS+"="+m.Text)
	}
	return out
}

func (h *harness) due(t *testing.T, limit int) []string {
	t.Helper()
	return h.dueAt(t, h.clock.Now(), limit)
}

func (h *harness) dueAt(t *testing.T, now time.Time, limit int) []string {
	t.Helper()
	ids, err := h.s.Due(h.ctx, now, limit)
	if err != nil {
		t.Fatalf("Due: %v", err)
	}
	return ids
}

func (h *harness) lock(t *testing.T, id string, ttl time.Duration) memory.Lock {
	t.Helper()
	l, err := h.s.AcquireLock(h.ctx, id, ttl)
	if err != nil {
		t.Fatalf("AcquireLock(%s): %v", id, err)
	}
	if l.ConversationID != id || l.Token == "" {
		t.Fatalf("AcquireLock(%s) = %+v, want the conversation and a token", id, l)
	}
	return l
}

func (h *harness) load(t *testing.T, l memory.Lock) memory.Snapshot {
	t.Helper()
	snap, err := h.s.Load(h.ctx, l)
	if err != nil {
		t.Fatalf("Load(%s): %v", l.ConversationID, err)
	}
	return snap
}

func (h *harness) commit(t *testing.T, l memory.Lock, c memory.Commit) (pending bool) {
	t.Helper()
	pending, err := h.s.Commit(h.ctx, l, c)
	if err != nil {
		t.Fatalf("Commit(%s): %v", l.ConversationID, err)
	}
	return pending
}

func (h *harness) release(t *testing.T, l memory.Lock) bool {
	t.Helper()
	pending, err := h.s.ReleaseLock(h.ctx, l)
	if err != nil {
		t.Fatalf("ReleaseLock(%s): %v", l.ConversationID, err)
	}
	return pending
}

func (h *harness) session(t *testing.T, ns, key string, n int) []string {
	t.Helper()
	entries, err := h.s.ReadSession(h.ctx, ns, key, n)
	if err != nil {
		t.Fatalf("ReadSession(%s, %s, %d): %v", ns, key, n, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Content)
	}
	return out
}

func entries(contents ...string) []memory.SessionEntry {
	var out []memory.SessionEntry
	for _, c := range contents {
		out = append(out, memory.SessionEntry{Role: "user", Content: c, At: start})
	}
	return out
}

func want[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

func testRecordNew(t *testing.T, h *harness) {
	if !h.record(t, "c1", h.msg("1700000000.000100", "hello"), "Ev1") {
		t.Fatal("first RecordMessage reported a duplicate")
	}
	snap := h.snapshot(t, "c1")
	if !snap.Exists {
		t.Fatal("Snapshot after RecordMessage: Exists = false")
	}
	if got := snap.Conversation; got.ID != "c1" || got.Team != "T1" || got.Channel != "C1" || got.ThreadTS != "1700000000.000100" || got.State != nil {
		t.Errorf("Conversation = %+v, want the recorded identity and no state", got)
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=hello"})
	want(t, "Due", h.due(t, 0), []string{"c1"})
}

func testDuplicateEventID(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "first"), "Ev1")
	if h.record(t, "c1", h.msg("1700000000.000200", "same event"), "Ev1") {
		t.Error("a second message under the same event id was recorded")
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=first"})
	// A refused delivery changes nothing else: it left no mark of its ts.
	if !h.record(t, "c1", h.msg("1700000000.000200", "own event"), "Ev2") {
		t.Error("a message refused under another's event id stays refused under its own")
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=first", "1700000000.000200=own event"})
}

func testDuplicateTS(t *testing.T, h *harness) {
	tests := []struct {
		name     string
		ev1, ev2 string
	}{
		{"two event ids", "Ev1", "Ev2"},
		{"no event ids", "", ""},
		{"event id then none", "Ev1", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("c%d", i)
			if !h.record(t, id, h.msg("1700000000.000100", "first"), tt.ev1) {
				t.Fatal("first delivery reported a duplicate")
			}
			if h.record(t, id, h.msg("1700000000.000100", "again"), tt.ev2) {
				t.Error("the same channel and ts was recorded twice")
			}
			want(t, "messages", h.texts(t, id), []string{"1700000000.000100=first"})
		})
	}
}

func testDuplicateMarksPending(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	h.load(t, l)
	want(t, "Due after Load", h.due(t, 0), nil)
	if h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1") {
		t.Fatal("a retry was recorded again")
	}
	want(t, "Due after a retry", h.due(t, 0), []string{"c1"})
	if !h.release(t, l) {
		t.Error("ReleaseLock after a retry: pending = false, want true")
	}
}

func testRecordCommitted(t *testing.T, h *harness) {
	l := h.lock(t, "c1", time.Minute)
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Messages: []memory.Message{h.msg("1700000000.000300", "agent post")}})
	h.release(t, l)
	if h.record(t, "c1", h.msg("1700000000.000300", "echo"), "Ev9") {
		t.Error("a message the conversation already holds was recorded again")
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000300=agent post"})
}

func testMessageOrder(t *testing.T, h *harness) {
	for _, ts := range []string{"1700000001.000001", "1700000000.000100", "999999999.900000", "1700000000.000020"} {
		h.record(t, "c1", h.msg(ts, "x"), "")
	}
	want(t, "messages", h.texts(t, "c1"), []string{
		"999999999.900000=x", "1700000000.000020=x", "1700000000.000100=x", "1700000001.000001=x",
	})
}

func testRecordBadInput(t *testing.T, h *harness) {
	tests := []struct {
		name string
		conv memory.Conversation
		ts   string
	}{
		{"no conversation id", memory.Conversation{Channel: "C1"}, "1700000000.000100"},
		{"no ts", conv("c1"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := h.s.RecordMessage(h.ctx, tt.conv, h.msg(tt.ts, "x"), "Ev1")
			if err == nil || ok {
				t.Errorf("RecordMessage = %v, %v; want an error", ok, err)
			}
		})
	}
	if h.snapshot(t, "c1").Exists {
		t.Error("a rejected message created the conversation")
	}
}

func testRecordConcurrent(t *testing.T, h *harness) {
	errDuplicate := errors.New("duplicate")
	recorded := race(t, 32, errDuplicate, func(i int) error {
		// Half arrive under one event id, half under their own: all are
		// deliveries of one Slack message.
		ev := "Ev1"
		if i%2 == 1 {
			ev = fmt.Sprintf("Ev-retry-%d", i)
		}
		ok, err := h.s.RecordMessage(h.ctx, conv("c1"), h.msg("1700000000.000100", "once"), ev)
		if err == nil && !ok {
			err = errDuplicate
		}
		return err
	})
	if recorded != 1 {
		t.Errorf("%d deliveries recorded, want exactly 1", recorded)
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=once"})
}

// race calls f from n goroutines at once and counts the calls that return
// nil; an error other than lose fails the test.
func race(t *testing.T, n int, lose error, f func(i int) error) int {
	t.Helper()
	var wg sync.WaitGroup
	results := make(chan error, n)
	for i := range n {
		wg.Go(func() { results <- f(i) })
	}
	wg.Wait()
	close(results)
	won := 0
	for err := range results {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, lose):
			t.Errorf("concurrent call: %v", err)
		}
	}
	return won
}

func testRoundTrip(t *testing.T, h *harness) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	in := memory.Message{
		TS: "1700000000.000100", UserID: "U1", BotID: "B1", Agent: "elen.acme.137.protocol6022.eth",
		Kind: "agent", Subtype: "thread_broadcast", Raw: "<@U2> a &amp; b \"q\" \x00 ünï", Text: "@Bo a & b \"q\" \x00 ünï",
		Name: "Elen", TurnID: "turn-1", Meta: map[string]string{"threading": "repaired", "empty": ""}, At: at,
	}
	h.record(t, "c1", in, "Ev1")
	got := h.snapshot(t, "c1").Messages
	if len(got) != 1 {
		t.Fatalf("messages = %d, want 1", len(got))
	}
	out := got[0]
	if !out.At.Equal(in.At) {
		t.Errorf("At = %v, want %v", out.At, in.At)
	}
	out.At = in.At
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Errorf("message changed in the store:\n got %+v\nwant %+v", out, in)
	}
	state := []byte{0, 1, 2, 0xff, '{', '}', '\n'}
	l := h.lock(t, "c1", time.Minute)
	c := memory.Conversation{Team: "T1", Channel: "C1", ThreadTS: "1700000000.000100", State: state}
	h.commit(t, l, memory.Commit{Conversation: c})
	if got := h.load(t, l).Conversation.State; !slices.Equal(got, state) {
		t.Errorf("State = %v, want %v", got, state)
	}
	e := memory.SessionEntry{Role: "user", Content: "x\ny", Author: "Ann (person)", ConversationID: "c1", TS: "1700000000.000100", At: at}
	h.commit(t, l, memory.Commit{Conversation: c, Sessions: []memory.SessionAppend{{Namespace: "ns", Key: "k", Entries: []memory.SessionEntry{e}}}})
	read, err := h.s.ReadSession(h.ctx, "ns", "k", 0)
	if err != nil || len(read) != 1 {
		t.Fatalf("ReadSession = %v, %v; want one entry", read, err)
	}
	if !read[0].At.Equal(at) {
		t.Errorf("entry At = %v, want %v", read[0].At, at)
	}
	read[0].At = at
	if read[0] != e {
		t.Errorf("entry = %+v, want %+v", read[0], e)
	}
	// What a caller does with returned values does not change the store.
	snap := h.load(t, l)
	snap.Conversation.State[0] = 9
	snap.Messages[0].Meta["threading"] = "changed"
	snap = h.load(t, l)
	if snap.Conversation.State[0] != 0 || snap.Messages[0].Meta["threading"] != "repaired" {
		t.Error("changing a loaded snapshot changed the store")
	}
}

func testUpdateMessage(t *testing.T, h *harness) {
	m := h.msg("1700000000.000100", "before")
	m.Meta = map[string]string{"k": "v"}
	h.record(t, "c1", m, "Ev1")
	if err := h.s.UpdateMessage(h.ctx, "c1", m.TS, "<raw after>", "after"); err != nil {
		t.Fatalf("UpdateMessage: %v", err)
	}
	got := h.snapshot(t, "c1").Messages
	if len(got) != 1 || got[0].Text != "after" || got[0].Raw != "<raw after>" || got[0].Name != "Ann" || got[0].Meta["k"] != "v" {
		t.Errorf("after an edit: %+v, want the new text and the other fields kept", got)
	}
	// Text of any kind survives the edit, and so do the other fields.
	odd := "a\x00b \"q\" \\ / ü \u2028 </x> &amp; \t{{.X}}"
	if err := h.s.UpdateMessage(h.ctx, "c1", m.TS, "<@U1> "+odd, odd); err != nil {
		t.Fatalf("UpdateMessage: %v", err)
	}
	got = h.snapshot(t, "c1").Messages
	if len(got) != 1 || got[0].Text != odd || got[0].Raw != "<@U1> "+odd || got[0].UserID != "U1" || !got[0].At.Equal(m.At) {
		t.Errorf("after an edit with odd text: %+v", got)
	}
	if err := h.s.UpdateMessage(h.ctx, "c1", m.TS, "", "no raw"); err != nil {
		t.Fatalf("UpdateMessage: %v", err)
	}
	if got = h.snapshot(t, "c1").Messages; len(got) != 1 || got[0].Raw != "" || got[0].Text != "no raw" {
		t.Errorf("after an edit without raw text: %+v", got)
	}
	tests := []struct{ name, conv, ts string }{
		{"unknown message", "c1", "1700000000.000999"},
		{"unknown conversation", "nope", "1700000000.000100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, "UpdateMessage", h.s.UpdateMessage(h.ctx, tt.conv, tt.ts, "r", "t"), memory.ErrNotFound)
		})
	}
}

func testDeleteMessage(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "one"), "Ev1")
	h.record(t, "c1", h.msg("1700000000.000200", "two"), "Ev2")
	if err := h.s.DeleteMessage(h.ctx, "c1", "1700000000.000100"); err != nil {
		t.Fatalf("DeleteMessage: %v", err)
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000200=two"})
	for _, c := range []struct{ conv, ts string }{{"c1", "1700000000.000100"}, {"nope", "1"}} {
		if err := h.s.DeleteMessage(h.ctx, c.conv, c.ts); err != nil {
			t.Errorf("DeleteMessage(%s, %s) of an unknown message: %v", c.conv, c.ts, err)
		}
	}
	if h.record(t, "c1", h.msg("1700000000.000100", "one"), "Ev1") {
		t.Error("a redelivery of a deleted message was recorded again")
	}
}

func testSnapshotUnknown(t *testing.T, h *harness) {
	snap := h.snapshot(t, "nope")
	if snap.Exists || snap.Conversation.ID != "nope" || len(snap.Messages) != 0 {
		t.Errorf("Snapshot of an unknown conversation = %+v, want not Exists with its ID", snap)
	}
}

func testLockContention(t *testing.T, h *harness) {
	l := h.lock(t, "c1", time.Minute)
	_, err := h.s.AcquireLock(h.ctx, "c1", time.Minute)
	wantErr(t, "second AcquireLock", err, memory.ErrLocked)
	other := h.lock(t, "c2", time.Minute)
	if other.Token == l.Token {
		t.Error("two locks share a token")
	}
	h.release(t, l)
	if err := h.s.CheckLock(h.ctx, l); !errors.Is(err, memory.ErrLockLost) {
		t.Errorf("CheckLock after release: %v, want ErrLockLost", err)
	}
	l2 := h.lock(t, "c1", time.Minute)
	if l2.Token == l.Token {
		t.Error("a new holder got the old token")
	}
	// Releasing with the old token must not free the new holder's lock.
	h.release(t, l)
	if err := h.s.CheckLock(h.ctx, l2); err != nil {
		t.Errorf("CheckLock of the new holder after a stale release: %v", err)
	}
}

func testLockConcurrent(t *testing.T, h *harness) {
	won := race(t, 16, memory.ErrLocked, func(int) error {
		_, err := h.s.AcquireLock(h.ctx, "c1", time.Minute)
		return err
	})
	if won != 1 {
		t.Errorf("%d holders got the lock, want 1", won)
	}
}

func testLockExpiry(t *testing.T, h *harness) {
	old := h.lock(t, "c1", 100*time.Millisecond)
	h.advance(150 * time.Millisecond)
	wantErr(t, "CheckLock after expiry", h.s.CheckLock(h.ctx, old), memory.ErrLockLost)
	wantErr(t, "RenewLock after expiry", h.s.RenewLock(h.ctx, old, time.Minute), memory.ErrLockLost)
	taken := h.lock(t, "c1", time.Minute)
	wantErr(t, "CheckLock after takeover", h.s.CheckLock(h.ctx, old), memory.ErrLockLost)
	if pending := h.release(t, old); pending {
		t.Error("ReleaseLock of a lost lock reported pending with nothing recorded")
	}
	if err := h.s.CheckLock(h.ctx, taken); err != nil {
		t.Errorf("the new holder lost its lock to a stale release: %v", err)
	}
}

func testLockRenewal(t *testing.T, h *harness) {
	l := h.lock(t, "c1", 100*time.Millisecond)
	if err := h.s.RenewLock(h.ctx, l, time.Minute); err != nil {
		t.Fatalf("RenewLock: %v", err)
	}
	h.advance(150 * time.Millisecond)
	if err := h.s.CheckLock(h.ctx, l); err != nil {
		t.Errorf("CheckLock after renewal: %v", err)
	}
	_, err := h.s.AcquireLock(h.ctx, "c1", time.Minute)
	wantErr(t, "AcquireLock of a renewed lock", err, memory.ErrLocked)
}

func testLostLockWritesNothing(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	old := h.lock(t, "c1", 100*time.Millisecond)
	h.load(t, old)
	h.advance(150 * time.Millisecond)
	taken := h.lock(t, "c1", time.Minute)

	_, err := h.s.Load(h.ctx, old)
	wantErr(t, "Load with a lost lock", err, memory.ErrLockLost)
	c := memory.Commit{
		Conversation: memory.Conversation{ID: "c1", Channel: "C1", State: []byte("stale")},
		Messages:     []memory.Message{h.msg("1700000000.000200", "stale reply")},
		Sessions:     []memory.SessionAppend{{Namespace: "ns", Key: "k", Entries: entries("stale")}},
		Deadline:     start.Add(-time.Hour),
	}
	_, err = h.s.Commit(h.ctx, old, c)
	wantErr(t, "Commit with a lost lock", err, memory.ErrLockLost)
	c.Release = true
	_, err = h.s.Commit(h.ctx, old, c)
	wantErr(t, "Commit and release with a lost lock", err, memory.ErrLockLost)
	if err := h.s.CheckLock(h.ctx, taken); err != nil {
		t.Errorf("the new holder lost its lock to a stale commit and release: %v", err)
	}

	snap := h.snapshot(t, "c1")
	if snap.Conversation.State != nil {
		t.Errorf("State = %q after a lost-lock commit, want none", snap.Conversation.State)
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=hi"})
	want(t, "session", h.session(t, "ns", "k", 0), nil)
	// The message the old holder loaded and never committed is due again
	// since its lock expired.
	want(t, "Due", h.due(t, 0), []string{"c1"})
}

func testLockBadTTL(t *testing.T, h *harness) {
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := h.s.AcquireLock(h.ctx, "c1", ttl); err == nil || errors.Is(err, memory.ErrLocked) {
			t.Errorf("AcquireLock(ttl %v): %v, want a ttl error", ttl, err)
		}
	}
	if _, err := h.s.AcquireLock(h.ctx, "", time.Minute); err == nil {
		t.Error("AcquireLock of no conversation succeeded")
	}
	l := h.lock(t, "c1", time.Minute)
	if err := h.s.RenewLock(h.ctx, l, 0); err == nil {
		t.Error("RenewLock(ttl 0) succeeded")
	}
}

func testReleaseReportsPending(t *testing.T, h *harness) {
	tests := []struct {
		name  string
		while func(t *testing.T, id string)
	}{
		{"message recorded while locked", func(t *testing.T, id string) {
			h.record(t, id, h.msg("1700000000.000200", "more"), "Ev2")
		}},
		{"marked pending while locked", func(t *testing.T, id string) {
			if err := h.s.MarkPending(h.ctx, id); err != nil {
				t.Fatalf("MarkPending: %v", err)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("c%d", i)
			h.record(t, id, h.msg("1700000000.000100", "hi"), "Ev1")
			l := h.lock(t, id, time.Minute)
			if got := len(h.load(t, l).Messages); got != 1 {
				t.Fatalf("Load: %d messages, want 1", got)
			}
			if slices.Contains(h.due(t, 0), id) {
				t.Error("Due lists a conversation whose pending mark Load cleared")
			}
			tt.while(t, id)
			if !h.release(t, l) {
				t.Error("ReleaseLock: pending = false, want true")
			}
			if !slices.Contains(h.due(t, 0), id) {
				t.Error("Due does not list the conversation pending after release")
			}
		})
	}
}

func testReleaseQuiet(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	h.load(t, l)
	h.commit(t, l, memory.Commit{Conversation: conv("c1")})
	if h.release(t, l) {
		t.Error("ReleaseLock: pending = true with nothing new")
	}
	want(t, "Due", h.due(t, 0), nil)
}

func testLoadUnknown(t *testing.T, h *harness) {
	if err := h.s.MarkPending(h.ctx, "ghost"); err != nil {
		t.Fatalf("MarkPending: %v", err)
	}
	want(t, "Due", h.due(t, 0), []string{"ghost"})
	l := h.lock(t, "ghost", time.Minute)
	snap := h.load(t, l)
	if snap.Exists || snap.Conversation.ID != "ghost" {
		t.Errorf("Load of an unknown conversation = %+v", snap)
	}
	if h.release(t, l) {
		t.Error("ReleaseLock: pending = true after Load")
	}
	want(t, "Due", h.due(t, 0), nil)
	if err := h.s.MarkPending(h.ctx, ""); err == nil {
		t.Error("MarkPending of no conversation succeeded")
	}
}

func testAcquireAndLoad(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	if _, err := h.s.AddChannelAgent(h.ctx, "C1", "a.eth"); err != nil {
		t.Fatalf("AddChannelAgent: %v", err)
	}
	if _, _, err := h.s.PairHuman(h.ctx, "U1", "ann.eth"); err != nil {
		t.Fatalf("PairHuman: %v", err)
	}
	l, snap, found, err := h.s.AcquireAndLoad(h.ctx, "c1", time.Minute, memory.Lookup{Channel: "C1", User: "U1", Conversation: "c1"})
	if err != nil {
		t.Fatalf("AcquireAndLoad: %v", err)
	}
	if l.ConversationID != "c1" || l.Token == "" {
		t.Errorf("lock = %+v, want the conversation and a token", l)
	}
	if !snap.Exists || snap.Conversation.Channel != "C1" || len(snap.Messages) != 1 || snap.Messages[0].Text != "hi" {
		t.Errorf("snapshot = %+v, want the recorded message", snap)
	}
	if !slices.Equal(found.ChannelAgents, []string{"a.eth"}) || found.HumanAgent != "ann.eth" || !found.Exists {
		t.Errorf("found = %+v, want the channel's agent, the pairing and the conversation", found)
	}
	want(t, "Due after AcquireAndLoad", h.due(t, 0), nil)
	if err := h.s.CheckLock(h.ctx, l); err != nil {
		t.Errorf("CheckLock: %v", err)
	}
	_, err = h.s.AcquireLock(h.ctx, "c1", time.Minute)
	wantErr(t, "AcquireLock of a conversation taken by AcquireAndLoad", err, memory.ErrLocked)
	h.record(t, "c1", h.msg("1700000000.000200", "more"), "Ev2")
	if !h.release(t, l) {
		t.Error("ReleaseLock: pending = false after a message arrived")
	}

	// A conversation nobody wrote in loads as not existing.
	_, snap, found, err = h.s.AcquireAndLoad(h.ctx, "new", time.Minute, memory.Lookup{Conversation: "new", User: "U9"})
	if err != nil {
		t.Fatalf("AcquireAndLoad of an unknown conversation: %v", err)
	}
	if snap.Exists || snap.Conversation.ID != "new" || found.Exists || found.HumanAgent != "" || found.ChannelAgents != nil {
		t.Errorf("AcquireAndLoad of an unknown conversation = %+v, %+v", snap, found)
	}
}

func testAcquireAndLoadLocked(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	won := race(t, 8, memory.ErrLocked, func(int) error {
		_, _, _, err := h.s.AcquireAndLoad(h.ctx, "c1", time.Minute, memory.Lookup{Channel: "C1"})
		return err
	})
	if won != 0 {
		t.Errorf("%d AcquireAndLoad calls took a held lock", won)
	}
	// A refused attempt clears nothing: the message is still pending.
	want(t, "Due", h.due(t, 0), []string{"c1"})
	h.release(t, l)
	won = race(t, 8, memory.ErrLocked, func(int) error {
		_, _, _, err := h.s.AcquireAndLoad(h.ctx, "c1", time.Minute, memory.Lookup{})
		return err
	})
	if won != 1 {
		t.Errorf("%d AcquireAndLoad calls took a free lock, want 1", won)
	}
}

func testAcquireAndLoadBadInput(t *testing.T, h *harness) {
	tests := []struct {
		name string
		id   string
		ttl  time.Duration
	}{
		{"no conversation", "", time.Minute},
		{"no ttl", "c1", 0},
		{"ttl under a millisecond", "c1", time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, _, err := h.s.AcquireAndLoad(h.ctx, tt.id, tt.ttl, memory.Lookup{}); err == nil || errors.Is(err, memory.ErrLocked) {
				t.Errorf("AcquireAndLoad(%q, %v) = %v, want an input error", tt.id, tt.ttl, err)
			}
		})
	}
}

// testTakenWorkStaysDue: work a holder loaded and never committed is due
// again when its lock would have expired, whether it was a new message or
// a deadline; a later deadline stays.
func testTakenWorkStaysDue(t *testing.T, h *harness) {
	now := h.clock.Now()
	tests := []struct {
		name     string
		prepare  func(t *testing.T, id string)
		acquire  bool // AcquireAndLoad rather than AcquireLock and Load
		dueAt    time.Time
		notDueAt time.Time
	}{
		{"a pending message", func(t *testing.T, id string) {
			h.record(t, id, h.msg("1700000000.000100", "hi"), "Ev1")
		}, false, now.Add(time.Minute), now},
		{"a pending message, with AcquireAndLoad", func(t *testing.T, id string) {
			h.record(t, id, h.msg("1700000000.000100", "hi"), "Ev1")
		}, true, now.Add(time.Minute), now},
		{"a pending message and a later deadline", func(t *testing.T, id string) {
			h.commitReleased(t, id, now.Add(time.Hour))
			h.record(t, id, h.msg("1700000000.000100", "hi"), "Ev1")
		}, true, now.Add(time.Minute), now},
		{"a deadline passed", func(t *testing.T, id string) {
			h.commitReleased(t, id, now.Add(-time.Hour))
		}, true, now.Add(time.Minute), now},
		{"a deadline after the lock", func(t *testing.T, id string) {
			h.commitReleased(t, id, now.Add(time.Hour))
		}, true, now.Add(time.Hour), now.Add(time.Minute)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("c%d", i)
			tt.prepare(t, id)
			var l memory.Lock
			if tt.acquire {
				var err error
				if l, _, _, err = h.s.AcquireAndLoad(h.ctx, id, time.Minute, memory.Lookup{}); err != nil {
					t.Fatalf("AcquireAndLoad: %v", err)
				}
			} else {
				l = h.lock(t, id, time.Minute)
				h.load(t, l)
			}
			h.release(t, l)
			if slices.Contains(h.dueAt(t, tt.notDueAt, 0), id) {
				t.Errorf("due at %v, before the lock would have expired", tt.notDueAt.Sub(now))
			}
			if !slices.Contains(h.dueAt(t, tt.dueAt, 0), id) {
				t.Errorf("not due at %v", tt.dueAt.Sub(now))
			}
		})
	}
}

// commitReleased commits a conversation with a deadline under a lock of
// its own, released at once.
func (h *harness) commitReleased(t *testing.T, id string, deadline time.Time) {
	t.Helper()
	l := h.lock(t, id, time.Minute)
	h.commit(t, l, memory.Commit{Conversation: conv(id), Deadline: deadline, Release: true})
}

func testCommit(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	c := conv("c1")
	c.State = []byte(`{"phase":"body"}`)
	h.commit(t, l, memory.Commit{Conversation: c, Messages: []memory.Message{
		h.msg("1700000000.000200", "reply"),
		h.msg("1700000000.000100", "hi, edited by the engine"),
	}})
	snap := h.load(t, l)
	if string(snap.Conversation.State) != `{"phase":"body"}` {
		t.Errorf("State = %q", snap.Conversation.State)
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=hi, edited by the engine", "1700000000.000200=reply"})

	c.State = []byte(`{"phase":"conclude"}`)
	h.commit(t, l, memory.Commit{Conversation: c})
	if got := string(h.snapshot(t, "c1").Conversation.State); got != `{"phase":"conclude"}` {
		t.Errorf("State after a second commit = %q, want it replaced", got)
	}
	if got := len(h.snapshot(t, "c1").Messages); got != 2 {
		t.Errorf("a commit without messages left %d messages, want 2", got)
	}
}

func testPendingPosts(t *testing.T, h *harness) {
	count := func() int {
		t.Helper()
		n, err := h.s.PendingPosts(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("PendingPosts of an empty store = %d", n)
	}
	for _, id := range []string{"c1", "c2"} {
		h.record(t, id, h.msg("1700000000.000100", "hi"), "")
	}
	l1, l2 := h.lock(t, "c1", time.Minute), h.lock(t, "c2", time.Minute)
	h.commit(t, l1, memory.Commit{Conversation: conv("c1"), PendingPosts: 2})
	h.commit(t, l2, memory.Commit{Conversation: conv("c2"), PendingPosts: 1})
	if n := count(); n != 3 {
		t.Errorf("PendingPosts = %d, want 3 (2 + 1)", n)
	}
	h.commit(t, l1, memory.Commit{Conversation: conv("c1"), PendingPosts: 1})
	if n := count(); n != 2 {
		t.Errorf("PendingPosts = %d after one post of c1 was made, want 2", n)
	}
	h.commit(t, l2, memory.Commit{Conversation: conv("c2"), Release: true})
	h.commit(t, l1, memory.Commit{Conversation: conv("c1")})
	if n := count(); n != 0 {
		t.Errorf("PendingPosts = %d once every outbox is empty, want 0", n)
	}
	// A commit whose lock is lost changes no count. The lock is renewed
	// for a moment first, so that it expires without minutes of waiting.
	if err := h.s.RenewLock(h.ctx, l1, 100*time.Millisecond); err != nil {
		t.Fatalf("RenewLock: %v", err)
	}
	h.advance(150 * time.Millisecond)
	if _, err := h.s.Commit(h.ctx, l1, memory.Commit{Conversation: conv("c1"), PendingPosts: 5}); !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("Commit under an expired lock: %v", err)
	}
	if n := count(); n != 0 {
		t.Errorf("PendingPosts = %d after a refused commit, want 0", n)
	}
}

func testCommitReportsPending(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	h.load(t, l)
	if h.commit(t, l, memory.Commit{Conversation: conv("c1")}) {
		t.Error("Commit: pending = true with nothing new")
	}
	h.record(t, "c1", h.msg("1700000000.000200", "more"), "Ev2")
	if !h.commit(t, l, memory.Commit{Conversation: conv("c1"), Deadline: h.clock.Now().Add(time.Hour)}) {
		t.Error("Commit: pending = false after a message arrived")
	}
	// The commit kept the pending mark ahead of its deadline.
	want(t, "Due", h.due(t, 0), []string{"c1"})
	if got := len(h.load(t, l).Messages); got != 2 {
		t.Errorf("Load: %d messages, want 2", got)
	}
	if h.commit(t, l, memory.Commit{Conversation: conv("c1")}) {
		t.Error("Commit after Load: pending = true")
	}
}

func testCommitRelease(t *testing.T, h *harness) {
	tests := []struct {
		name    string
		while   func(t *testing.T, id string)
		pending bool
	}{
		{"nothing new", func(*testing.T, string) {}, false},
		{"a message arrived", func(t *testing.T, id string) {
			h.record(t, id, h.msg("1700000000.000200", "more"), "Ev2")
		}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("c%d", i)
			h.record(t, id, h.msg("1700000000.000100", "hi"), "Ev1")
			l := h.lock(t, id, time.Minute)
			h.load(t, l)
			tt.while(t, id)
			c := conv(id)
			c.State = []byte("done")
			deadline := h.clock.Now().Add(time.Hour)
			if got := h.commit(t, l, memory.Commit{Conversation: c, Deadline: deadline, Release: true}); got != tt.pending {
				t.Errorf("Commit with Release: pending = %v, want %v", got, tt.pending)
			}
			wantErr(t, "CheckLock after Commit with Release", h.s.CheckLock(h.ctx, l), memory.ErrLockLost)
			next := h.lock(t, id, time.Minute)
			if got := string(h.load(t, next).Conversation.State); got != "done" {
				t.Errorf("State = %q, want the committed one", got)
			}
			h.release(t, next)
			if !tt.pending {
				want(t, "Due before the deadline", h.due(t, 0), nil)
				want(t, "Due at the deadline", h.dueAt(t, deadline, 0), []string{id})
			}
		})
	}
}

func testCommitConversationID(t *testing.T, h *harness) {
	l := h.lock(t, "c1", time.Minute)
	if _, err := h.s.Commit(h.ctx, l, memory.Commit{Conversation: conv("c2")}); err == nil {
		t.Error("Commit of another conversation under c1's lock succeeded")
	}
	if h.snapshot(t, "c2").Exists || h.snapshot(t, "c1").Exists {
		t.Error("a refused commit wrote a conversation")
	}
	h.commit(t, l, memory.Commit{Conversation: memory.Conversation{Channel: "C1"}})
	if got := h.snapshot(t, "c1"); !got.Exists || got.Conversation.ID != "c1" {
		t.Errorf("Commit without an ID: snapshot %+v, want conversation c1", got)
	}
	bad := memory.Commit{Conversation: conv("c1"), Messages: []memory.Message{{Text: "no ts"}}}
	if _, err := h.s.Commit(h.ctx, l, bad); err == nil {
		t.Error("Commit of a message without ts succeeded")
	}
}

func testCommitSessions(t *testing.T, h *harness) {
	h = h.reopen(t, memory.Options{MaxSessionMessages: 3})
	l := h.lock(t, "c1", time.Minute)
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Sessions: []memory.SessionAppend{
		{Namespace: "expert.eth", Key: "C45653", Entries: entries("a", "b")},
		{Namespace: "human.eth", Key: "grp-1", Entries: entries("g1")},
	}})
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Sessions: []memory.SessionAppend{
		{Namespace: "expert.eth", Key: "C45653", Entries: entries("c", "d")},
	}})
	want(t, "expert session", h.session(t, "expert.eth", "C45653", 0), []string{"b", "c", "d"})
	want(t, "human session", h.session(t, "human.eth", "grp-1", 0), []string{"g1"})
	keys, err := h.s.Sessions(h.ctx, "expert.eth")
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	want(t, "Sessions", keys, []string{"C45653"})
	bad := memory.Commit{Conversation: conv("c1"), Sessions: []memory.SessionAppend{
		{Namespace: "expert.eth", Key: "C45653", Entries: entries("e")},
		{Namespace: "", Key: "k", Entries: entries("x")},
	}}
	if _, err := h.s.Commit(h.ctx, l, bad); err == nil {
		t.Error("Commit with a session append without namespace succeeded")
	}
	want(t, "expert session after a refused commit", h.session(t, "expert.eth", "C45653", 0), []string{"b", "c", "d"})
	// The session entries a commit wrote are there for the next Load.
	h.load(t, l)
	want(t, "expert session after Load", h.session(t, "expert.eth", "C45653", 0), []string{"b", "c", "d"})
}

func testDueOrder(t *testing.T, h *harness) {
	for _, id := range []string{"p1", "p2", "p3"} {
		if err := h.s.MarkPending(h.ctx, id); err != nil {
			t.Fatalf("MarkPending: %v", err)
		}
		h.clock.Advance(time.Second)
	}
	// Marking again keeps the conversation's place.
	if err := h.s.MarkPending(h.ctx, "p1"); err != nil {
		t.Fatalf("MarkPending: %v", err)
	}
	now := h.clock.Now()
	deadlines := map[string]time.Time{
		"late":   now.Add(-time.Minute),
		"early":  now.Add(-time.Hour),
		"future": now.Add(time.Hour),
		"now":    now,
	}
	for _, id := range []string{"late", "early", "future", "now"} {
		l := h.lock(t, id, time.Minute)
		h.commit(t, l, memory.Commit{Conversation: conv(id), Deadline: deadlines[id]})
		h.release(t, l)
	}
	tests := []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"all", now, 0, []string{"p1", "p2", "p3", "early", "late", "now"}},
		{"negative limit", now, -1, []string{"p1", "p2", "p3", "early", "late", "now"}},
		{"limit within pending", now, 2, []string{"p1", "p2"}},
		{"limit within deadlines", now, 4, []string{"p1", "p2", "p3", "early"}},
		{"earlier now", now.Add(-30 * time.Minute), 0, []string{"p1", "p2", "p3", "early"}},
		{"later now", now.Add(2 * time.Hour), 0, []string{"p1", "p2", "p3", "early", "late", "now", "future"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, "Due", h.dueAt(t, tt.now, tt.limit), tt.want)
		})
	}
	// A deadline cleared by a commit is no longer due.
	l := h.lock(t, "early", time.Minute)
	h.commit(t, l, memory.Commit{Conversation: conv("early")})
	h.release(t, l)
	want(t, "Due after clearing a deadline", h.dueAt(t, now, 0), []string{"p1", "p2", "p3", "late", "now"})
}

func testDeadlineSurvivesLoad(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	l := h.lock(t, "c1", time.Minute)
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Deadline: start.Add(10 * time.Minute)})
	h.release(t, l)
	h.record(t, "c1", h.msg("1700000000.000200", "more"), "Ev2")
	want(t, "Due while pending", h.due(t, 0), []string{"c1"})
	l = h.lock(t, "c1", time.Minute)
	h.load(t, l)
	h.release(t, l)
	want(t, "Due before the deadline", h.due(t, 0), nil)
	want(t, "Due at the deadline", h.dueAt(t, start.Add(10*time.Minute), 0), []string{"c1"})
}

// testRecentSessions: keys come most recently appended to first, whether
// appended directly or by a commit; n bounds the list.
func testRecentSessions(t *testing.T, h *harness) {
	appendTo := func(key string) {
		t.Helper()
		if err := h.s.AppendSession(h.ctx, memory.SessionAppend{Namespace: "r.eth", Key: key, Entries: entries("x")}); err != nil {
			t.Fatalf("AppendSession: %v", err)
		}
	}
	recent := func(n int) []string {
		t.Helper()
		keys, err := h.s.RecentSessions(h.ctx, "r.eth", n)
		if err != nil {
			t.Fatalf("RecentSessions: %v", err)
		}
		return keys
	}
	appendTo("C1")
	appendTo("C2")
	appendTo("C3")
	want(t, "RecentSessions after C1, C2, C3", recent(0), []string{"C3", "C2", "C1"})
	appendTo("C1")
	want(t, "RecentSessions after C1 again", recent(0), []string{"C1", "C3", "C2"})
	want(t, "RecentSessions(2)", recent(2), []string{"C1", "C3"})

	l := h.lock(t, "c1", time.Minute)
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Sessions: []memory.SessionAppend{
		{Namespace: "r.eth", Key: "C2", Entries: entries("y")},
	}})
	want(t, "RecentSessions after a commit to C2", recent(-1), []string{"C2", "C1", "C3"})

	if keys, err := h.s.RecentSessions(h.ctx, "nobody.eth", 5); err != nil || len(keys) != 0 {
		t.Errorf("RecentSessions of an unknown namespace = %q, %v; want none", keys, err)
	}
}

func testSessions(t *testing.T, h *harness) {
	appendTo := func(ns, key string, contents ...string) {
		t.Helper()
		if err := h.s.AppendSession(h.ctx, memory.SessionAppend{Namespace: ns, Key: key, Entries: entries(contents...)}); err != nil {
			t.Fatalf("AppendSession: %v", err)
		}
	}
	appendTo("a.eth", "k2", "1", "2")
	appendTo("a.eth", "k2", "3")
	appendTo("a.eth", "K1", "x")
	appendTo("a.eth", "{weird}: key/é", "w")
	appendTo("b.eth", "k2", "other")
	appendTo("a.eth", "empty")
	tests := []struct {
		ns, key string
		n       int
		want    []string
	}{
		{"a.eth", "k2", 0, []string{"1", "2", "3"}},
		{"a.eth", "k2", -1, []string{"1", "2", "3"}},
		{"a.eth", "k2", 2, []string{"2", "3"}},
		{"a.eth", "k2", 10, []string{"1", "2", "3"}},
		{"a.eth", "{weird}: key/é", 0, []string{"w"}},
		{"b.eth", "k2", 0, []string{"other"}},
		{"a.eth", "unknown", 0, nil},
		{"a.eth", "empty", 0, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%d", tt.ns, tt.key, tt.n), func(t *testing.T) {
			want(t, "ReadSession", h.session(t, tt.ns, tt.key, tt.n), tt.want)
		})
	}
	keys, err := h.s.Sessions(h.ctx, "a.eth")
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	want(t, "Sessions(a.eth)", keys, []string{"K1", "k2", "{weird}: key/é"})
	keys, err = h.s.Sessions(h.ctx, "nobody.eth")
	if err != nil || len(keys) != 0 {
		t.Errorf("Sessions of an unknown namespace = %q, %v; want none", keys, err)
	}
}

// An entry appended without a time carries the store's clock at the
// append, by AppendSession and by Commit; one with a time keeps it.
func testSessionStoredTime(t *testing.T, h *harness) {
	given := start.Add(-48 * time.Hour)
	if err := h.s.AppendSession(h.ctx, memory.SessionAppend{Namespace: "a.eth", Key: "k", Entries: []memory.SessionEntry{
		{Role: "user", Content: "undated"},
		{Role: "user", Content: "dated", At: given},
	}}); err != nil {
		t.Fatalf("AppendSession: %v", err)
	}
	appended := h.clock.Now()
	h.clock.Advance(time.Minute)
	l := h.lock(t, "c1", time.Minute)
	committed := h.clock.Now()
	h.commit(t, l, memory.Commit{Conversation: conv("c1"), Sessions: []memory.SessionAppend{
		{Namespace: "a.eth", Key: "k", Entries: []memory.SessionEntry{{Role: "assistant", Content: "committed"}}},
	}})
	read, err := h.s.ReadSession(h.ctx, "a.eth", "k", 0)
	if err != nil || len(read) != 3 {
		t.Fatalf("ReadSession = %+v, %v; want three entries", read, err)
	}
	for i, want := range []time.Time{appended, given, committed} {
		if !read[i].At.Equal(want) {
			t.Errorf("entry %q: At = %v, want %v", read[i].Content, read[i].At, want)
		}
	}
}

func testSessionBound(t *testing.T, h *harness) {
	h = h.reopen(t, memory.Options{MaxSessionMessages: 5})
	for _, batch := range [][]string{{"1", "2", "3"}, {"4", "5", "6", "7"}} {
		if err := h.s.AppendSession(h.ctx, memory.SessionAppend{Namespace: "a.eth", Key: "k", Entries: entries(batch...)}); err != nil {
			t.Fatalf("AppendSession: %v", err)
		}
	}
	want(t, "session", h.session(t, "a.eth", "k", 0), []string{"3", "4", "5", "6", "7"})
	if err := h.s.AppendSession(h.ctx, memory.SessionAppend{Namespace: "a.eth", Key: "big", Entries: entries("a", "b", "c", "d", "e", "f", "g")}); err != nil {
		t.Fatalf("AppendSession: %v", err)
	}
	want(t, "session after one large append", h.session(t, "a.eth", "big", 0), []string{"c", "d", "e", "f", "g"})
}

func testSessionLargeAppend(t *testing.T, h *harness) {
	const n = 2500
	contents := make([]string, n)
	for i := range contents {
		contents[i] = fmt.Sprint(i)
	}
	h = h.reopen(t, memory.Options{MaxSessionMessages: 3000})
	if err := h.s.AppendSession(h.ctx, memory.SessionAppend{Namespace: "a.eth", Key: "k", Entries: entries(contents...)}); err != nil {
		t.Fatalf("AppendSession: %v", err)
	}
	want(t, "session", h.session(t, "a.eth", "k", 0), contents)
}

func testSessionBadInput(t *testing.T, h *harness) {
	for _, a := range []memory.SessionAppend{
		{Key: "k", Entries: entries("x")},
		{Namespace: "a.eth", Entries: entries("x")},
	} {
		if err := h.s.AppendSession(h.ctx, a); err == nil {
			t.Errorf("AppendSession(%q, %q) succeeded, want an error", a.Namespace, a.Key)
		}
	}
}

func testChannelAgents(t *testing.T, h *harness) {
	list := func(channel string) []string {
		t.Helper()
		agents, err := h.s.ChannelAgents(h.ctx, channel)
		if err != nil {
			t.Fatalf("ChannelAgents: %v", err)
		}
		return agents
	}
	steps := []struct {
		op, channel, ens string
		want             bool
	}{
		{"add", "C1", "b.eth", true},
		{"add", "C1", "a.eth", true},
		{"add", "C1", "c.eth", true},
		{"add", "C1", "a.eth", false},
		{"add", "C2", "a.eth", true},
		{"remove", "C1", "a.eth", true},
		{"remove", "C1", "a.eth", false},
		{"remove", "C9", "a.eth", false},
		{"add", "C1", "a.eth", true},
	}
	for _, st := range steps {
		var got bool
		var err error
		if st.op == "add" {
			got, err = h.s.AddChannelAgent(h.ctx, st.channel, st.ens)
		} else {
			got, err = h.s.RemoveChannelAgent(h.ctx, st.channel, st.ens)
		}
		if err != nil || got != st.want {
			t.Errorf("%s %s %s = %v, %v; want %v", st.op, st.channel, st.ens, got, err, st.want)
		}
	}
	want(t, "C1", list("C1"), []string{"b.eth", "c.eth", "a.eth"})
	want(t, "C2", list("C2"), []string{"a.eth"})
	want(t, "C3", list("C3"), nil)
}

func testLookup(t *testing.T, h *harness) {
	for _, a := range []string{"b.eth", "a.eth"} {
		if _, err := h.s.AddChannelAgent(h.ctx, "C1", a); err != nil {
			t.Fatalf("AddChannelAgent: %v", err)
		}
	}
	if _, _, err := h.s.PairHuman(h.ctx, "U1", "ann.eth"); err != nil {
		t.Fatalf("PairHuman: %v", err)
	}
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "Ev1")
	tests := []struct {
		name string
		q    memory.Lookup
		want memory.Found
	}{
		{"nothing", memory.Lookup{}, memory.Found{}},
		{"everything", memory.Lookup{Channel: "C1", User: "U1", Conversation: "c1"},
			memory.Found{ChannelAgents: []string{"b.eth", "a.eth"}, HumanAgent: "ann.eth", Exists: true}},
		{"unknown ones", memory.Lookup{Channel: "C9", User: "U9", Conversation: "c9"}, memory.Found{}},
		{"odd names", memory.Lookup{Channel: "{C1}:x", User: "%U1", Conversation: "{c1}"}, memory.Found{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.s.Lookup(h.ctx, tt.q)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if !slices.Equal(got.ChannelAgents, tt.want.ChannelAgents) || got.HumanAgent != tt.want.HumanAgent || got.Exists != tt.want.Exists {
				t.Errorf("Lookup(%+v) = %+v, want %+v", tt.q, got, tt.want)
			}
		})
	}
	// Lookup reads; it marks nothing.
	l := h.lock(t, "c1", time.Minute)
	h.load(t, l)
	if _, err := h.s.Lookup(h.ctx, memory.Lookup{Conversation: "c1"}); err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	if h.release(t, l) {
		t.Error("a Lookup of the conversation marked it pending")
	}
}

// recorder is the store as a Recorder; both stores are one.
func (h *harness) recorder(t *testing.T) memory.Recorder {
	t.Helper()
	r, ok := h.s.(memory.Recorder)
	if !ok {
		t.Fatalf("%T is no memory.Recorder", h.s)
	}
	return r
}

func (h *harness) recordLooked(t *testing.T, in memory.Intake) memory.Intaken {
	t.Helper()
	out, err := h.recorder(t).RecordLooked(h.ctx, in)
	if err != nil {
		t.Fatalf("RecordLooked(%+v): %v", in, err)
	}
	return out
}

// intake is a message of conversation id with every read and condition.
func (h *harness) intake(id, ts, text, eventID string) memory.Intake {
	return memory.Intake{
		Conversation: conv(id), Message: h.msg(ts, text), EventID: eventID,
		Lookup:            memory.Lookup{Channel: "C1", User: "U1", Conversation: id},
		NeedChannelAgents: true, NeedUnpaired: true,
	}
}

func testRecordLookedMet(t *testing.T, h *harness) {
	for _, a := range []string{"b.eth", "a.eth"} {
		if _, err := h.s.AddChannelAgent(h.ctx, "C1", a); err != nil {
			t.Fatalf("AddChannelAgent: %v", err)
		}
	}
	out := h.recordLooked(t, h.intake("c1", "1700000000.000100", "hi", "Ev1"))
	if !out.Met || !out.Recorded {
		t.Fatalf("RecordLooked = %+v, want met and recorded", out)
	}
	want(t, "channel agents read", out.Found.ChannelAgents, []string{"b.eth", "a.eth"})
	if out.Found.HumanAgent != "" || out.Found.Exists {
		t.Errorf("found %+v, want no pairing and a conversation that did not exist before", out.Found)
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=hi"})
	want(t, "due", h.due(t, 0), []string{"c1"})
	// A reply: the conversation now exists, as the condition wants.
	in := h.intake("c1", "1700000000.000200", "again", "Ev2")
	in.NeedExists = true
	if out = h.recordLooked(t, in); !out.Met || !out.Recorded || !out.Found.Exists {
		t.Errorf("RecordLooked of a reply = %+v, want met, recorded and the conversation existing", out)
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=hi", "1700000000.000200=again"})
	// With no condition and nothing to read, it records as RecordMessage.
	in = memory.Intake{Conversation: conv("c2"), Message: h.msg("1700000000.000300", "plain")}
	if out = h.recordLooked(t, in); !out.Met || !out.Recorded || len(out.Found.ChannelAgents) != 0 {
		t.Errorf("RecordLooked without conditions = %+v, want met and recorded, nothing read", out)
	}
	want(t, "messages", h.texts(t, "c2"), []string{"1700000000.000300=plain"})
}

func testRecordLookedNotMet(t *testing.T, h *harness) {
	if _, err := h.s.AddChannelAgent(h.ctx, "C1", "a.eth"); err != nil {
		t.Fatalf("AddChannelAgent: %v", err)
	}
	if _, _, err := h.s.PairHuman(h.ctx, "U2", "ann.eth"); err != nil {
		t.Fatalf("PairHuman: %v", err)
	}
	tests := []struct {
		name  string
		in    func(memory.Intake) memory.Intake
		found memory.Found
	}{
		{"channel without agents", func(in memory.Intake) memory.Intake {
			in.Conversation.Channel, in.Lookup.Channel = "C9", "C9"
			return in
		}, memory.Found{}},
		{"paired author", func(in memory.Intake) memory.Intake {
			in.Message.UserID, in.Lookup.User = "U2", "U2"
			return in
		}, memory.Found{ChannelAgents: []string{"a.eth"}, HumanAgent: "ann.eth"}},
		{"unknown conversation", func(in memory.Intake) memory.Intake {
			in.NeedExists = true
			return in
		}, memory.Found{ChannelAgents: []string{"a.eth"}}},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("n%d", i)
		in := tt.in(h.intake(id, "1700000000.000100", "hi", "Ev"+id))
		out := h.recordLooked(t, in)
		if out.Met || out.Recorded {
			t.Errorf("%s: RecordLooked = %+v, want the conditions not met", tt.name, out)
		}
		if !slices.Equal(out.Found.ChannelAgents, tt.found.ChannelAgents) || out.Found.HumanAgent != tt.found.HumanAgent || out.Found.Exists != tt.found.Exists {
			t.Errorf("%s: found %+v, want %+v", tt.name, out.Found, tt.found)
		}
		if snap := h.snapshot(t, id); snap.Exists || len(snap.Messages) != 0 {
			t.Errorf("%s: the conversation was written: %+v", tt.name, snap)
		}
		if due := h.due(t, 0); slices.Contains(due, id) {
			t.Errorf("%s: due %v, want the conversation not marked", tt.name, due)
		}
		// No dedup mark was set: the message can still be recorded.
		if !h.record(t, id, in.Message, in.EventID) {
			t.Errorf("%s: RecordMessage after it reports a duplicate", tt.name)
		}
	}
}

func testRecordLookedDuplicate(t *testing.T, h *harness) {
	if _, err := h.s.AddChannelAgent(h.ctx, "C1", "a.eth"); err != nil {
		t.Fatalf("AddChannelAgent: %v", err)
	}
	in := h.intake("c1", "1700000000.000100", "hi", "Ev1")
	if out := h.recordLooked(t, in); !out.Recorded {
		t.Fatalf("first RecordLooked = %+v, want recorded", out)
	}
	if out := h.recordLooked(t, in); !out.Met || out.Recorded {
		t.Errorf("second RecordLooked = %+v, want met and a duplicate", out)
	}
	other := h.intake("c1", "1700000000.000200", "other", "Ev1") // same event id
	if out := h.recordLooked(t, other); out.Recorded {
		t.Errorf("RecordLooked of a known event id = %+v, want a duplicate", out)
	}
	if h.record(t, "c1", in.Message, "") {
		t.Error("RecordMessage recorded what RecordLooked had recorded")
	}
	want(t, "messages", h.texts(t, "c1"), []string{"1700000000.000100=hi"})
	// A duplicate leaves the conversation pending, as RecordMessage does.
	l := h.lock(t, "c1", time.Minute)
	h.load(t, l)
	h.recordLooked(t, in)
	if !h.release(t, l) {
		t.Error("a duplicate did not mark the conversation pending")
	}
}

func testRecordLookedBadInput(t *testing.T, h *harness) {
	for name, in := range map[string]memory.Intake{
		"no conversation": {Message: h.msg("1700000000.000100", "hi")},
		"no ts":           {Conversation: conv("c1")},
		"other conversation looked up": {Conversation: conv("c1"), Message: h.msg("1700000000.000100", "hi"),
			Lookup: memory.Lookup{Conversation: "c2"}},
	} {
		if _, err := h.recorder(t).RecordLooked(h.ctx, in); err == nil {
			t.Errorf("%s: RecordLooked accepted %+v", name, in)
		}
	}
	if snap := h.snapshot(t, "c1"); snap.Exists {
		t.Errorf("bad input wrote %+v", snap)
	}
}

func testPairHuman(t *testing.T, h *harness) {
	steps := []struct {
		user, ens           string
		prevAgent, prevUser string
	}{
		{"U1", "ann.eth", "", ""},
		{"U1", "bob.eth", "ann.eth", ""}, // the user moves to another agent
		{"U2", "bob.eth", "", "U1"},      // the agent moves to another user
		{"U2", "bob.eth", "bob.eth", "U2"},
		{"U3", "ann.eth", "", ""},
	}
	for _, st := range steps {
		pa, pu, err := h.s.PairHuman(h.ctx, st.user, st.ens)
		if err != nil || pa != st.prevAgent || pu != st.prevUser {
			t.Errorf("PairHuman(%s, %s) = %q, %q, %v; want %q, %q", st.user, st.ens, pa, pu, err, st.prevAgent, st.prevUser)
		}
	}
	pairs := map[string]string{"U2": "bob.eth", "U3": "ann.eth"}
	for user, ens := range pairs {
		if got, err := h.s.HumanAgent(h.ctx, user); err != nil || got != ens {
			t.Errorf("HumanAgent(%s) = %q, %v; want %q", user, got, err, ens)
		}
		if got, err := h.s.HumanUser(h.ctx, ens); err != nil || got != user {
			t.Errorf("HumanUser(%s) = %q, %v; want %q", ens, got, err, user)
		}
	}
	_, err := h.s.HumanAgent(h.ctx, "U1")
	wantErr(t, "HumanAgent of an unpaired user", err, memory.ErrNotFound)
	_, err = h.s.HumanUser(h.ctx, "carl.eth")
	wantErr(t, "HumanUser of an unpaired agent", err, memory.ErrNotFound)
	if _, _, err := h.s.PairHuman(h.ctx, "", "ann.eth"); err == nil {
		t.Error("PairHuman without a user succeeded")
	}
}

func testWallets(t *testing.T, h *harness) {
	for _, link := range []struct{ user, addr string }{
		{"U1", "0xBBbb000000000000000000000000000000000002"},
		{"U1", "0xaAaA000000000000000000000000000000000001"},
		{"U1", "0xBBbb000000000000000000000000000000000002"},
		{"U2", "0xCccC000000000000000000000000000000000003"},
	} {
		if err := h.s.LinkWallet(h.ctx, link.user, link.addr); err != nil {
			t.Fatalf("LinkWallet: %v", err)
		}
	}
	tests := []struct {
		user string
		want []string
	}{
		{"U1", []string{"0xBBbb000000000000000000000000000000000002", "0xaAaA000000000000000000000000000000000001"}},
		{"U2", []string{"0xCccC000000000000000000000000000000000003"}},
		{"U3", nil},
	}
	for _, tt := range tests {
		got, err := h.s.Wallets(h.ctx, tt.user)
		if err != nil {
			t.Fatalf("Wallets: %v", err)
		}
		want(t, "Wallets("+tt.user+")", got, tt.want)
	}
	if err := h.s.LinkWallet(h.ctx, "U1", ""); err == nil {
		t.Error("LinkWallet of an empty address succeeded")
	}
}

func testNonces(t *testing.T, h *harness) {
	if err := h.s.PutNonce(h.ctx, "n1", []byte("U1|T1"), time.Minute); err != nil {
		t.Fatalf("PutNonce: %v", err)
	}
	for range 2 {
		if v, err := h.s.PeekNonce(h.ctx, "n1"); err != nil || string(v) != "U1|T1" {
			t.Errorf("PeekNonce = %q, %v; want the value, unspent", v, err)
		}
	}
	if v, err := h.s.SpendNonce(h.ctx, "n1"); err != nil || string(v) != "U1|T1" {
		t.Errorf("SpendNonce = %q, %v; want the value", v, err)
	}
	_, err := h.s.SpendNonce(h.ctx, "n1")
	wantErr(t, "SpendNonce of a spent nonce", err, memory.ErrNotFound)
	_, err = h.s.PeekNonce(h.ctx, "n1")
	wantErr(t, "PeekNonce of a spent nonce", err, memory.ErrNotFound)
	_, err = h.s.PeekNonce(h.ctx, "unknown")
	wantErr(t, "PeekNonce of an unknown nonce", err, memory.ErrNotFound)
	if err := h.s.PutNonce(h.ctx, "n2", []byte("x"), 0); err == nil {
		t.Error("PutNonce with ttl 0 succeeded")
	}
}

func testNonceConcurrent(t *testing.T, h *harness) {
	if err := h.s.PutNonce(h.ctx, "n1", []byte("v"), time.Minute); err != nil {
		t.Fatalf("PutNonce: %v", err)
	}
	spent := race(t, 32, memory.ErrNotFound, func(int) error {
		_, err := h.s.SpendNonce(h.ctx, "n1")
		return err
	})
	if spent != 1 {
		t.Errorf("the nonce was spent %d times, want 1", spent)
	}
}

func testNonceExpiry(t *testing.T, h *harness) {
	if err := h.s.PutNonce(h.ctx, "n1", []byte("v"), 100*time.Millisecond); err != nil {
		t.Fatalf("PutNonce: %v", err)
	}
	h.advance(150 * time.Millisecond)
	_, err := h.s.PeekNonce(h.ctx, "n1")
	wantErr(t, "PeekNonce after expiry", err, memory.ErrNotFound)
	_, err = h.s.SpendNonce(h.ctx, "n1")
	wantErr(t, "SpendNonce after expiry", err, memory.ErrNotFound)
}

func testConversationTTL(t *testing.T, h *harness) {
	const ttl = 3 * time.Second
	// Every kind of write restarts the clock.
	writes := []struct {
		name  string
		write func(t *testing.T, h *harness)
		want  []string // the messages left
		due   []string // Due once the conversation expired
	}{
		{"RecordMessage", func(t *testing.T, h *harness) {
			h.record(t, "c1", h.msg("1700000000.000300", "three"), "Ev3")
		}, []string{"1700000000.000100=one", "1700000000.000200=two", "1700000000.000300=three"},
			// The message left the conversation pending, and a pending
			// mark outlives it; its deadline does not.
			[]string{"c1"}},
		{"UpdateMessage", func(t *testing.T, h *harness) {
			if err := h.s.UpdateMessage(h.ctx, "c1", "1700000000.000100", "one", "one again"); err != nil {
				t.Fatalf("UpdateMessage: %v", err)
			}
		}, []string{"1700000000.000100=one again", "1700000000.000200=two"}, nil},
		{"DeleteMessage", func(t *testing.T, h *harness) {
			if err := h.s.DeleteMessage(h.ctx, "c1", "1700000000.000200"); err != nil {
				t.Fatalf("DeleteMessage: %v", err)
			}
		}, []string{"1700000000.000100=one"}, nil},
		{"Commit", func(t *testing.T, h *harness) {
			l := h.lock(t, "c1", time.Minute)
			h.commit(t, l, memory.Commit{Conversation: conv("c1"), Deadline: start})
			h.release(t, l)
		}, []string{"1700000000.000100=one", "1700000000.000200=two"}, nil},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			h := h.reopen(t, memory.Options{ConversationTTL: ttl})
			h.record(t, "c1", h.msg("1700000000.000100", "one"), "Ev1")
			h.record(t, "c1", h.msg("1700000000.000200", "two"), "Ev2")
			l := h.lock(t, "c1", time.Minute)
			h.load(t, l)
			h.commit(t, l, memory.Commit{Conversation: conv("c1"), Deadline: start})
			h.release(t, l)
			h.advance(2 * time.Second)
			w.write(t, h)
			h.advance(2 * time.Second)
			if !h.snapshot(t, "c1").Exists {
				t.Fatal("the conversation expired less than its ttl after its last write")
			}
			want(t, "messages", h.texts(t, "c1"), w.want)
			h.advance(ttl)
			if snap := h.snapshot(t, "c1"); snap.Exists || len(snap.Messages) != 0 {
				t.Errorf("Snapshot after the ttl = %+v, want nothing", snap)
			}
			want(t, "Due of an expired conversation", h.due(t, 0), w.due)
		})
	}
}

func testPing(t *testing.T, h *harness) {
	if err := h.s.Ping(h.ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}
