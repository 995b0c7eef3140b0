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

func TestSuggest(t *testing.T) {
	keys := []string{"CONCLAVE_LLM_BASE_URL", "CONCLAVE_MEMORY_REDIS_URL", "CONCLAVE_LOG_LEVEL"}
	tests := []struct {
		name, s string
		cands   []string
		want    string
		ok      bool
	}{
		{"one letter off", "CONCLAVE_LOG_LEVL", keys, "CONCLAVE_LOG_LEVEL", true},
		{"a swap in a short word", "chta", []string{"run", "chat"}, "chat", true},
		{"over a third of the name away", "CONCLAVE_REDIS_URL", keys, "", false},
		{"no candidates", "x", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Suggest(tt.s, tt.cands)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Suggest(%q) = %q, %v; want %q, %v", tt.s, got, ok, tt.want, tt.ok)
			}
		})
	}
}
