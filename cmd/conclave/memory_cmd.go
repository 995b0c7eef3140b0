package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// runHydrate appends a JSONL file of {"role","content"} lines (each with
// an optional "at", which it keeps) to one memory session, all or nothing,
// after validating the whole file.
func runHydrate(ctx context.Context, args []string, e env) error {
	fs := newFlags("memory hydrate", e)
	load := configFlag(fs, e)
	agentName := fs.String("agent", "", "the agent whose memory is hydrated (required)")
	session := fs.String("session", "", "the session key (an expert's business key)")
	group := fs.String("group", "", "comma-separated ENS names: hydrate the clone/human session of this group")
	channel := fs.String("channel", "", "the channel, when expert.session_scope = \"channel\" (--session) or memory.clone_scope = \"channel\" (--group)")
	file := fs.String("file", "", "the JSONL file (required; - for stdin)")
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	if *agentName == "" || *file == "" || (*session == "") == (*group == "") {
		return fmt.Errorf("%w: hydrate needs --agent, --file and one of --session or --group (see conclave memory hydrate --help)", errUsage)
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	entries, err := readJSONL(*file, e)
	if err != nil {
		return err
	}
	store, agent, err := openMemoryStore(ctx, "memory hydrate", cfg, *agentName)
	if err != nil {
		return err
	}
	defer store.Close()
	if w := hydrateUnread(cfg, agent, *group != ""); w != "" {
		fmt.Fprintln(e.stderr, "warning: memory hydrate: "+w)
	}
	namespace, err := memoryNamespace(cfg, agent, *channel, *group != "")
	if err != nil {
		return err
	}
	key := *session
	if *group != "" {
		names, err := ens.NewNames(cfg.ENS.BaseDomains)
		if err != nil {
			return err
		}
		var members []string
		for _, g := range strings.Split(*group, ",") {
			n, err := names.Parse(strings.TrimSpace(g))
			if err != nil {
				return fmt.Errorf("memory hydrate: --group: %w", err)
			}
			members = append(members, humanOfStatic(cfg, n.Canonical))
		}
		key = agents.GroupSessionID(members)
	}
	if err := memory.Hydrate(ctx, store, namespace, key, entries, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "appended %d message(s) to session %q of %s\n", len(entries), key, namespace)
	return nil
}

func readJSONL(path string, e env) ([]memory.SessionEntry, error) {
	if path == "-" {
		return memory.ParseJSONL("stdin", e.stdin)
	}
	f, err := os.Open(path) // #nosec G304 -- the operator names the file to hydrate from
	if err != nil {
		return nil, fmt.Errorf("memory hydrate: %w", err)
	}
	defer f.Close()
	return memory.ParseJSONL(path, f)
}

// humanOfStatic maps a clone declared in the configuration to the human
// it was forked from; any other name stays as it is.
func humanOfStatic(cfg Config, name string) string {
	for _, a := range cfg.Agents {
		if a.ENS == name && strings.EqualFold(a.Role, "clone") && a.CloneOf != "" {
			return strings.ToLower(a.CloneOf)
		}
	}
	return name
}

// hydrateUnread says why an agent declared in the configuration would not
// read the session being hydrated: a facilitator reads no memory, an
// expert reads its keyed sessions (--session), a clone or a human agent
// its group's (--group). Empty when it does, or when the agent is not
// declared (its role is on the chain).
func hydrateUnread(cfg Config, name string, group bool) string {
	for _, a := range staticAgents(cfg.Agents) {
		if !strings.EqualFold(a.EnsDomain, name) {
			continue
		}
		switch {
		case a.Role == ens.RoleFacilitator:
			return fmt.Sprintf("%s is a facilitator, which reads no memory session: nothing it answers will use this history", name)
		case a.Role == ens.RoleExpert && group:
			return fmt.Sprintf("%s is an expert, which reads the session of a key (--session), not a group's", name)
		case (a.Role == ens.RoleClone || a.Role == ens.RoleHuman) && !group:
			return fmt.Sprintf("%s is a %s, which reads its group's session (--group), not a key's", name, a.Role)
		}
	}
	return ""
}
