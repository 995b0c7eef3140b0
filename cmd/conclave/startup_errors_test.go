package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
