package templates_test

import (
	"os"
	"regexp"
	"testing"
)

// TestExamplesRenderWithoutDoubleSpaces: the example repository's prompts,
// as rendered into testdata/examples.golden (which TestCheck keeps equal
// to a fresh render), have no double space between words: a layout line
// that renders empty, or a block that starts a line, leaves none.
func TestExamplesRenderWithoutDoubleSpaces(t *testing.T) {
	body, err := os.ReadFile("testdata/examples.golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`.{0,30}\S  \S.{0,30}`).FindAll(body, -1) {
		t.Errorf("a double space: %q", m)
	}
}
