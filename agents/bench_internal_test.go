package agents

import (
	"strings"
	"testing"
)

func BenchmarkFindMentions(b *testing.B) {
	forms := testForms()
	text := strings.Repeat("some words about claim C45653, ", 300) + cora + " and " + elen
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		findMentions(text, forms)
	}
}
