package fuzzy

import "testing"

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"C45653", "C45653", 0},
		{"tempaltes", "templates", 2},
		{"CONVERSTION", "CONVERSATION", 1},
		{"kitten", "sitting", 3},
		{"éa", "ea", 1}, // runes, not bytes
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestNearest(t *testing.T) {
	got, d := Nearest("tempaltes", []string{"run", "chat", "templates", "tools"})
	if got != "templates" || d != 2 {
		t.Errorf("Nearest = %q, %d; want templates, 2", got, d)
	}
	if got, d := Nearest("x", []string{"ab", "cd"}); got != "ab" || d != 2 {
		t.Errorf("a tie = %q, %d; want the first, ab, 2", got, d)
	}
	if got, d := Nearest("x", nil); got != "" || d != -1 {
		t.Errorf("no candidates = %q, %d", got, d)
	}
}
