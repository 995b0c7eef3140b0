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
	"github.com/conclavehq/conclave/agents/fakemodel"
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
	cfg, flags, err := chatConfig(args, e)
	if err != nil {
		return err
	}
	interactive := isTerminal(e.stdin)
	log := chatLogger(cfg, e)
	p, err := openChat(ctx, cfg, log, e, flags.fake)
	defer p.close()
	if err != nil {
		return err
	}
	if flags.record != "" {
		if p.model, err = recordTo(flags.record, p.model, cfg.masker(), flags.force); err != nil {
			return err
		}
	}
	term := chatTerminal(flags.channel, flags.person, !interactive, e, p.directory, traceOf(p.store))
	eng := chatEngine(cfg, p, term)
	list, err := eng.ChannelAgents(ctx, flags.channel)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("%w: channel %q has no agents: declare them in [[channels]] or add them with /add-agent", errUsage, flags.channel)
	}
	if interactive {
		fmt.Fprintf(e.stderr, "conclave chat in %s as %s, with %s.\n%s\n%s\n", flags.channel, term.Person(), agentNames(list), agentsToWrite(list), terminal.Help)
	}
	if err := chatUntilEOF(ctx, eng, p.lib, term, e, log); err != nil {
		return err
	}
	if n := term.Notices(); n > 0 && !interactive {
		// A script's CI fails when a turn did: the last line says so.
		return fmt.Errorf("chat: %d turn(s) ended with a ⚠️ notice", n)
	}
	return nil
}

// chatFlags are what `conclave chat` is asked for besides the config.
type chatFlags struct {
	channel, person string
	record          string // --record's directory ("": none)
	force           bool   // --force: --record into a directory that holds files
	fake            bool   // --fake-model
}

// chatConfig reads the flags and the configuration of `conclave chat`:
// the channel (default: the first [[channels]]) and who is typing
// (default: $USER).
func chatConfig(args []string, e env) (Config, chatFlags, error) {
	var f chatFlags
	fs := newFlags("chat", e)
	load := configFlag(fs, e)
	fs.StringVar(&f.channel, "channel", "", "the channel whose agents answer (default: the first [[channels]])")
	fs.StringVar(&f.person, "as", "", "your name in the conversation (default $USER)")
	fs.BoolVar(&f.fake, "fake-model", false, "answer with the built-in deterministic model: no network, no key (MCP servers are not started)")
	fs.StringVar(&f.record, "record", "", "write each model request and response to this directory as NNN-<agent>-<phase>.json (a new or empty one)")
	fs.BoolVar(&f.force, "force", false, "with --record: write into a directory that already holds files")
	if err := parseFlags(fs, args, e); err != nil {
		return Config{}, f, err
	}
	cfg, _, err := load()
	if err != nil {
		return Config{}, f, err
	}
	if f.channel == "" {
		if len(cfg.Channels) == 0 {
			return Config{}, f, fmt.Errorf("%w: no channel: pass --channel or declare one in [[channels]]", errUsage)
		}
		f.channel = cfg.Channels[0].ID
	}
	f.person = strings.TrimSpace(f.person)
	if f.person == "" {
		f.person = e.getenv("USER")
	}
	return cfg, f, nil
}

// chatLogger logs only warnings and errors (the terminal is for the
// conversation), unless log.level asks for debug.
func chatLogger(cfg Config, e env) *slog.Logger {
	logCfg := LogConfig{Level: "warn", Format: "text"}
	if cfg.Log.Level == "debug" {
		logCfg.Level = "debug"
	}
	return newLogger(logCfg, maskingWriter(e.stderr, cfg))
}

// openChat opens what the engine of `conclave chat` runs on, as `conclave
// run` does but quietly and without metrics; fake puts the built-in fake
// model in place of the endpoint and starts no MCP server (it calls no
// tool). The instance returned is never nil: close it, even on an error.
func openChat(ctx context.Context, cfg Config, log *slog.Logger, e env, fake bool) (*instance, error) {
	p := &instance{cfg: cfg, log: log, e: e}
	store, err := openStore(ctx, cfg.Memory, cfg.Trace, slog.New(slog.DiscardHandler))
	if err != nil {
		return p, err
	}
	p.store = store
	p.closers = append(p.closers, func() { _ = store.Close() })
	if p.lib, _, err = openConfiguredTemplates(cfg.Templates, templates.Options{Logger: log.With(slog.String(logComponent, "templates"))},
		func(level slog.Level, msg string) { log.Log(ctx, level, msg) }); err != nil { // #nosec G706 -- conclave's own message about its templates directory
		return p, err
	}
	if p.directory, err = ens.New(ensOptions(cfg.ENS, log), staticAgents(cfg.Agents)); err != nil {
		return p, err
	}
	p.closers = append(p.closers, func() { _ = p.directory.Close() })
	def, named := llmProfiles(cfg.LLM)
	if p.model, err = llm.New(def, named, llm.WithLogger(log.With(slog.String(logComponent, "llm"))),
		llm.WithHTTPClient(webClient(cfg.Conversation.MaxParallel))); err != nil {
		return p, err
	}
	if fake {
		p.model, err = fakeModel(cfg, p.model, p.directory)
		return p, err
	}
	warnMissingModelKeys(cfg, log)
	// The agents' MCP servers run as under `conclave run`.
	servers, err := mcpServers(cfg.MCP, e.getenv)
	if err != nil || len(servers) == 0 {
		return p, err
	}
	hub, err := tools.New(servers, tools.Options{Logger: log, HTTPClient: webClient(cfg.Conversation.MaxParallel), MaxResultBytes: cfg.Tools.MaxResultBytes})
	if err != nil {
		return p, err
	}
	p.closers = append(p.closers, startHub(ctx, hub))
	p.toolbox = hub
	return p, nil
}

// fakeModel is the built-in fake model of `chat --fake-model`: it names
// agents from the directory, finds experts' keys with their
// session_pattern, and takes its profiles from the configured ones, so
// requests are built as for the real endpoint.
func fakeModel(cfg Config, profiles agents.Profiles, directory *ens.Directory) (agents.Model, error) {
	patterns := map[string]string{}
	for name, s := range engineOptions(cfg, "").Agents {
		patterns[name] = s.SessionPattern
	}
	return fakemodel.New(fakemodel.Options{Profiles: profiles, Agents: directory.Resolve, Patterns: patterns})
}

// chatTerminal is the terminal transport of `conclave chat`; agents are
// named by their ENS records, else by their names' first label.
func chatTerminal(channel, person string, wait bool, e env, directory *ens.Directory, trace func(context.Context, io.Writer, string, bool) error) *terminal.Terminal {
	return terminal.New(terminal.Options{
		Channel: channel,
		Person:  person,
		Out:     e.stdout,
		Status:  e.stderr,
		Wait:    wait,
		Trace:   trace,
		Names: func(ctx context.Context, name string) string {
			if a, err := directory.Resolve(ctx, name); err == nil && a.Name != "" {
				return a.Name
			}
			first, _, _ := strings.Cut(name, ".")
			return first
		},
	})
}

// chatEngine is the engine of `conclave chat`, posting to the terminal.
func chatEngine(cfg Config, p *instance, term *terminal.Terminal) *agents.Engine {
	opts := engineOptions(cfg, "")
	opts.Owns = term.Owns // the store may be a running conclave's
	opts.Stream = false   // the terminal prints whole replies
	return agents.New(opts, onStore(p.store, agents.Deps{
		Chat:     term,
		Model:    term.Working(p.model),
		Prompts:  func() agents.Prompts { return p.lib.Current() },
		Resolver: p.directory,
		Logger:   p.log,
		Tools:    p.toolbox,
		Spending: p.store, // the budgets hold in a terminal conversation too
	}))
}

// chatUntilEOF runs the conversation until the input ends; the engine then
// drains its turns in flight, and the template watcher stops with it.
func chatUntilEOF(ctx context.Context, eng *agents.Engine, lib *templates.Library, term *terminal.Terminal, e env, log *slog.Logger) error {
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
	err := term.Run(ctx, e.stdin, eng)
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

// agentsToWrite lists the channel's agents with the names that call them
// (their full ENS names: a short name calls no one), one per line.
func agentsToWrite(list []agents.ChannelAgent) string {
	var b strings.Builder
	b.WriteString("To call an agent, write its full name:")
	for _, ca := range list {
		fmt.Fprintf(&b, "\n  %s  %s (%s)", ca.Agent.EnsDomain, ca.Agent.Name, ca.Agent.Role)
	}
	return b.String()
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
