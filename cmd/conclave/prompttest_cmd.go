package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/cmd/internal/prompttest"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// runTemplatesTest is `conclave templates test`: the config repository's
// tests/*.chat conversations, played through the engine against a
// scripted model, each request compared with its golden file.
func runTemplatesTest(ctx context.Context, args []string, e env) error {
	f, err := parseTemplatesTest(args, e)
	if err != nil {
		return err
	}
	cfg, _, err := f.load()
	if err != nil {
		return configError{err}
	}
	dir, channel, err := f.target(cfg)
	if err != nil {
		return err
	}
	lib, _, err := openTemplates(dir, templates.Options{Clock: templates.FixedClock}, func(string) {})
	if err != nil {
		return configError{err}
	}
	def, named := llmProfiles(cfg.LLM)
	profiles, err := llm.New(def, named)
	if err != nil {
		return configError{err}
	}
	static := staticAgents(cfg.Agents)
	directory, err := configuredDirectory(cfg, static)
	if err != nil {
		return configError{err}
	}
	defer directory.Close()
	o := prompttest.Options{
		Dir: dir, Channel: channel, Agents: static, Profiles: profiles,
		Now: templates.FixedClock, Update: f.update, Verbose: f.verbose, Out: e.stdout,
		Start: func(p prompttest.Ports) (prompttest.Wiring, error) {
			return testEngine(cfg, p, lib.Current(), directory), nil
		},
	}
	if f.live {
		if f.update {
			return fmt.Errorf("%w: --live writes no golden files; drop -update", errUsage)
		}
		o.Live = &prompttest.Live{Model: profiles, JudgeProfile: cfg.Templates.JudgeProfile}
		o.StepTimeout = liveStepTimeout
	}
	return testsOutcome(prompttest.Run(ctx, o))
}

// templatesTestFlags are what `conclave templates test` was given.
type templatesTestFlags struct {
	load                  func() (Config, []string, error)
	dir, arg, channel     string // --dir, the argument after the flags, --channel
	update, verbose, live bool
}

// parseTemplatesTest reads the flags of `conclave templates test`.
func parseTemplatesTest(args []string, e env) (templatesTestFlags, error) {
	fs, load, dir := dirFlags("templates test",
		"An argument after the flags names the templates directory, as --dir does (default: templates.dir of the configuration).", e)
	channel := fs.String("channel", "", "the channel the conversations are held in (default: the first [[channels]])")
	update := fs.Bool("update", false, "write the golden files (and remove those no request matches) instead of comparing")
	verbose := fs.Bool("v", false, "print every conversation, not only a failed one's")
	live := fs.Bool("live", false, "play the conversations against the configured model: check the \"?\" assertions, not the scripted replies and golden files")
	arg, err := parseFlagsDir(fs, args, e)
	if err != nil {
		return templatesTestFlags{}, err
	}
	return templatesTestFlags{load: load, dir: *dir, arg: arg, channel: *channel, update: *update, verbose: *verbose, live: *live}, nil
}

// target is the templates directory the tests are read from and the
// channel they are held in (default: the first of cfg's), which must
// declare agents: a test's store starts empty, so the channel's agents
// are those the configuration declares.
func (f templatesTestFlags) target(cfg Config) (dir, channel string, err error) {
	flagDir, err := dirOrArgument(f.dir, f.arg)
	if err != nil {
		return "", "", err
	}
	dir, err = existingTemplatesDir(templatesDir(cfg, flagDir))
	if err != nil {
		return "", "", configError{err}
	}
	channel = f.channel
	if channel == "" {
		if len(cfg.Channels) == 0 {
			return "", "", fmt.Errorf("%w: no channel: pass --channel or declare one in [[channels]]", errUsage)
		}
		channel = cfg.Channels[0].ID
	}
	if i := slices.IndexFunc(cfg.Channels, func(c ChannelConfig) bool { return c.ID == channel }); i < 0 || len(cfg.Channels[i].Agents) == 0 {
		return "", "", fmt.Errorf("%w: channel %q has no agents: declare them in its [[channels]] entry", errUsage, channel)
	}
	return dir, channel, nil
}

// configuredDirectory resolves the configured agents only: the chain is
// never asked, so a test needs no network.
func configuredDirectory(cfg Config, static []ens.Agent) (*ens.Directory, error) {
	opts := ensOptions(cfg.ENS, nil)
	opts.Chains, opts.MainnetRPCURL = nil, ""
	return ens.New(opts, static)
}

// testsOutcome is the command's result for the tests' summary: a usage
// error when there were none, errFailed when one failed.
func testsOutcome(sum prompttest.Summary, err error) error {
	switch {
	case errors.Is(err, prompttest.ErrNoTests):
		return fmt.Errorf("%w: %v (write a conversation there, see docs/authoring.md)", errUsage, err)
	case err != nil:
		return err
	case sum.Failed > 0:
		return errFailed
	}
	return nil
}

// liveStepTimeout bounds the wait for the agents after a person's line
// when a real model answers: several turns, each with retries.
const liveStepTimeout = 5 * time.Minute

// testEngine is the engine of one prompt test: the configured agents,
// conversation rules and prompts, over an in-process store of its own and
// a fixed clock, with no tools.
func testEngine(cfg Config, p prompttest.Ports, prompts agents.Prompts, directory *ens.Directory) prompttest.Wiring {
	store := memory.NewInProcess(memory.Options{MaxSessionMessages: cfg.Memory.MaxSessionMessages, ConversationTTL: cfg.Memory.ConversationTTL.Duration})
	opts := engineOptions(cfg, "")
	opts.Owns = p.Owns
	opts.Stream = false // the scripted model answers whole
	eng := agents.New(opts, onStore(store, agents.Deps{
		Chat:     p.Chat,
		Model:    p.Model,
		Prompts:  func() agents.Prompts { return prompts },
		Resolver: directory,
		Logger:   newLogger(LogConfig{Level: "warn", Format: "text"}, p.Log),
		Now:      templates.FixedClock,
	}))
	return prompttest.Wiring{
		Engine: eng,
		Pair: func(ctx context.Context, userID, agent string) error {
			_, _, err := store.PairHuman(ctx, userID, agent)
			return err
		},
		Close: func() { _ = store.Close() },
	}
}

// parseFlagsDir is parseFlags with one argument allowed after the flags:
// the directory ("" when absent).
func parseFlagsDir(fs *flag.FlagSet, args []string, e env) (string, error) {
	err := parseFlags(fs, args, e)
	if errors.Is(err, errUsage) && fs.NArg() == 1 {
		return fs.Arg(0), nil
	}
	return "", err
}

// configError is a configuration that cannot be used: its message as it
// is, and the exit code of a usage error (2).
type configError struct{ err error }

func (c configError) Error() string        { return c.err.Error() }
func (c configError) Unwrap() error        { return c.err }
func (c configError) Is(target error) bool { return target == errUsage }
