package memory_test

import (
	"testing"
	"time"

	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
	"github.com/conclavehq/conclave/memory/storetest"
)

// traceCommits commits one trace of size bytes to each conversation in
// turn and returns the round trips each commit took.
// The clock moves a millisecond after each, to order them.
func traceCommits(t *testing.T, s *memory.Redis, clock *testclock.Clock, trips *redistest.RoundTrips, size int, ids ...string) []int64 {
	t.Helper()
	ctx := t.Context()
	var out []int64
	for i, id := range ids {
		l, err := s.AcquireLock(ctx, id, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		body := storetest.TraceBody(i, size)
		before := trips.Count()
		_, err = s.Commit(ctx, l, memory.Commit{
			Conversation: memory.Conversation{ID: id, Channel: "C1", ThreadTS: id},
			Traces:       []memory.TurnTrace{{TurnID: id + "-t1", Body: body}},
		})
		if err != nil {
			t.Fatalf("Commit(%s): %v", id, err)
		}
		out = append(out, trips.Count()-before)
		clock.Advance(time.Millisecond)
	}
	return out
}

func wantTraced(t *testing.T, s *memory.Redis, id string, traced bool) {
	t.Helper()
	tr, err := s.Traces(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tr.Turns) > 0; got != traced {
		t.Errorf("%s has traces: %v, want %v", id, got, traced)
	}
}

// TestTraceTotalBoundRoundTrips: keeping trace.max_bytes costs a commit no
// round trip on one Redis, evicting included (the commit script keeps
// it); on the Cluster path the bound rides in the commit's pipeline, and
// only a commit that evicts takes one more, to delete what it evicted.
func TestTraceTotalBoundRoundTrips(t *testing.T) {
	for _, tt := range []struct {
		name   string
		parked bool
		want   []int64
	}{
		{"one Redis", false, []int64{1, 1, 1, 1}},
		{"Cluster path", true, []int64{1, 1, 1, 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := testclock.New(time.Now())
			s, trips := redistest.New(t).CountedStore(t, memory.Options{TraceMaxBytes: 10_000, TraceTotalMaxBytes: 30_000, Now: clock.Now})
			if tt.parked {
				s.ParkSessions()
			}
			// A first commit warms the client's pool up (a connection's
			// set-up goes through the hooks too), then is evicted first.
			traceCommits(t, s, clock, trips, 100, "c0")
			got := traceCommits(t, s, clock, trips, 8000, "c1", "c2", "c3", "c4")
			if len(got) != len(tt.want) {
				t.Fatalf("round trips per commit = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("round trips per commit = %v, want %v", got, tt.want)
					break
				}
			}
			wantTraced(t, s, "c0", false)
			wantTraced(t, s, "c1", false)
			for _, id := range []string{"c2", "c3", "c4"} {
				wantTraced(t, s, id, true)
			}
		})
	}
}

// TestTraceTotalBoundAfterScriptFlush: on the Cluster path the bound's
// script and the commit's are sent by SHA in one pipeline; after the
// server lost its scripts each is sent again whole, and both work.
func TestTraceTotalBoundAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	db := redistest.WithPrefix(t, srv.URL())
	clock := testclock.New(time.Now())
	s, trips := db.CountedStore(t, memory.Options{TraceMaxBytes: 10_000, TraceTotalMaxBytes: 30_000, Now: clock.Now})
	s.ParkSessions()
	if err := db.Client(t).ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	traceCommits(t, s, clock, trips, 8000, "c1", "c2", "c3", "c4")
	wantTraced(t, s, "c1", false)
	wantTraced(t, s, "c4", true)
}
