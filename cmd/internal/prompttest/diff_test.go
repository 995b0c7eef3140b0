package prompttest

import (
	"fmt"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	lines := func(n int, change map[int]string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			if s, ok := change[i]; ok {
				if s != "" {
					b.WriteString(s + "\n")
				}
				continue
			}
			fmt.Fprintf(&b, "line %d\n", i)
		}
		return b.String()
	}
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"one line changed in the middle", lines(10, nil), lines(10, map[int]string{5: "line five"}),
			"--- old\n+++ new\n@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+line five\n line 6\n line 7\n line 8\n"},
		{"two changes far apart make two hunks", lines(20, nil), lines(20, map[int]string{2: "two", 18: ""}),
			"--- old\n+++ new\n@@ -1,5 +1,5 @@\n line 1\n-line 2\n+two\n line 3\n line 4\n line 5\n" +
				"@@ -15,6 +15,5 @@\n line 15\n line 16\n line 17\n-line 18\n line 19\n line 20\n"},
		{"two changes close together make one hunk", lines(12, nil), lines(12, map[int]string{3: "three", 9: "nine"}),
			"--- old\n+++ new\n@@ -1,12 +1,12 @@\n line 1\n line 2\n-line 3\n+three\n line 4\n line 5\n line 6\n line 7\n line 8\n-line 9\n+nine\n line 10\n line 11\n line 12\n"},
		{"from nothing", "", "a\n", "--- old\n+++ new\n@@ -0,0 +1 @@\n+a\n"},
		{"to nothing", "a\nb\n", "", "--- old\n+++ new\n@@ -1,2 +0,0 @@\n-a\n-b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UnifiedDiff("old", tt.a, "new", tt.b); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
