package agents_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
	"github.com/conclavehq/conclave/templates"
)

// withCountedRedis puts the rig on a real Redis whose round trips are
// counted.
func withCountedRedis(trips **redistest.RoundTrips) func(*rig) {
	return func(r *rig) {
		r.store, *trips = redistest.New(r.t).CountedStore(r.t, memory.Options{Now: r.clock.Now})
	}
}

// TestRoundTripsPerTurn holds the hot path to its budget of Redis round
// trips: two to record a message before its acknowledgement (what the
// event needs, pipelined; the record), and for the turn it triggers: the
// lock taken and the thread loaded with the channel's agents, the reply
// committed as pending before it is posted, and the last commit, which
// releases the lock. An expert reads its session too.
func TestRoundTripsPerTurn(t *testing.T) {
	tests := []struct {
		name         string
		send         func(r *rig, root agents.Event) agents.Event
		handle, turn int64
	}{
		{"a person's first message", func(r *rig, _ agents.Event) agents.Event {
			return r.send("", "U1", "Alice", "hello")
		}, 2, 3},
		{"a person's reply naming nobody", func(r *rig, root agents.Event) agents.Event {
			return r.send(root.TS, "U1", "Alice", "thanks")
		}, 2, 3},
		{"a reply naming a bound expert, then the facilitator", func(r *rig, root agents.Event) agents.Event {
			return r.send(root.TS, "U1", "Alice", cora+" and the deductible?")
		}, 2, 1 + 1 + 2 + 2}, // load; session; expert: pending, posted; facilitator: pending, release
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var trips *redistest.RoundTrips
			r := newRig(t, withCountedRedis(&trips))
			r.model.on(cora, templates.PromptContextNotFound, threading("C45653", ""))
			root := r.send("", "U1", "Alice", cora+" claim C45653?")
			r.settle()
			posted := len(r.chat.texts())
			before := trips.Count()
			ev := tt.send(r, root)
			handled := trips.Count()
			id := agents.ConversationID(team, chanA, ev.TS)
			if ev.ThreadTS != "" {
				id = agents.ConversationID(team, chanA, ev.ThreadTS)
			}
			r.e.Process(context.Background(), id, chanA)
			if n := handled - before; n > tt.handle {
				t.Errorf("Record took %d round trips, want at most %d", n, tt.handle)
			}
			if n := trips.Count() - handled; n > tt.turn {
				t.Errorf("the turn took %d round trips, want at most %d", n, tt.turn)
			}
			if len(r.chat.texts()) == posted {
				t.Fatal("nothing was posted")
			}
			if ids, err := r.store.Due(context.Background(), r.clock.Now(), 0); err != nil || len(ids) != 0 {
				t.Errorf("Due after the turn = %v, %v; want nothing left to do", ids, err)
			}
		})
	}
}

// TestRecordIsDurableBeforeItReturns: once Record returned nil (and the
// transport acknowledged the envelope), the message is in the store and its
// conversation is due, even if no worker of this replica ever runs; when
// the store fails, Record fails, so the envelope is not acknowledged.
func TestRecordIsDurableBeforeItReturns(t *testing.T) {
	r := newRig(t)
	root := r.send("", "U1", "Alice", "hello")
	id := agents.ConversationID(team, chanA, root.TS)
	if got := r.messages(root.TS); len(got) != 1 || got[0].Text != "hello" {
		t.Errorf("stored messages %+v, want the message", got)
	}
	if ids, err := r.store.Due(context.Background(), r.clock.Now(), 0); err != nil || !slices.Contains(ids, id) {
		t.Errorf("Due = %v, %v; want the conversation", ids, err)
	}

	failing := &failingStore{storePorts: r.store, fail: "RecordMessage"}
	e := r.engine(fakePrompts{}, onStore(failing))
	ev := agents.Event{ID: "Ev9", Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS, UserID: "U1", Text: "more"}
	if err := handle(context.Background(), e, ev); err == nil {
		t.Error("Record returned nil though the message could not be recorded")
	}
}

// TestRecordSaysWhenTheStoreDidNotAnswer: a Record error of a store that
// did not answer matches ErrStoreUnavailable and reads as the store's
// error; any other store error does not match.
func TestRecordSaysWhenTheStoreDidNotAnswer(t *testing.T) {
	r := newRig(t)
	root := r.send("", "U1", "Alice", "hello")
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name  string
		err   error
		match bool
	}{
		{"refused", refused, true},
		{"wrapped timeout", fmt.Errorf("memory: record message: %w", context.DeadlineExceeded), true},
		{"other", errors.New("memory: message ts is empty"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := r.engine(fakePrompts{}, onStore(&failingStore{storePorts: r.store, fail: "RecordMessage", err: c.err}))
			ev := agents.Event{ID: "Ev-" + c.name, Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS, UserID: "U1", Text: "more"}
			err := handle(context.Background(), e, ev)
			if err == nil {
				t.Fatal("Record returned nil though the message could not be recorded")
			}
			if got := errors.Is(err, agents.ErrStoreUnavailable); got != c.match {
				t.Errorf("errors.Is(%v, ErrStoreUnavailable) = %v, want %v", err, got, c.match)
			}
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.err.Error()) {
				t.Errorf("Record error %q does not carry the store's %q", err, c.err)
			}
			if strings.Contains(err.Error(), agents.ErrStoreUnavailable.Error()) {
				t.Errorf("Record error %q names the mark", err)
			}
		})
	}
}

// failingStore fails one method, with err (default "store unreachable").
type failingStore struct {
	storePorts
	fail string
	err  error
}

func (s *failingStore) RecordMessage(ctx context.Context, c memory.Conversation, m memory.Message, ev string) (bool, error) {
	if s.fail == "RecordMessage" {
		if s.err != nil {
			return false, s.err
		}
		return false, errors.New("store unreachable")
	}
	return s.storePorts.RecordMessage(ctx, c, m, ev)
}

// TestReplicaDiesAnywhere: a replica that dies at any point of a turn
// leaves the work due for the others once its lock would have expired (not
// before: until then it may still be working), and the reply is posted
// exactly once: a post whose outcome the dead replica never recorded is
// found by its turn id.
func TestReplicaDiesAnywhere(t *testing.T) {
	tests := []struct {
		name string
		// arm makes the replica die at its point.
		arm        func(r *rig, s *dyingStore)
		modelCalls int
	}{
		{"while the model answers", func(r *rig, s *dyingStore) {
			r.model.hook = func(llm.Request) { s.die() }
		}, 2},
		{"after committing the reply as pending, before posting it", func(r *rig, s *dyingStore) {
			r.chat.beforePost = func() error { s.die(); return errDead }
		}, 1},
		{"after posting, before committing the post", func(r *rig, s *dyingStore) {
			r.chat.afterPost = s.die
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			dying := &dyingStore{storePorts: r.store}
			replica := r.engine(fakePrompts{}, onStore(dying))
			root := r.send("", "U1", "Alice", "hello")
			id := agents.ConversationID(team, chanA, root.TS)
			tt.arm(r, dying)
			replica.Process(context.Background(), id, chanA)
			replica.WaitReactions()
			r.model.hook, r.chat.beforePost, r.chat.afterPost = nil, nil, nil
			if !dying.dead.Load() {
				t.Fatal("the replica did not reach the point where it dies")
			}

			due := func(at time.Time) bool {
				t.Helper()
				ids, err := r.store.Due(context.Background(), at, 0)
				if err != nil {
					t.Fatal(err)
				}
				return slices.Contains(ids, id)
			}
			if due(r.clock.Now()) {
				t.Error("due while the dead replica's lock still holds")
			}
			r.clock.Advance(r.e.LockTTL())
			if !due(r.clock.Now()) {
				t.Fatal("not due once the dead replica's lock expired: the work is lost")
			}
			r.settle()
			if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: elen ok"}) {
				t.Errorf("posts %q, want exactly one", got)
			}
			if n := len(r.model.calls(elen, "")); n != tt.modelCalls {
				t.Errorf("model calls = %d, want %d", n, tt.modelCalls)
			}
			var stored int
			for _, m := range r.messages(root.TS) {
				if m.Kind == agents.KindAgent {
					stored++
				}
			}
			if st := r.state(root.TS); stored != 1 || len(st.Outbox) > 0 || len(st.WakeBy) != 0 {
				t.Errorf("stored replies %d, pending %+v, waking %v; want the reply once and nothing left", stored, st.Outbox, st.WakeBy)
			}
			if r.chat.anyReaction("hourglass_flowing_sand") {
				t.Error("a working reaction was left behind")
			}
		})
	}
}

// TestLostWakeUpFoundBySweep: a recorded message whose hand-off to a
// worker never happens (the acknowledgement never came back) is found by
// the sweeper and answered.
func TestLostWakeUpFoundBySweep(t *testing.T) {
	r := newRig(t)
	r.opts.SweepInterval = 5 * time.Millisecond
	reports := make(chan agents.TurnReport, 1)
	e := r.engine(fakePrompts{}, reportTo(reports))
	// Recorded, and its ticket never dispatched.
	if _, err := e.Record(context.Background(), agents.Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	select {
	case tr := <-reports:
		if tr.Outcome != "ok" {
			t.Errorf("turn %+v", tr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message whose wake-up was lost never got its turn")
	}
}

// overlapModel counts the turns of one conversation that run at the same
// time (the facilitator's phase prompt of fakePrompts carries the
// conversation id as its session). While a turn calls it, every replica
// is handed that conversation, as a sweep or a dispatch would hand it:
// a replica that would run a second turn of it runs it then, and is seen.
type overlapModel struct {
	*fakeModel
	engines  []*agents.Engine // set before they run
	mu       sync.Mutex
	inFlight map[string]int
	overlaps int
}

func (m *overlapModel) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	_, conv, _ := strings.Cut(lastUser(r), "session=")
	conv, _, _ = strings.Cut(conv, "|")
	m.mu.Lock()
	m.inFlight[conv]++
	first := m.inFlight[conv] == 1
	if !first {
		m.overlaps++
	}
	m.mu.Unlock()
	if first {
		for _, e := range m.engines {
			e.Process(ctx, conv, "")
		}
	}
	m.mu.Lock()
	m.inFlight[conv]--
	m.mu.Unlock()
	return m.fakeModel.Complete(ctx, r)
}

// TestTurnsNeverOverlap: two replicas on one store, each handling every
// event of threads that get several messages in a row, never run two
// turns of one conversation at once.
func TestTurnsNeverOverlap(t *testing.T) {
	tests := []struct {
		name  string
		store func(r *rig)
	}{
		{"in-process", func(*rig) {}},
		{"redis", withRedis},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.store)
			model := &overlapModel{fakeModel: r.model, inFlight: make(map[string]int)}
			const threads, messages = 3, 4
			var turns atomic.Int64
			allTurns := make(chan struct{}) // closed at the turn of the last thread
			r.opts.SweepInterval = 5 * time.Millisecond
			engines := make([]*agents.Engine, 2)
			for i := range engines {
				engines[i] = r.engine(fakePrompts{}, func(d *agents.Deps) {
					d.Model = model
					d.OnTurn = func(agents.TurnReport) {
						if turns.Add(1) == threads {
							close(allTurns)
						}
					}
				})
			}
			model.engines = engines
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, e := range engines {
				wg.Go(func() {
					if err := e.Run(ctx); err != nil {
						t.Error(err)
					}
				})
			}
			for i := range threads {
				var root string
				for j := range messages {
					ev := agents.Event{Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root, UserID: "U1", UserName: "Alice", Text: "question"}
					ev.ID = "Ev" + ev.TS
					for k := range engines {
						if err := handle(ctx, engines[(i+j+k)%2], ev); err != nil {
							t.Fatal(err)
						}
					}
					if j == 0 {
						root = ev.TS
					}
				}
			}
			select {
			case <-allTurns:
			case <-time.After(60 * time.Second):
			}
			cancel()
			waitAll(t, &wg, "the replicas' Run did not return once their context ended")
			settleEngines(t, r.store, r.clock, engines...)
			model.mu.Lock()
			defer model.mu.Unlock()
			if model.overlaps != 0 {
				t.Errorf("%d turns ran while another turn of their conversation was running", model.overlaps)
			}
			if turns.Load() < threads {
				t.Errorf("%d turns for %d threads", turns.Load(), threads)
			}
		})
	}
}

// TestNoticeOnceWhenAReplicaDies: the routing that sends a notice is
// committed before the notice goes, so a replica that dies later in the
// turn does not make another replica send it again.
func TestNoticeOnceWhenAReplicaDies(t *testing.T) {
	r := newRig(t)
	dying := &dyingStore{storePorts: r.store}
	replica := r.engine(fakePrompts{}, onStore(dying))
	root := r.send("", "U1", "Alice", "hello "+ghost)
	r.model.hook = func(llm.Request) { dying.die() }
	replica.Process(context.Background(), agents.ConversationID(team, chanA, root.TS), chanA)
	replica.WaitReactions()
	r.model.hook = nil
	r.clock.Advance(r.e.LockTTL())
	r.settle()
	if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: elen ok"}) {
		t.Errorf("posts %q, want the answer once", got)
	}
	if len(r.chat.ephemeral) != 1 {
		t.Errorf("notices %q, want one", r.chat.ephemeral)
	}
}

// flakyRenewals is a store whose lock renewals fail, without the lock
// being lost, while failing is set; it counts the renewals that failed
// and those made.
type flakyRenewals struct {
	storePorts
	failing  atomic.Bool
	failures atomic.Int64
	renewals atomic.Int64
}

func (s *flakyRenewals) RenewLock(ctx context.Context, l memory.Lock, ttl time.Duration) error {
	if s.failing.Load() {
		s.failures.Add(1)
		return errors.New("dial tcp: connection refused")
	}
	err := s.storePorts.RenewLock(ctx, l, ttl)
	if err == nil {
		s.renewals.Add(1)
	}
	return err
}

// ctxModel is the fake model with a hook that sees each call's context
// first; a call whose context ended meanwhile fails, as a real one would.
type ctxModel struct {
	*fakeModel
	before func(ctx context.Context)
}

func (m ctxModel) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	m.before(ctx)
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	return m.fakeModel.Complete(ctx, r)
}

// await polls cond until it holds and reports true; false when ctx ends
// first, or after a minute (a stalled engine): the caller then fails the
// test, naming what it waited for, instead of hanging it.
func await(ctx context.Context, cond func() bool) bool {
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

// TestLockRenewalSurvivesTransientErrors: renewals failing for a moment
// (the store unreachable) do not stop a turn while its lease runs; a
// lease that runs out does, and the turn is run again once, posting once.
//
// The model call waits on the holder's renewals, never on the time they
// take: the store comes back once three renewals failed, and the call
// returns once one was made again; a lease left to run out ends the call.
func TestLockRenewalSurvivesTransientErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		recovers bool
		ttl      time.Duration
	}{
		// A lease long enough for three failed renewals (ttl/30 apart,
		// the first at ttl/3) however slowly the machine runs.
		{"the store comes back within the lease", true, 3 * time.Second},
		{"the lease runs out", false, 150 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			// The in-process lock lives on the fake clock: it never
			// expires by itself here; the holder measures its lease on
			// the real clock.
			r.opts.LockTTL = tt.ttl
			flaky := &flakyRenewals{storePorts: r.store}
			model := ctxModel{fakeModel: r.model, before: func(ctx context.Context) {
				flaky.failing.Store(true)
				if !tt.recovers {
					if await(context.Background(), func() bool { return ctx.Err() != nil }) {
						return // the holder stopped the turn: its lease ran out
					}
					t.Errorf("the turn went on a minute after its lease ran out (%d renewals failed)", flaky.failures.Load())
					return
				}
				if !await(ctx, func() bool { return flaky.failures.Load() >= 3 }) {
					t.Errorf("the holder stopped after %d failed renewals, its lease of %s still running", flaky.failures.Load(), tt.ttl)
					flaky.failing.Store(false)
					return
				}
				renewals := flaky.renewals.Load()
				flaky.failing.Store(false)
				if !await(ctx, func() bool { return flaky.renewals.Load() > renewals }) {
					t.Errorf("the lock was not renewed once the store came back (stopped: %v)", ctx.Err())
				}
			}}
			reports := make(chan agents.TurnReport, 4)
			replica := r.engine(fakePrompts{}, onStore(flaky), func(d *agents.Deps) {
				d.Model = model
				d.OnTurn = func(tr agents.TurnReport) { reports <- tr }
			})
			root := r.send("", "U1", "Alice", "hello")
			id := agents.ConversationID(team, chanA, root.TS)
			replica.Process(context.Background(), id, chanA)
			var first agents.TurnReport
			select {
			case first = <-reports:
			default:
				t.Fatal("process returned without running the turn")
			}
			if tt.recovers {
				if first.Outcome != "ok" {
					t.Errorf("turn outcome %q, want ok: transient renewal errors stopped it", first.Outcome)
				}
			} else {
				if first.Outcome != "cancelled" {
					t.Errorf("turn outcome %q, want cancelled once the lease ran out", first.Outcome)
				}
				if n := len(r.chat.texts()); n != 0 {
					t.Errorf("the holder whose lease ran out posted %d times", n)
				}
				r.clock.Advance(time.Minute) // its lock has lapsed too
				r.settle()
			}
			if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: elen ok"}) {
				t.Errorf("posts %q, want exactly one", got)
			}
		})
	}
}

// TestTurnDeadline: a model call that outlasts the turn's deadline ends
// the turn as failed, with a ⚠️ notice; the conversation goes on.
func TestTurnDeadline(t *testing.T) {
	r := newRig(t)
	r.opts.TurnTimeout = 50 * time.Millisecond
	r.model.fallback = func(req llm.Request) (llm.Response, error) {
		return llm.Response{Content: "elen ok"}, nil
	}
	// The call outlasts the turn: it returns only once the deadline ended
	// its context (or a minute later, when the test fails).
	r.e = r.engine(fakePrompts{}, func(d *agents.Deps) {
		d.Model = ctxModel{fakeModel: r.model, before: func(ctx context.Context) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
				t.Error("the model call went on a minute past the turn's deadline")
			}
		}}
	})
	r.send("", "U1", "Alice", "hello")
	r.settle()
	got := r.chat.texts()
	if len(got) != 1 || !strings.Contains(got[0], "⚠️ Elen could not answer: the turn passed its deadline (ref") {
		t.Errorf("posts %q, want one ⚠️ notice naming the deadline", got)
	}
}

// TestMaxQueued: beyond conversation.max_queued waiting turns, a message
// is still recorded, its extra turns are not queued, and one ⚠️ (not one
// per message) says the conversation is overloaded; once a queued turn
// starts, the bound applies afresh.
func TestMaxQueued(t *testing.T) {
	r := newRig(t)
	r.opts.MaxQueued = 1
	r.e = r.engine(fakePrompts{})
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	r.send(root.TS, "U1", "Alice", cora+" and "+paul+", please look")
	r.send(root.TS, "U2", "Bob", paul+" too")
	r.settle()
	var notices []string
	for _, p := range r.chat.texts() {
		if strings.Contains(p, "⚠️") {
			notices = append(notices, p)
		}
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "Elen could not answer: this conversation is overloaded (1 turns waiting)") {
		t.Errorf("notices %q, want one overload notice from the facilitator", notices)
	}
	if n := len(r.model.calls(cora, "")); n != 1 {
		t.Errorf("cora turns = %d, want 1 (queued first)", n)
	}
	if n := len(r.model.calls(paul, "")); n != 0 {
		t.Errorf("paul turns = %d, want 0 (the queue was full)", n)
	}
	var people int
	for _, m := range r.messages(root.TS) {
		if m.Kind == agents.KindPerson {
			people++
		}
	}
	if people != 3 {
		t.Errorf("%d person messages stored, want 3: an overloaded conversation still records what is said", people)
	}
	r.send(root.TS, "U2", "Bob", paul+" now?")
	r.settle()
	if n := len(r.model.calls(paul, "")); n != 1 {
		t.Errorf("paul turns = %d once the queue had room, want 1", n)
	}
}
