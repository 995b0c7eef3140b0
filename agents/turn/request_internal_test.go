package turn

import (
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
)

// An entry stored without a time (by an earlier version) is marked as
// earlier without a date.
func TestSessionHistoryMarks(t *testing.T) {
	at := time.Date(2027, 3, 1, 23, 30, 0, 0, time.FixedZone("UTC-2", -2*3600))
	got := SessionHistory([]SessionEntry{
		{Role: llm.RoleUser, Author: "Ann (person)", Content: "dated", At: at},
		{Role: llm.RoleAssistant, Content: "undated"},
	})
	want := []string{"(earlier, 2027-03-02) Ann (person): dated", "(earlier) undated"}
	for i, h := range got {
		if s := h.Text(0); s != want[i] {
			t.Errorf("entry %d = %q, want %q", i, s, want[i])
		}
	}
}
