package main

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
	"github.com/conclavehq/conclave/memory/storetest"
)

// TestOpenStoreBoundsAllTraces: trace.max_bytes reaches both stores. With
// room for about two conversations' traces, one of the first two loses
// its (which, the order of the commits decides, to the millisecond; the
// memory package's tests hold that order), the last keeps its.
func TestOpenStoreBoundsAllTraces(t *testing.T) {
	for _, redis := range []bool{false, true} {
		t.Run(fmt.Sprintf("redis=%v", redis), func(t *testing.T) {
			var mc MemoryConfig
			if redis {
				db := redistest.New(t)
				mc.RedisURL, mc.KeyPrefix = db.URL, db.Prefix
			}
			tc := TraceConfig{Retention: Duration{time.Hour}, MaxBytesPerConversation: 10_000, MaxBytes: 25_000}
			s, err := openStore(t.Context(), mc, tc, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			for i, id := range []string{"c1", "c2", "c3"} {
				l, err := s.AcquireLock(t.Context(), id, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				body := storetest.TraceBody(i, 9000)
				c := memory.Commit{Conversation: memory.Conversation{ID: id, Channel: "C1", ThreadTS: id}, Traces: []memory.TurnTrace{{TurnID: id + "-t", Body: body}}}
				if _, err := s.Commit(t.Context(), l, c); err != nil {
					t.Fatal(err)
				}
			}
			traced := map[string]bool{}
			for _, id := range []string{"c1", "c2", "c3"} {
				tr, err := s.Traces(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				traced[id] = len(tr.Turns) > 0
			}
			if !traced["c3"] || traced["c1"] == traced["c2"] {
				t.Errorf("conversations with traces: %v; want c3 and one of c1, c2", traced)
			}
		})
	}
}
