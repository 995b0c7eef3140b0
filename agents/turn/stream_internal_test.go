package turn

import "testing"

func TestShownText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"Done. :end:", "Done."},
		{"Done. :en", "Done."},
		{"Here:\n```go\nx := 1", "Here:\n```go\nx := 1\n```"},
		{"Plain text ", "Plain text"},
	} {
		if got := shownText(tt.in); got != tt.want {
			t.Errorf("shownText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"A first sentence. ", true}, {"A first sentence.", false}, {"Version 3.5 is", false},
		{"A line\n", true}, {"Why? Because", true}, {"Quoted.\" Then", true}, {"No end yet", false},
	} {
		if got := firstSentence(tt.in); got != tt.want {
			t.Errorf("firstSentence(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
