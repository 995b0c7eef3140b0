package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// templates render names the commit of a config repository that is a git
// work tree (a branch's loose ref here; templates.RepoCommit's tests run
// real git).
func TestTemplatesRenderPrintsCommit(t *testing.T) {
	cfgDir := writeFiles(t, map[string]string{"config.toml": cliConfig})
	environ := map[string]string{"CONCLAVE_CONFIG": filepath.Join(cfgDir, "config.toml")}
	repo := writeFiles(t, map[string]string{
		".git/HEAD":                        "ref: refs/heads/main\n",
		".git/refs/heads/main":             testCommit + "\n",
		"prompts/facilitator/default.tmpl": "Decide now about: {{.LatestRequest.Content}}.\n",
	})
	code, _, errOut := cli(t, environ, "templates", "render", "--dir", filepath.Join(repo, "prompts"),
		"--agent", "elen.acme.137.protocol6022.eth", "--prompt", "default")
	if code != 0 || !strings.Contains(errOut, "prompts of commit "+testCommit) {
		t.Errorf("exit %d, want 0 and the commit named:\n%s", code, errOut)
	}
	plain := writeFiles(t, map[string]string{"facilitator/default.tmpl": "Decide.\n"})
	if _, _, errOut := cli(t, environ, "templates", "render", "--dir", plain,
		"--agent", "elen.acme.137.protocol6022.eth", "--prompt", "default"); strings.Contains(errOut, "commit") {
		t.Errorf("a directory outside git names a commit:\n%s", errOut)
	}
}

// conclave trace shows the commit a turn's prompts came from.
func TestTurnBlockShowsCommit(t *testing.T) {
	var b bytes.Buffer
	writeTurnBlock(&b, agents.Trace{TurnID: "t1", Agent: "elen", Role: "facilitator", Outcome: "ok", PromptsCommit: testCommit})
	if !strings.Contains(b.String(), "commit    "+testCommit) {
		t.Errorf("the block lacks the commit:\n%s", b.String())
	}
	b.Reset()
	writeTurnBlock(&b, agents.Trace{TurnID: "t1", Agent: "elen", Role: "facilitator", Outcome: "ok"})
	if strings.Contains(b.String(), "commit") {
		t.Errorf("a turn without a commit shows one:\n%s", b.String())
	}
}
