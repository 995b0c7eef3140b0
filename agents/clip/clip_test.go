package clip

import "testing"

func TestRunes(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		mark string
		want string
	}{
		{"hello", 5, "…", "hello"},
		{"hello", 4, "…", "hell…"},
		{"hello", 0, "…", "hello"},
		{"hello", -1, "…", "hello"},
		{"héllo wörld", 7, "", "héllo w"},
		{"ééééé", 4, " [cut]", "éééé [cut]"},
		{"ééé", 3, "…", "ééé"}, // 6 bytes, 3 runes: nothing cut
		{"", 3, "…", ""},
		{"🙂🙂🙂", 1, "…", "🙂…"},
	}
	for _, tt := range tests {
		if got := Runes(tt.s, tt.n, tt.mark); got != tt.want {
			t.Errorf("Runes(%q, %d, %q) = %q, want %q", tt.s, tt.n, tt.mark, got, tt.want)
		}
	}
}
