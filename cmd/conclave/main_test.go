package main

import (
	"net"
	"os"
	"path/filepath"
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

func TestHealthcheckCommand(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	path := r.config(t, "")
	// The check reads http.addr from the same configuration: give it a
	// fixed free port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
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
