package turn

import "testing"

func TestStripEnd(t *testing.T) {
	tests := []struct {
		in, want string
		had      bool
	}{
		{"Thanks all :end:", "Thanks all", true},
		{":end:", "", true},
		{":end::end:", "", true},
		{"Thanks all :end: :end:", "Thanks all", true},
		{"Done.:end:", "Done.", true},
		{"  keep   inner  spacing ", "  keep   inner  spacing ", false},
		// A token, not a substring (SPEC §14.7): in any case, wrapped in
		// emphasis, code or quotes, last or alone on its line.
		{"All settled. :END:", "All settled.", true},
		{"All settled. **:end:**", "All settled.", true},
		{"All settled. `:end:`", "All settled.", true},
		{"All settled. \":End:\"", "All settled.", true},
		{"All settled. _:end:_ 🧭", "All settled. 🧭", true},
		{"All settled.\n:end:\n— Elen", "All settled.\n— Elen", true},
		{"line one\n  *:end:*  \nline two", "line one\nline two", true},
		{"no :end: yet, Cora is checking", "no :end: yet, Cora is checking", false},
		{"Done. :end: Bye", "Done. :end: Bye", false},
		{"a:end:b", "a:end:b", false},
		{"Done :end:, thanks", "Done :end:, thanks", false},
		{"line one\n:end: line two", "line one\n:end: line two", false},
		{":END: is not the token here", ":END: is not the token here", false},
		{"x:end:", "x:end:", false},
	}
	for _, tt := range tests {
		got, had := StripEnd(tt.in)
		if got != tt.want || had != tt.had {
			t.Errorf("StripEnd(%q) = %q, %v; want %q, %v", tt.in, got, had, tt.want, tt.had)
		}
	}
}

// What is left of an :end: reply is posted only when it says something: a
// lone signature is not.
func TestHasWords(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", false},
		{"🧭", false},
		{"👍 ✅ …", false},
		{"🧭 —", false},
		{"🧭 Done.", true},
		{"C1", true},
		{"é", true},
		{"٣", true},
	}
	for _, tt := range tests {
		if got := HasWords(tt.in); got != tt.want {
			t.Errorf("HasWords(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
