package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/conclavehq/conclave/agents/tools"
)

// runToolsList connects to every MCP server once and prints each agent's
// tools: name, server and the first line of the description. An
// unreachable server is named with its error, and the command then exits 1.
func runToolsList(ctx context.Context, args []string, e env) error {
	fs := newFlags("tools list", e)
	load := configFlag(fs, e)
	agent := fs.String("agent", "", "only this agent (its ENS name)")
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	servers, err := mcpServers(cfg.MCP, e.getenv)
	if err != nil {
		return err
	}
	hub, err := tools.New(servers, tools.Options{})
	if err != nil {
		return err
	}
	listings := map[string]tools.Listing{}
	for _, l := range hub.Probe(ctx) {
		listings[l.Server] = l
	}

	selections := agentTools(cfg)
	names := slices.Sorted(maps.Keys(selections))
	if *agent != "" {
		name := strings.ToLower(strings.TrimSpace(*agent))
		names = []string{name}
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	used := map[string]bool{}
	for _, name := range names {
		fmt.Fprintln(w, name)
		n := 0
		for _, entry := range selections[name] {
			server, only, _ := strings.Cut(entry, "/")
			used[server] = true
			l := listings[server]
			for _, t := range l.Tools {
				if only == "" || t.Tool == only {
					fmt.Fprintf(w, "  %s\t%s\t%s\n", t.Name, server, t.Description)
					n++
				}
			}
		}
		if n == 0 {
			fmt.Fprintln(w, "  (no tools)")
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	failed := false
	for _, s := range servers {
		l := listings[s.Name]
		if l.Err == nil || (*agent != "" && !used[s.Name]) {
			continue
		}
		failed = true
		fmt.Fprintf(e.stdout, "server %s is unreachable: %v\n", s.Name, l.Err)
	}
	if failed {
		return errFailed
	}
	return nil
}

// agentTools is each configured agent's tools setting, by ENS name.
func agentTools(cfg Config) map[string][]string {
	out := map[string][]string{}
	for name, s := range cfg.AgentSetting {
		out[strings.ToLower(name)] = s.Tools
	}
	for _, a := range cfg.Agents {
		out[a.ENS] = a.Tools
	}
	return out
}
