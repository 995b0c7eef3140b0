package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/fuzzy"
)

// checkChannelAgents makes sure every agent a [[channels]] entry names can
// be reached, at start rather than mid-conversation: a name no [[agents]]
// entry declares and the chain does not know (or that points at a chain
// with no RPC URL) is an error, with the nearest declared name offered; a
// name whose look-up could not be done (the chain unreachable) is a WARN,
// since it may resolve later.
func checkChannelAgents(ctx context.Context, cfg Config, dir roleResolver, log *slog.Logger) error {
	timeout := cfg.ENS.RPCTimeout.Duration
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var declared []string
	for _, a := range cfg.Agents {
		declared = append(declared, canonicalName(dir, a.ENS))
	}
	slices.Sort(declared) // a tie suggests the same name every time
	var bad []string
	seen := map[string]bool{}
	for i, ch := range cfg.Channels {
		for j, a := range ch.Agents {
			name := canonicalName(dir, a)
			if seen[name] {
				continue
			}
			seen[name] = true
			_, err := dir.Resolve(ctx, name)
			switch {
			case err == nil:
			case errors.Is(err, ens.ErrNotFound), errors.Is(err, ens.ErrNoRPC), errors.Is(err, ens.ErrInvalidName):
				msg := fmt.Sprintf("channels[%d].agents[%d]: no [[agents]] entry declares %q and the chain does not resolve it", i, j, a)
				if near, ok := fuzzy.Suggest(name, declared); ok {
					msg += fmt.Sprintf(" (did you mean %q?)", near)
				}
				bad = append(bad, msg)
			default:
				log.Warn("an agent of a channel could not be looked up; it may not answer", slog.String("channel", ch.ID),
					slog.String("agent", name), slog.Any(logErr, err))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("config: %s", strings.Join(bad, "; "))
	}
	return nil
}

// canonicalName is name as the directory keys it, or name lowercased
// when it is not a valid name (Resolve then says why).
func canonicalName(dir roleResolver, name string) string {
	if n, err := dir.Names().Parse(name); err == nil {
		return n.Canonical
	}
	return strings.ToLower(strings.TrimSpace(name))
}
