// Command conclave runs a swarm of AI agents in Slack channels.
//
// Sub-commands:
//
//	conclave [run]              run the bot (the default)
//	conclave chat               talk with a channel's agents from the terminal
//	conclave templates check    check a config repository of prompts
//	conclave templates render   print exactly what the model would receive
//	conclave memory hydrate     load history into an agent's memory session
//	conclave tools list         list each agent's MCP tools
//	conclave healthcheck        exit 0 when the local bot answers /healthz
//	conclave version            print the version
//
// This package is the only place that reads flags, the environment and the
// configuration file; it wires the other packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], env{getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin})
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
	// ready, when set, receives the HTTP listener's address once serving.
	ready func(addr string)
}

// errUsage marks errors that should print the usage text.
var errUsage = errors.New("usage")

const usage = `Usage: conclave [command] [flags]

Commands:
  run                 run the bot (default)
  chat                talk with a channel's agents from the terminal, without Slack
  templates check     check a directory of prompt templates
  templates render    print the request the model would receive
  memory hydrate      append JSONL history to a memory session
  tools list          list each agent's MCP tools
  healthcheck         check the local bot's /healthz
  version             print the version

Run "conclave <command> -h" for a command's flags.
`

func runMain(ctx context.Context, args []string, e env) int {
	cmd := "run"
	if len(args) > 0 && !isFlag(args[0]) {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = runBot(ctx, args, e)
	case "chat":
		err = runChat(ctx, args, e)
	case "templates":
		err = runTemplates(ctx, args, e)
	case "memory":
		err = runMemory(ctx, args, e)
	case "tools":
		err = runTools(ctx, args, e)
	case "healthcheck":
		err = runHealthcheck(ctx, args, e)
	case "version":
		fmt.Fprintln(e.stdout, "conclave", versionString())
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, usage)
	default:
		fmt.Fprintf(e.stderr, "conclave: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
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

// errFailed is returned by commands that already reported why they
// failed (such as a templates check with findings).
var errFailed = errors.New("failed")

func isFlag(s string) bool { return len(s) > 0 && s[0] == '-' }

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
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
		inFile := cfg.applyEnv(e.getenv)
		if err := cfg.validate(); err != nil {
			return cfg, nil, err
		}
		return cfg, inFile, nil
	}
}
