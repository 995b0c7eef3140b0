package turn

import (
	"regexp"
	"testing"
)

func TestCheckKey(t *testing.T) {
	ps := PlaceholdersOf(`Reply with {"session": "<the customer id>", "message": "<a line>"}`)
	pattern := regexp.MustCompile(`^C\d{5}$`)
	tests := []struct {
		key     string
		pattern *regexp.Regexp
		want    string
		refused string
	}{
		{"C45653", nil, "C45653", ""},
		{"  C45653 ", nil, "C45653", ""},
		{"", nil, "", ""},
		{"<key or empty>", nil, "", keyIsPlaceholder},
		{"key or empty", nil, "", keyIsPlaceholder},
		{"<the customer id>", pattern, "", keyIsPlaceholder},
		{"<C45653>", nil, "", keyHasBrackets},
		{"C456 …", nil, "", keyIsCut},
		{"C456...", pattern, "", keyIsCut},
		{"customer C45653", nil, "", KeyHasSpaces},
		{"customer C45653", pattern, "C45653", ""},
		{"customer C45653, not C45654", pattern, "", KeyHasSpaces},
		{"the customer", pattern, "", KeyHasSpaces},
	}
	for _, tt := range tests {
		got, refused := CheckKey(tt.key, ps, tt.pattern)
		if got != tt.want || refused != tt.refused {
			t.Errorf("CheckKey(%q) = %q, %q; want %q, %q", tt.key, got, refused, tt.want, tt.refused)
		}
	}
	if !IsPlaceholder("<A LINE>", ps.Message) || IsPlaceholder("a line of text", ps.Message) {
		t.Error("message Placeholders misread")
	}
}
