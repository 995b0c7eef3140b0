package testclock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/conclavehq/conclave/internal/testclock"
)

func TestClock(t *testing.T) {
	c := testclock.New(time.Time{})
	if got := c.Now(); !got.Equal(testclock.Start) {
		t.Fatalf("a new clock reads %v, want %v", got, testclock.Start)
	}
	c.Advance(time.Minute)
	if err := c.Sleep(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Now(), testclock.Start.Add(time.Minute+2*time.Second); !got.Equal(want) {
		t.Errorf("after Advance and Sleep the clock reads %v, want %v", got, want)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(gone, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with an ended context = %v, want context.Canceled", err)
	}
	if got := c.Sleeps(); !slices.Equal(got, []time.Duration{2 * time.Second}) {
		t.Errorf("Sleeps = %v, want the one that slept", got)
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := testclock.New(at).Now(); !got.Equal(at) {
		t.Errorf("New(%v) reads %v", at, got)
	}
}
