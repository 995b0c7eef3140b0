package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTemplatesInit: `templates init DIR` writes a config repository that
// `templates check` and `templates test` pass on as it is (its golden
// files written for the configured desk); a second init into it is
// refused, and a directory that does not exist is named by each command.
func TestTemplatesInit(t *testing.T) {
	work := t.TempDir()
	conf := filepath.Join(work, "config.toml")
	body := cliConfig + "\n[[channels]]\nid = \"C0001\"\nagents = [\"elen.acme.137.protocol6022.eth\", \"claudine.acme.137.protocol6022.eth\"]\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(work, "prompts")
	if code, out, errOut := cli(t, nil, "templates", "init", "--config", conf, repo); code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{"facilitator/system.tmpl", "expert/context-found.tmpl", "partials/members.tmpl",
		"fixtures/expert.json", "tests/first.chat", "tests/first.golden/001-elen-default.txt", ".github/workflows/prompts.yml"} {
		if _, err := os.Stat(filepath.Join(repo, f)); err != nil {
			t.Errorf("init did not write %s: %v", f, err)
		}
	}
	code, out, errOut := cli(t, nil, "templates", "check", "--config", conf, "--strict", "--dir", repo)
	if code != 0 || !strings.Contains(errOut, "templates check: ok") {
		t.Errorf("check: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, nil, "templates", "test", "--config", conf, "--dir", repo)
	if code != 0 || !strings.Contains(out, "1 passed, 0 failed") {
		t.Errorf("test: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = cli(t, nil, "templates", "render", "--config", conf, "--dir", repo, "--agent", "elen.acme.137.protocol6022.eth", "--prompt", "default")
	if code != 0 {
		t.Errorf("render: exit %d\n%s", code, errOut)
	}

	if code, _, errOut := cli(t, nil, "templates", "init", "--config", conf, repo); code != 1 || !strings.Contains(errOut, repo+" is not empty") {
		t.Errorf("init into a used directory: exit %d, %q", code, errOut)
	}
	empty := filepath.Join(work, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cli(t, nil, "templates", "test", "--config", conf, "--dir", empty); code == 0 || !strings.Contains(errOut, "holds no tests/*.chat") || strings.Contains(errOut, "prompttest") {
		t.Errorf("test of a repository without tests: exit %d, %q (no internal package name)", code, errOut)
	}
	missing := filepath.Join(work, "nope")
	for _, cmd := range [][]string{
		{"templates", "check", "--config", conf, "--dir", missing},
		{"templates", "test", "--config", conf, "--dir", missing},
		{"templates", "render", "--config", conf, "--dir", missing, "--agent", "elen.acme.137.protocol6022.eth", "--prompt", "default"},
	} {
		code, _, errOut := cli(t, nil, cmd...)
		if code == 0 || !strings.Contains(errOut, `--dir names "`+missing+`", which does not exist`) {
			t.Errorf("%s of a missing directory: exit %d, %q", cmd[1], code, errOut)
		}
	}
}
