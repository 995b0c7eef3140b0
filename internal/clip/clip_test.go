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

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"cut here", 3, "cut…"},
		{"héllo", 2, "h…"}, // é is two bytes: never cut inside it
		{"no limit", 0, "no limit"},
	} {
		if got := Bytes(tt.s, tt.n, "…"); got != tt.want {
			t.Errorf("Bytes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
