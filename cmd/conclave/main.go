// Command conclave runs a swarm of AI agents in Slack channels.
//
// Sub-commands:
//
//	conclave [run]              run the bot (the default)
//	conclave chat               talk with a channel's agents from the terminal
//	conclave templates check    check a config repository of prompts
//	conclave templates render   print exactly what the model would receive
//	conclave templates test     run the repository's prompt tests (tests/*.chat)
//	conclave memory hydrate     load history into an agent's memory session
//	conclave memory list        list an agent's memory sessions
//	conclave memory show        print a memory session
//	conclave memory forget      remove a memory session and its traces
//	conclave tools list         list each agent's MCP tools
//	conclave config print       print the effective configuration
//	conclave healthcheck        exit 0 when the local bot answers /healthz
//	conclave version            print the version (also --version)
//
// This package is the only place that reads flags, the environment and the
// configuration file; it wires the other packages together.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/conclavehq/conclave/internal/fuzzy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], env{getenv: os.Getenv, environ: os.Environ, stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin})
	stop()
	os.Exit(code)
}

// env is what a sub-command may use of the process, so tests can run the
// real commands in-process.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	stdin  io.Reader
	// hup delivers reload requests (SIGHUP); nil means the process's own.
	hup <-chan os.Signal
	// ready, when set, receives the HTTP listener's address once serving;
	// opsReady the operations listener's (http.ops_addr), before ready.
	ready    func(addr string)
	opsReady func(addr string)
	// now, when set, is the identity cache's clock (a test drives it);
	// nil means the real one.
	now func() time.Time

	// environ lists the environment as NAME=value (os.Environ), for the
	// check of CONCLAVE_ names; nil checks none.
	environ func() []string
}

// errUsage marks errors that should print the usage text; errUsageShown
// usage errors already printed.
var (
	errUsage      = errors.New("usage")
	errUsageShown = errors.New("usage shown")
)

// command is one sub-command: its words ("templates check"), one line
// saying what it does, and what runs it with the arguments after its words.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, e env) error
}

// commands lists every sub-command, in the order help shows them (a
// function, not a variable: the commands' own flag sets read it).
func commands() []command {
	return []command{
		{"run", "run the bot (the default)", runBot},
		{"chat", "talk with a channel's agents from the terminal, without Slack", runChat},
		{"templates init", "start a config repository: the built-in prompts, a fixture, a test and CI", runTemplatesInit},
		{"templates check", "check a directory of prompt templates", runTemplatesCheck},
		{"templates render", "print the request the model would receive", runTemplatesRender},
		{"templates test", "run the conversations of tests/*.chat against a scripted model", runTemplatesTest},
		{"memory hydrate", "append JSONL history to a memory session", runHydrate},
		{"memory list", "list an agent's memory sessions: key, entries, size, last update", runMemoryList},
		{"memory show", "print a memory session's entries (memory show --agent A KEY)", runMemoryShow},
		{"memory forget", "remove a memory session, its index entries and its conversations' traces", runMemoryForget},
		{"trace", "print a conversation's turns from a Slack link: prompts, requests, tools, timings", runTrace},
		{"usage", "print the tokens, model calls and cost per person, channel, agent or model", runUsage},
		{"tools list", "list each agent's MCP tools", runToolsList},
		{"config print", "print the effective configuration, secrets masked", runConfigPrint},
		{"healthcheck", "check the local bot's /healthz (for container health checks)", runHealthcheck},
		{"version", "print the version, commit and Go version", runVersion},
		{"help", "print this help", nil},
	}
}

// usageOf lists the commands whose name starts with prefix.
func usageOf(prefix string) string {
	var b strings.Builder
	if prefix == "" {
		b.WriteString("conclave puts a swarm of AI agents into Slack channels.\n\nUsage: conclave [command] [flags]\n\nCommands:\n")
	} else {
		fmt.Fprintf(&b, "Usage: conclave %s<command> [flags]\n\nCommands:\n", prefix)
	}
	for _, c := range commands() {
		if strings.HasPrefix(c.name, prefix) {
			fmt.Fprintf(&b, "  %-18s  %s\n", c.name, c.summary)
		}
	}
	if prefix == "" {
		b.WriteString("\nFlags:\n  -h, --help          print this help\n  --version           print the version, commit and Go version\n")
	}
	b.WriteString("\nRun \"conclave <command> --help\" for a command's flags.\n")
	return b.String()
}

// findCommand picks the command named by the first words of args and
// returns the arguments left for it. A group word alone ("templates") or
// with an unknown second word gives the group's name and no command.
func findCommand(args []string) (cmd *command, group string, rest []string) {
	all := commands()
	if len(args) == 0 || isFlag(args[0]) {
		return &all[0], "", args
	}
	for i := range all {
		c := &all[i]
		words := strings.Fields(c.name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return c, "", args[len(words):]
		}
		if len(words) > 1 && words[0] == args[0] {
			group = words[0]
		}
	}
	return nil, group, args
}

func runMain(ctx context.Context, args []string, e env) int {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			args[0] = "help"
		case "-version", "--version":
			args[0] = "version"
		}
	}
	cmd, group, rest := findCommand(args)
	var err error
	if cmd != nil && cmd.name == "help" && len(rest) > 0 && !isFlag(rest[0]) && rest[0] != "help" {
		// "help <command>" is "<command> --help".
		return runMain(ctx, append(slices.Clone(rest), "--help"), e)
	}
	switch {
	case cmd != nil && cmd.name == "help":
		fmt.Fprint(e.stdout, usageOf(""))
	case cmd != nil:
		err = cmd.run(ctx, rest, e)
	case group != "" && (len(rest) == 1 || slices.Contains([]string{"help", "-h", "-help", "--help"}, rest[1])):
		fmt.Fprint(e.stdout, usageOf(group+" "))
	case group != "":
		fmt.Fprintf(e.stderr, "conclave: unknown %s command %q%s\n\n%s", group, rest[1], didYouMean(rest[:2]), usageOf(group+" "))
		return 2
	default:
		fmt.Fprintf(e.stderr, "conclave: unknown command %q%s\n\n%s", args[0], didYouMean(args[:1]), usageOf(""))
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsageShown):
		return 2
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.stderr, "conclave: %v\n", err)
		return 2
	case errors.Is(err, errFailed):
		return 1
	default:
		fmt.Fprintf(e.stderr, "conclave: %v\n", err)
		return 1
	}
}

// didYouMean suggests the command nearest to the words typed (" (did you
// mean templates?)"): for one word, the commands and groups; for a group
// and a second word, that group's commands. It is empty when none is
// near enough to be what was meant.
func didYouMean(words []string) string {
	var names []string
	for _, c := range commands() {
		w := strings.Fields(c.name)
		switch {
		case len(words) == 1:
			names = append(names, w[0])
		case len(w) == 2 && w[0] == words[0]:
			names = append(names, c.name)
		}
	}
	typed := strings.Join(words, " ")
	slices.Sort(names)
	near, d := fuzzy.Nearest(typed, slices.Compact(names))
	if d < 0 || d > max(2, len(words[len(words)-1])/3) {
		return ""
	}
	return " (did you mean " + near + "?)"
}

// errFailed is returned by commands that already reported why they
// failed (such as a templates check with findings).
var errFailed = errors.New("failed")

func isFlag(s string) bool { return len(s) > 0 && s[0] == '-' }

// newFlags is a sub-command's flag set; its usage names the command and
// says what it does.
func newFlags(name string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	summary := ""
	for _, c := range commands() {
		if c.name == name {
			summary = c.summary
		}
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: conclave %s [flags]\n\n%s.\n\nFlags:\n", name, strings.ToUpper(summary[:1])+summary[1:])
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; asked for help, it prints the usage on stdout
// and returns flag.ErrHelp (exit 0). Stray arguments are a usage error.
func parseFlags(fs *flag.FlagSet, args []string, e env) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return flag.ErrHelp
		}
	}
	if err := fs.Parse(args); err != nil {
		return errUsageShown // the flag package printed it and the usage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (see conclave %s --help)", errUsage, fs.Arg(0), fs.Name())
	}
	return nil
}

// Set at build time with -ldflags "-X main.version=… -X main.commit=…"
// (the Dockerfile does, as its build has no VCS information).
var (
	version = ""
	commit  = ""
)

// runVersion prints the version, commit and Go version.
func runVersion(_ context.Context, args []string, e env) error {
	if err := parseFlags(newFlags("version", e), args, e); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "conclave", versionString())
	return nil
}

// versionString is "v1.2.3 (commit abc1234, go1.26.0)": the version and
// commit stamped at build time, else what the Go build recorded.
func versionString() string {
	v, c := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		dirty := ""
		for _, s := range bi.Settings {
			switch {
			case c == "" && s.Key == "vcs.revision":
				c = s.Value[:min(12, len(s.Value))]
			case commit == "" && s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
		if c != "" {
			c += dirty
		}
	}
	return fmt.Sprintf("%s (commit %s, %s)", cmp.Or(v, "dev"), cmp.Or(c, "unknown"), runtime.Version())
}

// configFlag registers --config on fs and returns a function that loads
// the configuration it names: --config, else $CONCLAVE_CONFIG, else
// ./config.toml (which may be missing: embedded defaults).
func configFlag(fs *flag.FlagSet, e env) func() (Config, []string, error) {
	path := fs.String("config", "", "configuration file (default $CONCLAVE_CONFIG or ./config.toml)")
	return func() (Config, []string, error) {
		p, explicit := *path, *path != ""
		if !explicit {
			if v := e.getenv("CONCLAVE_CONFIG"); v != "" {
				p, explicit = v, true
			} else {
				p = "config.toml"
			}
		}
		cfg, err := loadConfig(p, explicit)
		if err != nil {
			return cfg, nil, err
		}
		if err := checkEnvNames(e.environ); err != nil {
			return cfg, nil, err
		}
		inFile := cfg.applyEnv(e.getenv)
		fromEnv, err := cfg.applyEnvKeys(e.getenv)
		if err != nil {
			return cfg, nil, err
		}
		if slices.Contains(fromEnv, "templates.dir") {
			cfg.Templates.SetBy, cfg.Templates.Explicit = envPrefix+"TEMPLATES_DIR", true
		}
		// A secret the environment replaced is not one left in the file.
		inFile = slices.DeleteFunc(inFile, func(k string) bool { return slices.Contains(fromEnv, k) })
		if err := cfg.validate(); err != nil {
			return cfg, nil, err
		}
		cfg.secretValues = cfg.secretValuesOf(e.getenv)
		return cfg, inFile, nil
	}
}
