package agents_test

import (
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
)

func TestTSTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
	}{
		{"1700000000.000100", time.Unix(1700000000, 100000)},
		{"1700000000", time.Unix(1700000000, 0)},
		{"", time.Time{}},
		{"x.y", time.Time{}},
		{"-5.000001", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := agents.TSTime(tt.in); !got.Equal(tt.want) {
				t.Errorf("TSTime(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
