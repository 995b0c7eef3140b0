package memory_test

import (
	"testing"
	"time"

	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/storetest"
)

func TestInProcess(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o memory.Options) memory.Store {
		return memory.NewInProcess(o)
	})
}

func TestInProcessDedupMarksExpire(t *testing.T) {
	clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memory.NewInProcess(memory.Options{Now: clock.Now})
	conv := memory.Conversation{ID: "c1", Channel: "C1", ThreadTS: "1700000000.000100"}
	record := func(ts, ev string) bool {
		t.Helper()
		ok, err := s.RecordMessage(t.Context(), conv, memory.Message{TS: ts, Text: "x"}, ev)
		if err != nil {
			t.Fatalf("RecordMessage: %v", err)
		}
		return ok
	}
	record("1700000000.000100", "Ev1")
	clock.Advance(memory.DedupTTL - time.Second)
	if record("1700000000.000200", "Ev1") {
		t.Error("the event mark expired before DedupTTL")
	}
	clock.Advance(2 * time.Second)
	if !record("1700000000.000200", "Ev1") {
		t.Error("the event mark outlived DedupTTL")
	}
}
