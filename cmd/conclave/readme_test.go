package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/templates"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fencedBlocks returns the bodies of the README's code blocks of one kind.
func fencedBlocks(doc, kind string) []string {
	re := regexp.MustCompile("(?s)```" + kind + "\n(.*?)```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestCIRunsTheREADMETestCommand: CI must run the test command the README
// gives.
func TestCIRunsTheREADMETestCommand(t *testing.T) {
	readme := readFile(t, "../../README.md")
	i := strings.Index(readme, "Run the tests:")
	if i < 0 {
		t.Fatal("README has no \"Run the tests:\" section")
	}
	blocks := fencedBlocks(readme[i:], "sh")
	if len(blocks) == 0 {
		t.Fatal("no command after \"Run the tests:\"")
	}
	cmd := strings.TrimSpace(blocks[0])
	ci := readFile(t, "../../.ci/run")
	found := false
	for _, line := range strings.Split(ci, "\n") {
		if strings.TrimSpace(line) == cmd {
			found = true
		}
	}
	if !found {
		t.Errorf(".ci/run does not run the README's test command %q", cmd)
	}
}

// TestREADMETemplateExample: the template shown in the README checks clean
// as an expert's system prompt.
func TestREADMETemplateExample(t *testing.T) {
	blocks := fencedBlocks(readFile(t, "../../README.md"), "tmpl")
	if len(blocks) != 1 {
		t.Fatalf("README has %d tmpl blocks, want 1", len(blocks))
	}
	dir := writeFiles(t, map[string]string{"expert/system.tmpl": blocks[0]})
	report := templates.Check(dir, templates.CheckOptions{})
	for _, p := range append(report.Errors, report.Warnings...) {
		t.Errorf("README template: %s", p)
	}
}
