package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	p := Policy{Base: time.Second, Cap: time.Minute}
	tests := []struct {
		n          int
		jitter     float64
		retryAfter time.Duration
		want       time.Duration
	}{
		{n: 1, jitter: 1, want: time.Second},
		{n: 1, jitter: 0, want: 500 * time.Millisecond},
		{n: 2, jitter: 1, want: 2 * time.Second},
		{n: 6, jitter: 1, want: 32 * time.Second},
		{n: 7, jitter: 1, want: time.Minute}, // 64 s is past the cap
		{n: 7, jitter: 0, want: 30 * time.Second},
		{n: 1000, jitter: 1, want: time.Minute},  // no overflow
		{n: 3, jitter: 7, want: 4 * time.Second}, // jitter clamped to [0, 1]
		{n: 3, jitter: -1, want: 2 * time.Second},
		{n: 1, jitter: 1, retryAfter: 90 * time.Second, want: 90 * time.Second},
	}
	for _, tt := range tests {
		if got := p.Wait(tt.n, tt.jitter, tt.retryAfter); got != tt.want {
			t.Errorf("Wait(%d, %v, %v) = %v, want %v", tt.n, tt.jitter, tt.retryAfter, got, tt.want)
		}
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep = %v, want nil once the wait is over", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on an ended context = %v, want context.Canceled", err)
	}
}
