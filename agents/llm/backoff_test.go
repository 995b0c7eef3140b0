package llm

import (
	"net/http"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		retry  int
		jitter float64
		want   time.Duration
	}{
		{1, 0, 250 * time.Millisecond},
		{1, 0.5, 375 * time.Millisecond},
		{1, 1, 500 * time.Millisecond},
		{2, 1, time.Second},
		{3, 1, 2 * time.Second},
		{5, 1, 8 * time.Second},
		{6, 1, 10 * time.Second}, // 16 s, capped
		{6, 0, 5 * time.Second},
		{7, 1, 10 * time.Second},
		{1000, 1, 10 * time.Second}, // no overflow
		{1, -3, 250 * time.Millisecond},
		{1, 7, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := retryPolicy.Wait(tt.retry, tt.jitter, 0); got != tt.want {
			t.Errorf("wait before retry %d (jitter %v) = %s, want %s", tt.retry, tt.jitter, got, tt.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"absent", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{"fraction", http.Header{"Retry-After": {" 1.5 "}}, 1500 * time.Millisecond},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"negative", http.Header{"Retry-After": {"-4"}}, 0},
		{"huge", http.Header{"Retry-After": {"1e300"}}, retryAfterMax},
		{"NaN", http.Header{"Retry-After": {"NaN"}}, 0},
		{"date", http.Header{"Retry-After": {"Fri, 02 Jan 2026 03:04:35 GMT"}}, 30 * time.Second},
		{"past date", http.Header{"Retry-After": {"Fri, 02 Jan 2026 03:00:00 GMT"}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"milliseconds win", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{"bad milliseconds fall back", http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"9"}}, 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfter(tt.header, now); got != tt.want {
				t.Errorf("retryAfter(%v) = %s, want %s", tt.header, got, tt.want)
			}
		})
	}
}

// BenchmarkBuildCall is the client's own work before go-openai takes over.
func BenchmarkBuildCall(b *testing.B) {
	temp := 0.0
	p := Profile{Model: "fake-model", Temperature: &temp, MaxTokens: 256, JSONMode: true, MergeConsecutive: true}
	msgs := []Message{{Role: RoleSystem, Content: "system"}}
	for i := range 10 {
		msgs = append(msgs, Message{Role: []string{RoleUser, RoleAssistant}[i%2], Content: "history"})
	}
	req := Request{Messages: msgs, JSON: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildCall(p, req); err != nil {
			b.Fatal(err)
		}
	}
}
