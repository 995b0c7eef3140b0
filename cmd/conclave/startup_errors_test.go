package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

// TestRunRefusesAChannelAgentNothingResolves: an agent a channel names
// that no [[agents]] entry declares and no chain resolves stops `conclave
// run` at start, naming the entry and the declared name it was probably
// meant to be; a name far from every declared one gets no guess.
func TestRunRefusesAChannelAgentNothingResolves(t *testing.T) {
	tests := []struct {
		name, agent, want string
		guess             bool
	}{
		{"misspelt", "ellen.acme.137.protocol6022.eth",
			`channels[0].agents[0]: no [[agents]] entry declares "ellen.acme.137.protocol6022.eth" and the chain does not resolve it (did you mean "elen.acme.137.protocol6022.eth"?)`, true},
		{"unlike any", "zorro.example.eth",
			`channels[0].agents[0]: no [[agents]] entry declares "zorro.example.eth" and the chain does not resolve it`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			body := cliConfig + "\n[http]\naddr = \"127.0.0.1:0\"\n\n[[channels]]\nid = \"C0001\"\nagents = [\"" + tt.agent + "\"]\n"
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := cli(t, nil, "run", "--config", path)
			if code != 1 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, tt.want)
			}
			if got := strings.Contains(errOut, "did you mean"); got != tt.guess {
				t.Errorf("a guess offered = %v, want %v: %q", got, tt.guess, errOut)
			}
			if strings.Contains(errOut, "conclave is running") {
				t.Errorf("conclave started anyway:\n%s", errOut)
			}
		})
	}
}

// TestRedisWithoutAppendOnlyIsWarned: conclave reads the test Redis's
// appendonly setting at start and warns, naming the risk, when it is off
// (and only then).
func TestRedisWithoutAppendOnlyIsWarned(t *testing.T) {
	db := redistest.New(t)
	res, err := db.Client(t).ConfigGet(t.Context(), "appendonly").Result()
	if err != nil {
		t.Skipf("the test Redis denies CONFIG GET: %v", err)
	}
	r := newRig(t, fakeslack.Options{})
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)), nil)
	p.stop(t)
	warned := false
	for _, l := range linesWith(t, p.logs.String(), "memory: Redis runs with appendonly no") {
		warned = warned || l["level"] == "WARN" && strings.Contains(l["msg"].(string), "a restart of Redis loses")
	}
	if want := res["appendonly"] != "yes"; warned != want {
		t.Errorf("appendonly %q: warned = %v, want %v\n%s", res["appendonly"], warned, want, p.logs)
	}
}

// TestChatWarnsOfAMissingModelKey: `conclave chat` against a model
// endpoint without a key warns as `conclave run` does; with --fake-model
// no key is needed and none is asked for.
func TestChatWarnsOfAMissingModelKey(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	path := r.config(t, "")
	rewrite(t, path, `api_key = "sk-test-model-key"`, `api_key = ""`)
	for _, tt := range []struct {
		name string
		args []string
		warn bool
	}{
		{"the configured model", nil, true},
		{"the fake model", []string{"--fake-model"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := cli(t, nil, append([]string{"chat", "--config", path}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := strings.Contains(errOut, "llm: no API key for the default profile"); got != tt.warn {
				t.Errorf("warned = %v, want %v: %q", got, tt.warn, errOut)
			}
		})
	}
}
