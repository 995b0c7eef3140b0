package main

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

// A scripted conversation on Redis in which the facilitator and an expert
// answer with token counts of the test's choosing; then `conclave usage
// --by agent --json` reports per agent exactly the tokens the endpoint
// returned, its calls, and the cost at the configured prices.
func TestUsageReportsWhatTheEndpointReturned(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	type spent struct{ in, out, calls int }
	var mu sync.Mutex
	returned := map[string]*spent{} // by agent name
	n := 0
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		agent := "Elen"
		if strings.Contains(req.Messages[0].Content, "You are Victor ") {
			agent = "Victor"
		}
		var reply llmfake.Reply
		switch phaseOf(req) {
		case "context-not-found":
			reply = llmfake.Text(`{"session": "CLM-1", "message": ""}`)
		case "context-found":
			reply = llmfake.Text("📚 Claim CLM-1 is open.")
		default:
			reply = llmfake.Text("🧭 Noted.")
		}
		reply.PromptTokens, reply.CompletionTokens = 1000+17*n, 40+3*n
		s := returned[agent]
		if s == nil {
			s = &spent{}
			returned[agent] = s
		}
		s.in += reply.PromptTokens
		s.out += reply.CompletionTokens
		s.calls++
		return reply
	})
	path := r.config(t, redisSection(db.URL, db.Prefix)+`
[llm.prices."fake-model"]
input = 2.5
output = 10

[[agents]]
ens = "victor.acme.137.protocol6022.eth"
name = "Victor"
role = "expert"
attributes = { mission = "Handles claims", expertise = "claims" }

[[channels]]
id = "C0001"
agents = ["elen.acme.137.protocol6022.eth", "victor.acme.137.protocol6022.eth"]
`)
	p := start(t, path, nil)
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: victorENS + ", what is the state of claim CLM-1?"})
	r.waitPosts(t, p, 2)

	type row struct {
		Group        string   `json:"group"`
		InputTokens  int      `json:"input_tokens"`
		OutputTokens int      `json:"output_tokens"`
		Calls        int      `json:"calls"`
		CostUSD      *float64 `json:"cost_usd"`
	}
	// The last commit of a turn may follow its post: read until every
	// call the endpoint answered is counted.
	var rows []row
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, stdout, stderr := cli(t, nil, "usage", "--config", path, "--by", "agent", "--json")
		if code != 0 {
			t.Fatalf("conclave usage: exit %d\n%s", code, stderr)
		}
		rows = rows[:0]
		calls := 0
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var rw row
			if line == "" {
				continue
			}
			if err := json.Unmarshal([]byte(line), &rw); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			rows = append(rows, rw)
			calls += rw.Calls
		}
		mu.Lock()
		all := n
		mu.Unlock()
		if calls == all && all >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage counts %d calls, the endpoint answered %d:\n%s", calls, all, stdout)
		}
		time.Sleep(50 * time.Millisecond) // the next read, not an ordering
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rows) != len(returned) {
		t.Fatalf("%d rows, want one per agent that answered (%d): %+v", len(rows), len(returned), rows)
	}
	groups := map[string]string{"Elen": "Elen (" + elenENS + ")", "Victor": "Victor (" + victorENS + ")"}
	for agent, s := range returned {
		var got *row
		for i := range rows {
			if rows[i].Group == groups[agent] {
				got = &rows[i]
			}
		}
		if got == nil {
			t.Errorf("no row for %s: %+v", groups[agent], rows)
			continue
		}
		if got.InputTokens != s.in || got.OutputTokens != s.out || got.Calls != s.calls {
			t.Errorf("%s: %d in, %d out, %d calls; the endpoint returned %d, %d in %d calls", agent, got.InputTokens, got.OutputTokens, got.Calls, s.in, s.out, s.calls)
		}
		want := (float64(s.in)*2.5 + float64(s.out)*10) / 1e6
		if got.CostUSD == nil || math.Abs(*got.CostUSD-want) > 1e-12 {
			t.Errorf("%s: cost %v, want %g", agent, got.CostUSD, want)
		}
	}

	// The table: a row per group, then the total.
	code, table, stderr := cli(t, nil, "usage", "--config", path, "--by", "model")
	if code != 0 {
		t.Fatalf("conclave usage --by model: exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "fake-model") || !strings.HasPrefix(strings.TrimSpace(lines[2]), "total") {
		t.Errorf("--by model table:\n%s", table)
	}
}

// Bad flags and a store that cannot be read say so, and exit non-zero.
func TestUsageRefusesBadInput(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	db := redistest.New(t)
	onRedis := r.config(t, redisSection(db.URL, db.Prefix))
	inProcess := r.config(t, "")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown grouping", []string{"--config", onRedis, "--by", "team"}, "--by must be person, channel, agent or model"},
		{"negative period", []string{"--config", onRedis, "--since", "-2h"}, "--since must be a positive duration"},
		{"no Redis", []string{"--config", inProcess}, "memory.redis_url is not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := cli(t, nil, append([]string{"usage"}, tt.args...)...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want non-zero and %q", code, stderr, tt.want)
			}
		})
	}
}
