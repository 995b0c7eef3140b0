package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTemplatesDirFromTheConfigFile: templates.dir written in a
// configuration file is relative to that file's folder, whatever the
// working directory; a folder it names that is missing is an error (a
// misspelt directory would quietly serve the built-in prompts), one that
// holds Go source a warning (and the built-in prompts); named by
// CONCLAVE_TEMPLATES_DIR or --dir, both are errors.
func TestTemplatesDirFromTheConfigFile(t *testing.T) {
	const system = "You are the desk's own facilitator."
	source, err := filepath.Abs("../../templates")
	if err != nil {
		t.Fatal(err)
	}
	repo := writeFiles(t, map[string]string{
		"conf/config.toml":                     cliConfig + "\n[templates]\ndir = \"prompts\"\n",
		"conf/prompts/facilitator/system.tmpl": system + "\n",
		"conf/missing.toml":                    cliConfig + "\n[templates]\ndir = \"nowhere\"\n",
		"conf/source.toml":                     cliConfig + "\n[templates]\ndir = " + strconv.Quote(source) + "\n",
	})
	conf := filepath.Join(repo, "conf")
	render := []string{"templates", "render", "--agent", "elen.acme.137.protocol6022.eth", "--prompt", "default"}
	with := func(args ...string) []string { return append(append([]string(nil), render...), args...) }

	// The test runs in cmd/conclave, where "prompts" does not exist.
	code, out, errOut := cli(t, nil, with("--config", filepath.Join(conf, "config.toml"))...)
	if code != 0 || !strings.Contains(out, system) {
		t.Errorf("relative to the file: exit %d, the override not rendered\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = cli(t, nil, with("--config", filepath.Join(conf, "missing.toml"))...)
	want := `conclave: templates: templates.dir in ` + filepath.Join(conf, "missing.toml") + ` names "` + filepath.Join(conf, "nowhere") + `", which does not exist`
	if code != 1 || !strings.Contains(errOut, want) || strings.Contains(out, system) {
		t.Errorf("missing, in the file: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}

	code, _, errOut = cli(t, nil, with("--config", filepath.Join(conf, "source.toml"))...)
	want = `names "` + source + `", which holds Go source, not a config repository of prompts; using the built-in prompts`
	if code != 0 || !strings.Contains(errOut, "warning: ") || !strings.Contains(errOut, want) {
		t.Errorf("Go source, in the file: exit %d, stderr %q; want 0 and %q", code, errOut, want)
	}

	environ := map[string]string{"CONCLAVE_TEMPLATES_DIR": filepath.Join(conf, "nowhere")}
	code, _, errOut = cli(t, environ, with("--config", filepath.Join(conf, "config.toml"))...)
	want = `conclave: templates: CONCLAVE_TEMPLATES_DIR names "` + filepath.Join(conf, "nowhere") + `", which does not exist`
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("missing, by the environment: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}

	code, _, errOut = cli(t, nil, with("--config", filepath.Join(conf, "config.toml"), "--dir", "../../templates")...)
	want = `conclave: templates: --dir names "../../templates", which holds Go source, not a config repository of prompts`
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("Go source, by the flag: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
}
