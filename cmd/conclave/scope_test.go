package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/ens"
)

func TestSharedExperts(t *testing.T) {
	const (
		expert = "claudine.acme.137.protocol6022.eth"
		lone   = "amir.acme.137.protocol6022.eth"
		facil  = "fabien.acme.137.protocol6022.eth"
		chain  = "nobody.acme.137.protocol6022.eth" // on chain, no RPC: role unknown
	)
	dir, err := ens.New(ens.Options{}, []ens.Agent{
		{Name: "Claudine", EnsDomain: expert, Role: ens.RoleExpert},
		{Name: "Amir", EnsDomain: lone, Role: ens.RoleExpert},
		{Name: "Fabien", EnsDomain: facil, Role: ens.RoleFacilitator},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	channels := []ChannelConfig{
		{ID: "C2", Agents: []string{facil, expert, chain}},
		{ID: "C1", Agents: []string{facil, "Claudine.Acme.137.6022.eth", lone, chain}},
		{ID: "C1", Agents: []string{expert}}, // listed twice in one channel: still one channel
	}
	got := sharedExperts(context.Background(), channels, dir)
	want := []sharedExpert{
		{name: expert, channels: []string{"C1", "C2"}, resolved: true},
		{name: chain, channels: []string{"C1", "C2"}, resolved: false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sharedExperts = %+v, want %+v", got, want)
	}
}

// TestSharedMemoryWarning starts conclave with an expert in two channels:
// with session_scope "agent" a WARN names it and its channels; with
// "channel" nothing is said.
func TestSharedMemoryWarning(t *testing.T) {
	const expert = "claudine.acme.137.protocol6022.eth"
	for _, scope := range []string{"agent", "channel"} {
		t.Run(scope, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{})
			p := start(t, r.config(t, fmt.Sprintf(`
[expert]
session_scope = %q

[[agents]]
ens = %q
role = "expert"

[[channels]]
id = %q
agents = [%q, %q]

[[channels]]
id = "C0SECOND"
agents = [%q]
`, scope, expert, testChannel, elenENS, expert, expert)), nil)
			if code := p.stop(t); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			type line struct{ Level, Msg, Agent, Channels string }
			var warned []line
			for _, raw := range strings.Split(p.logs.String(), "\n") {
				var l line
				if json.Unmarshal([]byte(raw), &l) == nil && l.Level == "WARN" && strings.Contains(l.Msg, "session_scope") {
					warned = append(warned, l)
				}
			}
			switch {
			case scope == "channel" && len(warned) != 0:
				t.Errorf("warned with session_scope channel: %+v", warned)
			case scope == "agent" && (len(warned) != 1 || warned[0].Agent != expert || warned[0].Channels != testChannel+",C0SECOND"):
				t.Errorf("warnings %+v, want one naming %s in %s and C0SECOND\n%s", warned, expert, testChannel, p.logs)
			}
		})
	}
}

// TestCloneScopeWarning: memory.clone_scope = "workspace" is a WARN at
// start; "channel" (the default) says nothing; anything else is refused.
func TestCloneScopeWarning(t *testing.T) {
	for _, scope := range []string{"workspace", "channel"} {
		t.Run(scope, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{})
			p := start(t, r.config(t, fmt.Sprintf("\n[memory]\nclone_scope = %q\n", scope)), nil)
			if code := p.stop(t); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			warned := strings.Count(p.logs.String(), `"level":"WARN","msg":"memory.clone_scope = \"workspace\"`)
			if want := map[string]int{"workspace": 1, "channel": 0}[scope]; warned != want {
				t.Errorf("%d WARN(s) about clone_scope, want %d:\n%s", warned, want, p.logs)
			}
		})
	}
	cfg := defaultConfig()
	if err := decodeConfig("c.toml", []byte("[memory]\nclone_scope = \"team\"\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "memory.clone_scope") {
		t.Errorf("clone_scope \"team\": %v, want an error naming memory.clone_scope", err)
	}
}
