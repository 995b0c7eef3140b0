package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/tools"
	"github.com/conclavehq/conclave/bot/terminal"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// runChat is `conclave chat`: the engine, agents, prompts (reloaded while
// it runs), model endpoint and store of `conclave run`, with the terminal
// instead of Slack.
func runChat(ctx context.Context, args []string, e env) error {
	fs := newFlags("chat", e)
	load := configFlag(fs, e)
	channel := fs.String("channel", "", "the channel whose agents answer (default: the first [[channels]])")
	as := fs.String("as", "", "your name in the conversation (default $USER)")
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	if *channel == "" {
		if len(cfg.Channels) == 0 {
			return fmt.Errorf("%w: no channel: pass --channel or declare one in [[channels]]", errUsage)
		}
		*channel = cfg.Channels[0].ID
	}
	person := strings.TrimSpace(*as)
	if person == "" {
		person = e.getenv("USER")
	}
	interactive := isTerminal(e.stdin)

	// The terminal is for the conversation: only warnings and errors are
	// logged, unless log.level asks for debug.
	logCfg := LogConfig{Level: "warn", Format: "text"}
	if cfg.Log.Level == "debug" {
		logCfg.Level = "debug"
	}
	log := newLogger(logCfg, e.stderr)

	store, err := openStore(ctx, cfg.Memory, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer store.Close()
	lib, _, err := openTemplates(cfg.Templates.Dir, templates.Options{Logger: log.With(slog.String(logComponent, "templates"))},
		func(string) {})
	if err != nil {
		return err
	}
	directory, err := ens.New(ensOptions(cfg.ENS, log), staticAgents(cfg.Agents))
	if err != nil {
		return err
	}
	defer directory.Close()
	def, named := llmProfiles(cfg.LLM)
	client, err := llm.New(def, named, llm.WithLogger(log.With(slog.String(logComponent, "llm"))),
		llm.WithHTTPClient(webClient(cfg.Conversation.MaxParallel)))
	if err != nil {
		return err
	}

	// The agents' MCP servers run as under `conclave run`.
	servers, err := mcpServers(cfg.MCP, e.getenv)
	if err != nil {
		return err
	}
	var toolbox agents.Toolbox
	if len(servers) > 0 {
		hub, err := tools.New(servers, tools.Options{Logger: log, HTTPClient: webClient(cfg.Conversation.MaxParallel)})
		if err != nil {
			return err
		}
		defer startHub(ctx, hub)()
		toolbox = hub
	}

	term := terminal.New(terminal.Options{
		Channel: *channel,
		Person:  person,
		Out:     e.stdout,
		Status:  e.stderr,
		Wait:    !interactive,
		Names: func(ctx context.Context, name string) string {
			if a, err := directory.Resolve(ctx, name); err == nil && a.Name != "" {
				return a.Name
			}
			first, _, _ := strings.Cut(name, ".")
			return first
		},
	})
	opts := engineOptions(cfg, "")
	opts.Owns = term.Owns // the store may be a running conclave's
	opts.Stream = false   // the terminal prints whole replies
	eng := agents.New(opts, agents.Deps{
		Store:    store,
		Chat:     term,
		Model:    term.Working(client),
		Prompts:  func() agents.Prompts { return lib.Current() },
		Resolver: directory,
		Logger:   log,
		Tools:    toolbox,
	})
	list, err := eng.ChannelAgents(ctx, *channel)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("%w: channel %q has no agents: declare them in [[channels]] or add them with /add-agent", errUsage, *channel)
	}
	if interactive {
		fmt.Fprintf(e.stderr, "conclave chat in %s as %s, with %s.\n%s\n", *channel, term.Person(), agentNames(list), terminal.Help)
	}

	// The engine drains its turns in flight after the input ends; the
	// template watcher stops with it.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var engineErr error
	wg.Go(func() { engineErr = eng.Run(runCtx) })
	wg.Go(func() {
		if err := lib.Run(runCtx); err != nil {
			log.Error("templates: watching stopped", slog.Any(logErr, err))
		}
	})
	err = term.Run(ctx, e.stdin, eng)
	stop()
	wg.Wait()
	return errors.Join(err, engineErr)
}

// agentNames lists a channel's agents for the banner.
func agentNames(list []agents.ChannelAgent) string {
	names := make([]string, 0, len(list))
	for _, ca := range list {
		names = append(names, ca.Agent.Name+" ("+string(ca.Agent.Role)+")")
	}
	return strings.Join(names, ", ")
}

// isTerminal reports whether r is a terminal (a character device), where
// a person types; anything else is a script.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
