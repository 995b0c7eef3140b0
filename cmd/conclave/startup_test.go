package main

import (
	"context"
	"log"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	gethlog "github.com/ethereum/go-ethereum/log"
	"github.com/redis/go-redis/v9"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testlog"
)

// linesWith returns the decoded log lines whose msg starts with prefix.
func linesWith(t *testing.T, logs, prefix string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range logLines(t, logs) {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestCheckoutStartsClean runs conclave as a new user does from a fresh
// clone: no configuration file, the working directory at the repository's
// root (where the default templates.dir is the built-in prompts' Go
// package). It logs no template problem and one start-up summary line.
func TestCheckoutStartsClean(t *testing.T) {
	t.Chdir("../..")
	if _, err := os.Stat("config.toml"); err == nil {
		t.Skip("this checkout has a config.toml; a fresh clone has none")
	}
	p := startArgs(t, nil, map[string]string{"CONCLAVE_HTTP_ADDR": "127.0.0.1:0"})
	p.stop(t)
	logs := p.logs.String()
	for _, l := range logLines(t, logs) {
		msg, _ := l["msg"].(string)
		level, _ := l["level"].(string)
		if strings.HasPrefix(msg, "templates:") && level != "INFO" || l["problems"] != nil && l["problems"] != 0.0 {
			t.Errorf("a template problem at start: %v", l)
		}
	}
	summary := linesWith(t, logs, "conclave is running")
	if len(summary) != 1 {
		t.Fatalf("%d summary lines, want 1:\n%s", len(summary), logs)
	}
	want := map[string]any{"listen": p.addr, "store": "in-process", "agents": 0.0, "templates": "built-in",
		"template_problems": 0.0, "slack_team": "not configured", "agent_admins": "workspace admins and owners"}
	for k, v := range want {
		if summary[0][k] != v {
			t.Errorf("summary %s = %v, want %v", k, summary[0][k], v)
		}
	}
}

// TestStartupSummaryAndModelKey: with Slack and agents, the summary names
// the team, the agents and the repository; an empty model key is a
// warning at start, named by its key.
func TestStartupSummaryAndModelKey(t *testing.T) {
	tests := []struct {
		name    string
		apiKey  string
		warning bool
	}{
		{"with a key", `api_key = "sk-test-model-key"`, false},
		{"without a key", `api_key = ""`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{})
			path := r.config(t, "")
			rewrite(t, path, `api_key = "sk-test-model-key"`, tt.apiKey)
			dir := templateRepo(t, path, map[string]string{"facilitator/default.tmpl": "Answer.", "expert/default.tmpl": "Help."})
			p := start(t, path, nil)
			p.stop(t)
			logs := p.logs.String()
			summary := linesWith(t, logs, "conclave is running")
			if len(summary) != 1 {
				t.Fatalf("%d summary lines, want 1:\n%s", len(summary), logs)
			}
			want := map[string]any{"listen": p.addr, "store": "in-process", "agents": 1.0, "channels": 1.0,
				"templates": dir, "template_files": 2.0, "slack_team": "Fake (" + testTeam + ")"}
			for k, v := range want {
				if summary[0][k] != v {
					t.Errorf("summary %s = %v, want %v", k, summary[0][k], v)
				}
			}
			warned := false
			for _, l := range linesWith(t, logs, "llm: no API key") {
				warned = warned || l["level"] == "WARN" && l["key"] == "llm.api_key"
			}
			if warned != tt.warning {
				t.Errorf("missing-key warning = %v, want %v:\n%s", warned, tt.warning, logs)
			}
		})
	}
}

// TestLibraryLogsAreStructured: go-redis, go-ethereum and the standard log
// package write through conclave's JSON logger.
func TestLibraryLogsAreStructured(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var buf testlog.Buffer
	routeLibraryLogs(slog.New(slog.NewJSONHandler(&buf, nil)))

	log.Print("a line from the standard log package")
	gethlog.Warn("a line from go-ethereum")
	// A Redis that does not answer: go-redis logs the failed dials itself.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for range 20 {
		if c.Ping(context.Background()).Err() == nil {
			t.Fatal("a closed port answered")
		}
		if strings.Contains(buf.String(), `"component":"redis"`) {
			break
		}
	}
	want := map[string]string{
		"stdlog":   "a line from the standard log package",
		"ethereum": "a line from go-ethereum",
		"redis":    "redis:",
	}
	lines := logLines(t, buf.String())
	for component, text := range want {
		found := false
		for _, l := range lines {
			msg, _ := l["msg"].(string)
			found = found || l["component"] == component && strings.Contains(msg, text)
		}
		if !found {
			t.Errorf("no JSON line from %s containing %q in:\n%s", component, text, buf.String())
		}
	}
}

// TestLogDurationsAsText: durations are logged as text in both formats,
// inside groups too.
func TestLogDurationsAsText(t *testing.T) {
	for format, want := range map[string][]string{
		"json": {`"retry_in":"1.5s"`, `"wait":{"left":"250ms"}`},
		"text": {"retry_in=1.5s", "wait.left=250ms"},
	} {
		var b strings.Builder
		newLogger(LogConfig{Level: "info", Format: format}, &b).Info("x",
			slog.Duration("retry_in", 1500*time.Millisecond), slog.Group("wait", slog.Duration("left", 250*time.Millisecond)))
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: %q lacks %s", format, b.String(), w)
			}
		}
	}
}
