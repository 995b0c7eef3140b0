package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

const ottoENS = "otto.acme.137.protocol6022.eth"

// ottoBroken is a config repository in which the expert Otto's threading
// prompt does not parse.
var ottoBroken = map[string]string{
	"agents/" + ottoENS + "/context-not-found.tmpl": "Find the claim number.\n{{ .LatestRequest.Content ",
}

// agentSection declares a static agent.
func agentSection(ens, name, role string) string {
	return fmt.Sprintf("\n[[agents]]\nens = %q\nname = %q\nrole = %q\n", ens, name, role)
}

// channelSection serves testChannel with the given agents.
func channelSection(names ...string) string {
	return fmt.Sprintf("\n[[channels]]\nid = %q\nagents = [%s]\n", testChannel, `"`+strings.Join(names, `", "`)+`"`)
}

// templateRepo writes files into a new config repository and points the
// configuration at path to it; it returns the repository's directory.
func templateRepo(t *testing.T, path string, files map[string]string) string {
	t.Helper()
	dir := writeFiles(t, files)
	old := fmt.Sprintf("dir = %q", filepath.Join(filepath.Dir(path), "no-templates"))
	rewrite(t, path, old, fmt.Sprintf("dir = %q", dir))
	return dir
}

// get fetches a path of the process's HTTP server.
func (p *process) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// samples are the series of a Prometheus text exposition, by their full
// name with labels as exposed ("name{a=\"x\",b=\"y\"}").
type samples map[string]float64

func (p *process) scrape(t *testing.T) samples {
	t.Helper()
	status, body := p.get(t, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics = %d", status)
	}
	out := samples{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// sum adds the series of family name whose labels include every pair of
// labels (`role="expert"`); found says whether any series matched.
func (s samples) sum(name string, labels ...string) (total float64, found bool) {
	for series, v := range s {
		fam, rest, _ := strings.Cut(series, "{")
		if fam != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
			}
		}
		if ok {
			total += v
			found = true
		}
	}
	return total, found
}

// logLines decodes a process's JSON log lines.
func logLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestMetricsAndTurnLog runs a conversation with a failing expert, a
// model error, a Slack rate limit, a Slack API error and a duplicate
// delivery, then checks that every family SPEC §8 lists is exposed with
// what happened, and that each turn logged one line with its fields.
func TestMetricsAndTurnLog(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	r.llm.Reply(llmfake.Error(http.StatusBadGateway, "upstream unavailable"))
	r.llm.Handle(func(llmfake.Request) llmfake.Reply {
		return llmfake.Reply{Content: "Tell me the claim number.", PromptTokens: 120, CompletionTokens: 7}
	})
	path := r.config(t, agentSection(ottoENS, "Otto", "expert")+channelSection(elenENS, ottoENS))
	templateRepo(t, path, ottoBroken)
	r.slack.FailNext("chat.postMessage", fakeslack.Failure{Status: http.StatusTooManyRequests, RetryAfter: 0})
	r.slack.FailNext("reactions.add", fakeslack.Failure{Error: "invalid_name"})
	p := start(t, path, nil)
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "Hello " + ottoENS + ", my car was hit."})
	if _, err := r.slack.WaitAck(ctx, root.Key()); err != nil {
		t.Fatal(err)
	}
	r.slack.Redeliver(root.Key(), "timeout")
	if _, err := r.slack.WaitDeliveries(ctx, root.Key(), 2); err != nil {
		t.Fatal(err)
	}
	posts, err := r.slack.WaitPosts(ctx, 2)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	if !strings.HasPrefix(posts[0].Text, "⚠️ Otto could not answer: ") || !strings.Contains(posts[0].Text, "context-not-found.tmpl:2") {
		t.Errorf("Otto's notice = %q, want the file and line", posts[0].Text)
	}
	if posts[1].Text != "Tell me the claim number." {
		t.Errorf("facilitator posted %q", posts[1].Text)
	}
	// The duplicate's ack comes after the store refused it.
	if _, err := r.slack.WaitAcks(ctx, root.Key(), 2); err != nil {
		t.Fatalf("the redelivery was not acknowledged: %v", err)
	}

	tests := []struct {
		name   string
		labels []string
		min    float64
	}{
		{"conclave_slack_envelopes_total", []string{`type="events_api"`}, 2},
		{"conclave_events_total", []string{`result="recorded"`}, 1},
		{"conclave_events_total", []string{`result="duplicate"`}, 1},
		{"conclave_turns_total", []string{`role="facilitator"`, `outcome="ok"`, `phase="default"`}, 1},
		{"conclave_turns_total", []string{`role="expert"`, `outcome="failed"`, `phase="context-not-found"`}, 1},
		{"conclave_turn_failures_total", []string{`role="expert"`}, 1},
		{"conclave_turn_duration_seconds_count", []string{`role="facilitator"`}, 1},
		{"conclave_turn_wait_seconds_count", []string{`role="expert"`}, 1},
		{"conclave_template_errors_total", []string{`role="expert"`, `phase="context-not-found"`}, 1},
		{"conclave_template_problems", nil, 1},
		{"conclave_llm_request_duration_seconds_count", []string{`role="facilitator"`, `outcome="ok"`}, 1},
		{"conclave_llm_attempts_total", []string{`status="502"`}, 1},
		{"conclave_llm_attempts_total", []string{`status="200"`}, 1},
		{"conclave_llm_attempt_duration_seconds_count", nil, 2},
		{"conclave_llm_tokens_total", []string{`agent="` + elenENS + `"`, `direction="input"`}, 120},
		{"conclave_llm_tokens_total", []string{`agent="` + elenENS + `"`, `direction="output"`}, 7},
		{"conclave_slack_rate_limited_total", []string{`method="chat.postMessage"`}, 1},
		{"conclave_slack_api_errors_total", []string{`method="reactions.add"`}, 1},
		{"conclave_lock_acquire_total", []string{`result="acquired"`}, 1},
		{"conclave_lock_acquire_duration_seconds_count", nil, 1},
		{"conclave_ens_cache_hits_total", nil, 0},
		{"conclave_ens_cache_misses_total", nil, 0},
		{"conclave_slack_disconnects_total", nil, 0},
		{"conclave_posts_pending", nil, 0},
		{"conclave_posts_abandoned_total", nil, 0},
	}
	// A turn is reported after it has posted: scrape until every series
	// is there (or the wait ends), then check each.
	met := func(m samples) bool {
		for _, tt := range tests {
			if v, found := m.sum(tt.name, tt.labels...); !found || v < tt.min {
				return false
			}
		}
		return true
	}
	m := p.scrape(t)
	for !met(m) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		m = p.scrape(t)
	}
	for _, tt := range tests {
		t.Run(tt.name+"{"+strings.Join(tt.labels, ",")+"}", func(t *testing.T) {
			v, found := m.sum(tt.name, tt.labels...)
			if !found || v < tt.min {
				t.Errorf("%s%v = %v (found %v), want at least %v", tt.name, tt.labels, v, found, tt.min)
			}
		})
	}

	t.Run("one log line per turn", func(t *testing.T) {
		conv := agents.ConversationID(testTeam, testChannel, root.TS)
		var turns []map[string]any
		for _, l := range logLines(t, p.logs.String()) {
			if l["msg"] == "turn" {
				turns = append(turns, l)
			}
		}
		if len(turns) != 2 {
			t.Fatalf("%d turn lines, want 2:\n%s", len(turns), p.logs)
		}
		want := []map[string]any{
			{"conversation": conv, "agent": ottoENS, "role": "expert", "phase": "context-not-found", "outcome": "failed", "level": "WARN"},
			{"conversation": conv, "agent": elenENS, "role": "facilitator", "phase": "default", "outcome": "ok", "level": "INFO",
				"prompt_tokens": 120.0, "completion_tokens": 7.0},
		}
		for i, w := range want {
			for k, v := range w {
				if turns[i][k] != v {
					t.Errorf("turn %d: %s = %v, want %v", i, k, turns[i][k], v)
				}
			}
			for _, k := range []string{"turn", "wait", "duration", "prompt_tokens", "completion_tokens"} {
				if _, ok := turns[i][k]; !ok {
					t.Errorf("turn %d has no %s: %v", i, k, turns[i])
				}
			}
			// Durations are written as text ("8.1ms").
			for _, k := range []string{"wait", "duration"} {
				text, _ := turns[i][k].(string)
				if d, err := time.ParseDuration(text); err != nil || k == "duration" && i == 1 && d <= 0 {
					t.Errorf("turn %d %s = %v, want a positive duration as text", i, k, turns[i][k])
				}
			}
		}
		if e, _ := turns[0]["error"].(string); !strings.Contains(e, "context-not-found.tmpl:2") {
			t.Errorf("failed turn's error = %q, want the file and line", e)
		}
	})
}

// waitReady polls /readyz until it answers want; it returns the last body.
func (p *process) waitReady(t *testing.T, ctx context.Context, want int) map[string]string {
	t.Helper()
	for {
		status, body := p.get(t, "/readyz")
		report := map[string]string{}
		if err := json.Unmarshal([]byte(body), &report); err != nil {
			t.Fatalf("/readyz body %q: %v", body, err)
		}
		if status == want {
			return report
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/readyz stayed %d (%v), want %d", status, report, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestReadinessChecksFail makes each of /readyz's checks fail in turn:
// Slack never connected, Redis stopped, the template repository gone; the
// others stay "ok", and the failing one gives its reason class only (no
// address, no error text).
func TestReadinessChecksFail(t *testing.T) {
	tests := []struct {
		name   string
		check  string
		reason string
		setup  func(t *testing.T, r *rig, path string) (breakIt, fixIt func())
	}{
		{
			name:   "slack not connected",
			check:  "slack",
			reason: "not connected",
			setup: func(t *testing.T, r *rig, path string) (func(), func()) {
				r.slack.FailNext("apps.connections.open", fakeslack.Failure{Times: 1000, Error: "internal_error"})
				return func() {}, nil
			},
		},
		{
			name:   "redis stopped",
			check:  "redis",
			reason: "unreachable",
			setup: func(t *testing.T, r *rig, path string) (func(), func()) {
				srv := redistest.Start(t)
				db := redistest.WithPrefix(t, srv.URL())
				appendConfig(t, path, redisSection(db.URL, db.Prefix))
				return srv.Stop, srv.Restart
			},
		},
		{
			name:   "template repository gone",
			check:  "templates",
			reason: "not loaded",
			setup: func(t *testing.T, r *rig, path string) (func(), func()) {
				dir := templateRepo(t, path, map[string]string{"facilitator/default.tmpl": "Answer the person."})
				moved := dir + ".away"
				return func() {
						if err := os.Rename(dir, moved); err != nil {
							t.Fatal(err)
						}
					}, func() {
						if err := os.Rename(moved, dir); err != nil {
							t.Fatal(err)
						}
					}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{})
			path := r.config(t, "")
			breakIt, fixIt := tt.setup(t, r, path)
			p := start(t, path, nil)
			ctx := waitCtx(t)
			if tt.check != "slack" {
				p.waitReady(t, ctx, http.StatusOK)
			}
			breakIt()
			report := p.waitReady(t, ctx, http.StatusServiceUnavailable)
			if got, want := report[tt.check], tt.reason; got != want {
				t.Errorf("%s = %q, want only its reason class %q", tt.check, got, want)
			}
			names := []string{"slack", "templates"}
			if tt.check == "redis" {
				names = append(names, "redis")
			}
			for _, name := range names {
				switch {
				case name == tt.check && report[name] == "ok":
					t.Errorf("%s reported ok while broken: %v", name, report)
				case name != tt.check && report[name] != "ok":
					t.Errorf("%s = %q, want ok: %v", name, report[name], report)
				}
			}
			if fixIt != nil {
				fixIt()
				p.waitReady(t, ctx, http.StatusOK)
			}
		})
	}
}

// appendConfig appends TOML tables to the configuration file at path.
func appendConfig(t *testing.T, path, tables string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(tables); err != nil {
		t.Fatal(err)
	}
}

// TestSecretsNeverLeak runs a conversation at debug level with Slack
// tokens in the configuration file, a model API key that the endpoint
// echoes in its error, and a Redis URL with a password that goes down and
// comes back; no secret may appear in any log line, post or request body.
func TestSecretsNeverLeak(t *testing.T) {
	apiKey := "sk-proj-" + strings.Repeat("7f3a9c", 8)
	password := "rds-" + strings.Repeat("b8e1", 6)
	srv := redistest.Start(t, "--user", "conclave", "on", ">"+password, "~*", "&*", "+@all")
	redisURL := "redis://conclave:" + password + "@" + srv.Addr() + "/0"

	r := newRig(t, fakeslack.Options{EchoPosts: true, AckTimeout: 500 * time.Millisecond, MaxRetries: 20})
	r.llm.RequireAPIKey(apiKey)
	r.llm.Reply(
		// As OpenAI does, the refused key is quoted in the error.
		llmfake.Error(http.StatusUnauthorized, "Incorrect API key provided: "+apiKey+"."),
		llmfake.RateLimited("0"))
	r.llm.Handle(echoLatest)
	path := r.config(t, "")
	p := start(t, path, map[string]string{"OPENAI_API_KEY": apiKey, "REDIS_URL": redisURL})
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "thread 0 message 0"})
	if _, err := r.slack.WaitPosts(ctx, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thread 0 message 1"})
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 1"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	srv.Stop()
	third := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thread 0 message 2"})
	if _, err := r.slack.WaitDeliveries(ctx, third.Key(), 2); err != nil {
		t.Fatal(err)
	}
	p.get(t, "/readyz")
	srv.Restart()
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 2"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	_, ready := p.get(t, "/readyz")
	_, metrics := p.get(t, "/metrics")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	posts := r.slack.Posts()
	if !strings.HasPrefix(posts[0].Text, "⚠️ Elen could not answer: ") {
		t.Errorf("first post = %q, want the failure notice", posts[0].Text)
	}
	where := map[string]string{"logs": p.logs.String(), "readyz": ready, "metrics": metrics}
	for i, post := range posts {
		where[fmt.Sprintf("post %d", i)] = fmt.Sprintf("%s %s %v", post.Text, post.Blocks, post.Form)
	}
	for i, c := range r.slack.Calls() {
		where[fmt.Sprintf("slack call %d (%s)", i, c.Method)] = fmt.Sprint(c.Form)
	}
	for i, req := range r.llm.Requests() {
		where[fmt.Sprintf("model request %d", i)] = string(req.Body)
	}
	secrets := map[string]string{
		"Slack app token": fakeslack.AppToken, "Slack bot token": fakeslack.BotToken,
		"API key": apiKey, "API key in the file": "sk-test-model-key", "Redis password": password,
	}
	for what, secret := range secrets {
		for place, text := range where {
			if strings.Contains(text, secret) {
				t.Errorf("the %s appears in %s", what, place)
			}
		}
	}
	// The file's secrets were warned about, by key.
	if !strings.Contains(p.logs.String(), `"key":"slack.bot_token"`) {
		t.Errorf("no warning about the bot token in the file:\n%s", p.logs)
	}
}
