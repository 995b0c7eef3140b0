package agents

import (
	"testing"
	"time"
)

func TestGuardConclusionIsDueAtOnce(t *testing.T) {
	st := &convState{Status: statusOpen, Turns: 3, LastActivity: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	now := st.LastActivity.Add(time.Minute)
	if got := st.Deadline(now, 10*time.Minute, 3, true); !got.Equal(now) {
		t.Errorf("deadline at the turn cap = %v, want now (%v)", got, now)
	}
	if got := st.Deadline(now, 10*time.Minute, 4, true); !got.Equal(st.LastActivity.Add(10 * time.Minute)) {
		t.Errorf("deadline under the cap = %v, want the inactivity deadline", got)
	}
}
