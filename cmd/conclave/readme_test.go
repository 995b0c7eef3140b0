package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/bot"
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

// TestSlackAppManifest: deploy/slack-app-manifest.yaml, which the README
// links, asks for exactly the scopes conclave uses and lists every slash
// command the README documents, over Socket Mode; the README names the
// same scopes.
func TestSlackAppManifest(t *testing.T) {
	const path = "deploy/slack-app-manifest.yaml"
	manifest := readFile(t, "../../"+path)
	readme := readFile(t, "../../README.md")
	if !strings.Contains(readme, "]("+path+")") {
		t.Errorf("the README does not link %s", path)
	}
	// The bot scopes: the list under "bot:", one "- scope" per line.
	_, rest, ok := strings.Cut(manifest, "\n    bot:\n")
	if !ok {
		t.Fatal("the manifest has no oauth_config.scopes.bot list")
	}
	var scopes []string
	for _, line := range strings.Split(rest, "\n") {
		item, ok := strings.CutPrefix(line, "      - ")
		if !ok {
			break
		}
		scopes = append(scopes, item)
	}
	if !slices.Equal(scopes, bot.RequiredScopes) {
		t.Errorf("manifest scopes %v, want bot.RequiredScopes %v", scopes, bot.RequiredScopes)
	}
	for _, s := range bot.RequiredScopes {
		if !strings.Contains(readme, "`"+s+"`") {
			t.Errorf("the README does not name the scope %s", s)
		}
	}
	commands := regexp.MustCompile(`(?m)^    - command: (/\S+)$`).FindAllStringSubmatch(manifest, -1)
	documented := regexp.MustCompile("(?m)^### `(/[a-z-]+)").FindAllStringSubmatch(readFile(t, "../../docs/commands.md"), -1)
	var got, want []string
	for _, c := range commands {
		got = append(got, c[1])
	}
	for _, c := range documented {
		want = append(want, c[1])
	}
	slices.Sort(got)
	slices.Sort(want)
	want = slices.Compact(want)
	if len(want) < 5 || !slices.Equal(got, want) {
		t.Errorf("manifest commands %v, documented in docs/commands.md %v", got, want)
	}
	for _, setting := range []string{"socket_mode_enabled: true", "- message.channels", "- message.groups"} {
		if !strings.Contains(manifest, setting) {
			t.Errorf("the manifest lacks %q", setting)
		}
	}
}

// TestREADMEListsEveryCommand: the README's Operations section names
// every sub-command the binary has.
func TestREADMEListsEveryCommand(t *testing.T) {
	readme := readFile(t, "../../README.md")
	_, list, ok := strings.Cut(readme, "`conclave --help` lists the sub-commands (")
	if !ok {
		t.Fatal("the README has no list of sub-commands")
	}
	list, _, _ = strings.Cut(list, ")")
	for _, c := range commands() {
		if !strings.Contains(list, "`"+c.name+"`") {
			t.Errorf("the README's list of sub-commands lacks `%s`: %s", c.name, list)
		}
	}
}
