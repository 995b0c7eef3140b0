package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// runTemplatesInit is `conclave templates init [DIR]`: a new config
// repository holding the built-in prompts and partials to edit, a fixture
// to render with, a first prompt test with its golden files, and a CI
// workflow that checks and tests the repository on every change.
func runTemplatesInit(ctx context.Context, args []string, e env) error {
	fs, load, dirFlag := dirFlags("templates init",
		"An argument after the flags may name the directory instead of --dir; it must be new or empty.", e)
	arg, err := parseFlagsDir(fs, args, e)
	if err != nil {
		return err
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	flagDir, err := dirOrArgument(*dirFlag, arg)
	if err != nil {
		return err
	}
	dir := cmp.Or(templatesDir(cfg, flagDir).Dir, "templates")
	if err := newRepositoryDir(dir); err != nil {
		return err
	}
	if err := os.CopyFS(dir, templates.BuiltinFiles()); err != nil {
		return fmt.Errorf("templates init: %w", err)
	}
	facilitator, known := firstFacilitator(cfg)
	files := map[string]string{
		"fixtures/expert.json":          string(templates.BuiltinFixtureJSON("expert")),
		"tests/first.chat":              firstChat(facilitator),
		".github/workflows/prompts.yml": promptsWorkflow,
	}
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return fmt.Errorf("templates init: %w", err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil { // #nosec G306 -- files of a repository, meant to be read
			return fmt.Errorf("templates init: %w", err)
		}
	}
	fmt.Fprintf(e.stderr, "templates init: wrote the built-in prompts, partials/, fixtures/expert.json, tests/first.chat and .github/workflows/prompts.yml into %s\n", dir)
	if !known {
		fmt.Fprintf(e.stderr, "templates init: no facilitator in the first [[channels]] of the configuration: tests/first.chat is written for %s (config.example.toml's desk); edit its names, then write its golden files with `conclave templates test --update --dir %s`\n", facilitator, dir)
		return nil
	}
	// The golden files are what the test itself writes: the built-in
	// prompts rendered for the configured desk.
	testArgs := []string{"--update", "--dir", dir}
	if c := fs.Lookup("config").Value.String(); c != "" {
		testArgs = append(testArgs, "--config", c)
	}
	if err := runTemplatesTest(ctx, testArgs, e); err != nil {
		return fmt.Errorf("templates init: writing the golden files of tests/first.chat: %w", err)
	}
	fmt.Fprintf(e.stderr, "templates init: next, point templates.dir at %s, edit a prompt, and run `conclave templates check --dir %s` and `conclave templates test --dir %s`\n", dir, dir, dir)
	return nil
}

// newRepositoryDir makes sure dir can hold a new repository: missing (it
// is created) or empty. Anything in it would be mixed with the new files.
func newRepositoryDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o750)
	case err != nil:
		return fmt.Errorf("templates init: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("templates init: %s is not empty; name a new directory", dir)
	}
	return nil
}

// firstFacilitator is the short name of the facilitator of the first
// [[channels]] entry, which the first test talks to; false (and
// config.example.toml's facilitator) when the configuration has none.
func firstFacilitator(cfg Config) (string, bool) {
	if len(cfg.Channels) > 0 {
		for _, name := range cfg.Channels[0].Agents {
			for _, a := range cfg.Agents {
				if strings.EqualFold(a.ENS, name) && strings.EqualFold(a.Role, string(ens.RoleFacilitator)) {
					first, _, _ := strings.Cut(strings.ToLower(a.ENS), ".")
					return first, true
				}
			}
		}
	}
	return "elen", false
}

// firstChat is a first prompt test: a question the facilitator answers
// without calling anyone.
func firstChat(facilitator string) string {
	return fmt.Sprintf(`# A first prompt test. Each "<" line is what the model replies to the
# agent's next request; the requests themselves are compared with the
# files of first.golden/. After editing a prompt, see what changed with
#   conclave templates test --dir <this repository>
# and accept it with --update (see docs/authoring.md).
> Ada: Is claim CLM-2025-00142 of customer C45653 covered?
< %[1]s: 🧭 :end:
< %[1]s: 🧭 Claim CLM-2025-00142 is covered.
= %[1]s: is covered
`, facilitator)
}

// promptsWorkflow is the CI workflow of a new config repository: every
// push and pull request is checked and its prompt tests run. conclave is
// built from source: the workflow needs no image.
const promptsWorkflow = `# Checks the prompts and runs their tests on every change.
# CONCLAVE_CONFIG names the configuration the tests use (its agents and
# channels); keep a copy without secrets in this repository.
name: prompts
on: [push, pull_request]
jobs:
  check:
    runs-on: ubuntu-latest
    env:
      CONCLAVE_CONFIG: conclave.toml
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-go@v5
        with:
          go-version: stable
      - run: go install github.com/conclavehq/conclave/cmd/conclave@latest
      - run: conclave templates check --strict --dir .
      - run: conclave templates test --dir .
`
