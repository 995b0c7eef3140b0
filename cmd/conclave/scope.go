package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/ens"
)

// sharedExpert is an expert declared in several [[channels]].
type sharedExpert struct {
	name     string   // canonical ENS name
	channels []string // sorted
	resolved bool     // false: its role could not be read, it may be an expert
}

// roleResolver is what sharedExperts needs of the directory.
type roleResolver interface {
	Names() ens.Names
	Resolve(ctx context.Context, name string) (ens.Agent, error)
}

// sharedExperts lists, by name, the agents declared in more than one
// channel that are experts, or whose role cannot be read within ctx (they
// may be). Facilitators, clones and humans keep no expert memory.
func sharedExperts(ctx context.Context, channels []ChannelConfig, dir roleResolver) []sharedExpert {
	served := map[string][]string{}
	for _, ch := range channels {
		for _, a := range ch.Agents {
			name := strings.ToLower(a)
			if n, err := dir.Names().Parse(a); err == nil {
				name = n.Canonical
			}
			if !slices.Contains(served[name], ch.ID) {
				served[name] = append(served[name], ch.ID)
			}
		}
	}
	var out []sharedExpert
	for name, chans := range served {
		if len(chans) < 2 {
			continue
		}
		a, err := dir.Resolve(ctx, name)
		if err == nil && a.Role != ens.RoleExpert {
			continue
		}
		slices.Sort(chans)
		out = append(out, sharedExpert{name: name, channels: chans, resolved: err == nil})
	}
	slices.SortFunc(out, func(a, b sharedExpert) int { return strings.Compare(a.name, b.name) })
	return out
}

// warnSharedMemory logs a WARN naming each expert that serves several
// channels while expert.session_scope = "agent": its memory sessions are
// then shared across those channels (docs/memory.md). Roles not declared
// in [[agents]] are read within the RPC timeout.
func warnSharedMemory(ctx context.Context, cfg Config, dir roleResolver, log *slog.Logger) {
	if cfg.Memory.CloneScope == agents.ScopeWorkspace {
		log.Warn(`memory.clone_scope = "workspace": a clone's and a human agent's memory is shared across channels, so what is said in a private channel can reach another channel's prompt (see docs/memory.md)`)
	}
	if cfg.Expert.SessionScope == "channel" {
		return
	}
	timeout := cfg.ENS.RPCTimeout.Duration
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, s := range sharedExperts(ctx, cfg.Channels, dir) {
		msg := `an expert serves several channels with expert.session_scope = "agent": its memory is shared across them (set it to "channel" to keep them apart; see docs/memory.md)`
		if !s.resolved {
			msg = `an agent that may be an expert (its role could not be read) serves several channels with expert.session_scope = "agent": its memory would be shared across them (see docs/memory.md)`
		}
		log.Warn(msg, slog.String("agent", s.name), slog.String("channels", strings.Join(s.channels, ",")))
	}
}
