package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/bot/fakeslack"
)

func TestVersionAndUsage(t *testing.T) {
	if code, out, _ := cli(t, nil, "version"); code != 0 || !strings.HasPrefix(out, "conclave ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if code, out, _ := cli(t, nil, "help"); code != 0 || !strings.Contains(out, "templates check") {
		t.Errorf("help: exit %d, %q", code, out)
	}
	if code, _, errOut := cli(t, nil, "serve"); code != 2 || !strings.Contains(errOut, `unknown command "serve"`) {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
	if code, _, errOut := cli(t, nil, "run", "extra"); code != 2 {
		t.Errorf("run with an argument: exit %d, %q", code, errOut)
	}
}

// TestCLIHelp: the top-level help in its three spellings lists every
// sub-command with one line; each sub-command prints its own flags; a
// group word alone lists its sub-commands; unknown words are usage errors.
func TestCLIHelp(t *testing.T) {
	for _, arg := range []string{"help", "-h", "--help"} {
		code, out, _ := cli(t, nil, arg)
		if code != 0 {
			t.Errorf("%s: exit %d", arg, code)
		}
		for _, c := range commands() {
			if !strings.Contains(out, "\n  "+c.name+" ") || !strings.Contains(out, c.summary+"\n") {
				t.Errorf("%s does not list %q with its line:\n%s", arg, c.name, out)
			}
		}
	}
	flags := map[string][]string{
		"run":              {"-config"},
		"templates check":  {"-dir", "-fixture", "-strict"},
		"templates render": {"-agent", "-prompt", "-fixture", "-dir", "-config"},
		"memory hydrate":   {"-agent", "-session", "-group", "-file", "-config"},
		"memory list":      {"-agent", "-prefix", "-json", "-channel", "-config"},
		"memory show":      {"-agent", "-channel", "-config"},
		"memory forget":    {"-agent", "-channel", "-config"},
		"config print":     {"-config"},
		"healthcheck":      {"-url", "-config"},
		"version":          nil,
	}
	for name, want := range flags {
		for _, h := range []string{"--help", "-h"} {
			args := append(strings.Fields(name), h)
			code, out, errOut := cli(t, nil, args...)
			if code != 0 || !strings.HasPrefix(out, "Usage: conclave "+name+" [flags]") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
			for _, f := range want {
				if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"\n") {
					t.Errorf("%v does not show %s:\n%s", args, f, out)
				}
			}
		}
	}
	for _, args := range [][]string{{"templates"}, {"templates", "--help"}, {"templates", "help"}, {"memory", "-h"}, {"config"}} {
		code, out, _ := cli(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "Usage: conclave "+args[0]+" <command>") || !strings.Contains(out, "  "+args[0]+" ") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
	if code, _, errOut := cli(t, nil, "templates", "lint"); code != 2 || !strings.Contains(errOut, `unknown templates command "lint"`) || !strings.Contains(errOut, "templates render") {
		t.Errorf("unknown templates command: exit %d, %q", code, errOut)
	}
	if code, _, errOut := cli(t, nil, "config", "print", "--nope"); code != 2 || !strings.Contains(errOut, "-nope") {
		t.Errorf("unknown flag: exit %d, %q", code, errOut)
	}
}

// TestCLIHelpOfACommand: "help <command>" prints that command's help, as
// "<command> --help" does; an unknown command suggests the nearest one.
func TestCLIHelpOfACommand(t *testing.T) {
	for _, args := range [][]string{{"help", "run"}, {"help", "templates", "check"}, {"help", "chat"}} {
		code, out, errOut := cli(t, nil, args...)
		name := strings.Join(args[1:], " ")
		if code != 0 || !strings.HasPrefix(out, "Usage: conclave "+name+" [flags]") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if code, out, _ := cli(t, nil, "help", "templates"); code != 0 || !strings.HasPrefix(out, "Usage: conclave templates <command>") {
		t.Errorf("help templates: exit %d, %q", code, out)
	}
	if code, out, _ := cli(t, nil, "help", "help"); code != 0 || !strings.Contains(out, "Commands:") {
		t.Errorf("help help: exit %d, %q", code, out)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"tempaltes", "check"}, `conclave: unknown command "tempaltes" (did you mean templates?)`},
		{[]string{"help", "chta"}, `conclave: unknown command "chta" (did you mean chat?)`},
		{[]string{"templates", "chek"}, `conclave: unknown templates command "chek" (did you mean templates check?)`},
		{[]string{"serve"}, `conclave: unknown command "serve"` + "\n"},
	}
	for _, tt := range tests {
		code, _, errOut := cli(t, nil, tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

func TestCLIVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		code, out, _ := cli(t, nil, arg)
		if code != 0 || !regexp.MustCompile(`^conclave \S+ \(commit \S+, go1\.\d+`).MatchString(out) {
			t.Errorf("%s: exit %d, %q", arg, code, out)
		}
		if !strings.Contains(out, runtime.Version()) {
			t.Errorf("%s: %q does not name the Go version %s", arg, out, runtime.Version())
		}
	}
}

func TestHealthcheckCommand(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	path := r.config(t, "")
	// The check reads http.addr from the same configuration: give it a
	// fixed free port.
	addr := freeAddr(t)
	rewrite(t, path, `addr = "127.0.0.1:0"`, `addr = "`+addr+`"`)
	p := start(t, path, nil)
	if p.addr != addr {
		t.Fatalf("serving on %s, want %s", p.addr, addr)
	}
	if code, out, errOut := cli(t, nil, "healthcheck", "--config", path); code != 0 || strings.TrimSpace(out) != "ok" {
		t.Errorf("healthy bot: exit %d, %q %q", code, out, errOut)
	}
	if code, _, _ := cli(t, nil, "healthcheck", "--url", "http://"+addr+"/nope"); code != 1 {
		t.Errorf("a 404: exit %d, want 1", code)
	}
	p.stop(t)
	if code, _, errOut := cli(t, nil, "healthcheck", "--config", path); code != 1 || !strings.Contains(errOut, "healthcheck:") {
		t.Errorf("stopped bot: exit %d, %q", code, errOut)
	}
}

func TestRunRefusesABadConfiguration(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte("[conversation]\nmax_turns = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cli(t, nil, "run", "--config", path)
	if code != 1 || !strings.Contains(errOut, "conversation.max_turns") {
		t.Errorf("exit %d: %q", code, errOut)
	}
	code, _, errOut = cli(t, nil, "run", "--config", filepath.Join(dir, "missing.toml"))
	if code != 1 || !strings.Contains(errOut, "missing.toml") {
		t.Errorf("missing explicit file: exit %d: %q", code, errOut)
	}
}
