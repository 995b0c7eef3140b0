package llm

import (
	"strings"
	"testing"
)

// BenchmarkSplitReasoning is the removal alone, on a 4,000-character
// <think> block.
func BenchmarkSplitReasoning(b *testing.B) {
	reply := "<think>\n" + strings.Repeat("The user asks about claim C45653; the policy covers glass. ", 70)[:4000] +
		"\n</think>\n\nThe claim goes to review."
	b.ReportAllocs()
	for b.Loop() {
		if got, _ := splitReasoning(reply); got != "The claim goes to review." {
			b.Fatal(got)
		}
	}
}
