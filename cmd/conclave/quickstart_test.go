package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/internal/testlog"
)

// TestQuickStart runs the README's quick start as a newcomer copies it,
// in-process and with an empty environment: `cp config.example.toml
// config.toml`, then `printf 'Is customer C45653 covered?\n' | conclave
// chat --fake-model --as Ada` in that folder. It exits 0; the
// facilitator's fake answer and its summary are the transcript.
func TestQuickStart(t *testing.T) {
	readme := readFile(t, "../../README.md")
	const command = "cp config.example.toml config.toml && printf 'Is customer C45653 covered?\\n' | go run ./cmd/conclave chat --fake-model --as Ada"
	if !strings.Contains(readme, command) {
		t.Errorf("the README does not show the quick start %q", command)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(readFile(t, "../../config.example.toml")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	var stdout, stderr testlog.Buffer
	e := env{getenv: func(string) string { return "" }, environ: func() []string { return nil },
		stdout: &stdout, stderr: &stderr, stdin: strings.NewReader("Is customer C45653 covered?\n")}
	code := runMain(waitCtx(t), []string{"chat", "--fake-model", "--as", "Ada"}, e)
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	want := "Elen: (fake model) Elen heard: Is customer C45653 covered?\nElen: (fake model) summary\n"
	if stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", stdout.String(), want, stderr.String())
	}
	if strings.Contains(stderr.String(), "level=WARN") || strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("the quick start logs trouble:\n%s", stderr.String())
	}
}
