package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// fixtureList collects repeated --fixture flags.
type fixtureList []string

func (f *fixtureList) String() string     { return strings.Join(*f, ",") }
func (f *fixtureList) Set(v string) error { *f = append(*f, v); return nil }

// runTemplatesCheck checks a config repository: errors as file:line:
// message on stdout and a non-zero exit; warnings do not fail unless
// --strict. What is left out as not part of the layout is noted on
// stderr.
func runTemplatesCheck(_ context.Context, args []string, e env) error {
	fs := newFlags("templates check", e)
	load := configFlag(fs, e) // its templates.dir and [templates.vars]
	dir := fs.String("dir", "", templatesDirUsage)
	strict := fs.Bool("strict", false, "fail on warnings too (an unknown field, a value that renders <no value>)")
	var fixtures fixtureList
	fs.Var(&fixtures, "fixture", "a JSON fixture to render with (repeatable; default: the built-in one)")
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	repo, err := existingTemplatesDir(templatesDir(cfg, *dir))
	if err != nil {
		return err
	}
	opts := templates.CheckOptions{Vars: cfg.Templates.Vars}
	for _, path := range fixtures {
		f, err := templates.LoadFixture(path)
		if err != nil {
			return err
		}
		opts.Fixtures = append(opts.Fixtures, f)
	}
	report := templates.Check(repo, opts)
	for _, p := range report.Notes {
		fmt.Fprintln(e.stderr, "note: "+p.String())
	}
	for _, p := range report.Errors {
		fmt.Fprintln(e.stdout, p.String())
	}
	warning := "warning: "
	if *strict {
		warning = "error (--strict): "
	}
	for _, p := range report.Warnings {
		fmt.Fprintln(e.stdout, warning+p.String())
	}
	if *strict && len(report.Warnings) > 0 {
		fmt.Fprintf(e.stderr, "templates check: %d error(s), %d warning(s), failed by --strict\n", len(report.Errors), len(report.Warnings))
		return errFailed
	}
	if !report.OK() {
		fmt.Fprintf(e.stderr, "templates check: %d error(s), %d warning(s)\n", len(report.Errors), len(report.Warnings))
		return errFailed
	}
	fmt.Fprintf(e.stderr, "templates check: ok (%d warning(s))\n", len(report.Warnings))
	return nil
}

// runTemplatesRender prints the request body conclave would send for one
// prompt of one agent, rendered against a fixture.
func runTemplatesRender(ctx context.Context, args []string, e env) error {
	fs := newFlags("templates render", e)
	load := configFlag(fs, e)
	dir := fs.String("dir", "", templatesDirUsage)
	agentName := fs.String("agent", "", "the agent's ENS name (required)")
	prompt := fs.String("prompt", "", "the phase prompt: default, conclude, context-not-found or context-found (required)")
	fixturePath := fs.String("fixture", "", "a JSON fixture (default: the built-in one)")
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	if *agentName == "" || *prompt == "" {
		return fmt.Errorf("%w: templates render needs --agent and --prompt (see conclave templates render --help)", errUsage)
	}
	if *prompt == templates.PromptSystem {
		return fmt.Errorf("%w: the system prompt is part of every request; name the phase prompt (default, conclude, context-not-found, context-found)", errUsage)
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	tc := templatesDir(cfg, *dir)
	agent, fixture, err := renderSubject(ctx, cfg, *agentName, *fixturePath)
	if err != nil {
		return err
	}
	fixture.Data.Vars = withVars(cfg.Templates.Vars, fixture.Data.Vars)
	lib, _, err := openConfiguredTemplates(tc, templates.Options{Clock: templates.FixedClock},
		func(level slog.Level, msg string) {
			if level >= slog.LevelWarn {
				msg = "warning: " + msg
			}
			fmt.Fprintln(e.stderr, msg)
		})
	if err != nil {
		return err
	}
	return printRenderedRequest(cfg, lib.Current(), agent, *prompt, fixture, e)
}

// renderSubject is the agent templates render renders for and the fixture
// it renders with: the one given (path), else the built-in one of the
// agent's role.
func renderSubject(ctx context.Context, cfg Config, name, path string) (ens.Agent, templates.Fixture, error) {
	var fixture templates.Fixture
	if path != "" {
		var err error
		if fixture, err = templates.LoadFixture(path); err != nil {
			return ens.Agent{}, fixture, err
		}
	}
	dir, err := ens.New(ensOptions(cfg.ENS, nil), staticAgents(cfg.Agents))
	if err != nil {
		return ens.Agent{}, fixture, err
	}
	defer dir.Close()
	agent, err := renderAgent(ctx, dir, name, fixture)
	if err != nil {
		return ens.Agent{}, fixture, err
	}
	if path == "" {
		fixture = templates.BuiltinFixtureFor(string(agent.Role))
	}
	// A clone stands for its own human, not the fixture's.
	if agent.Role == ens.RoleClone && agent.CloneOf != "" {
		if human, err := renderAgent(ctx, dir, agent.CloneOf, templates.Fixture{}); err == nil {
			fixture.Data.CloneOf = templates.Agent(templates.AgentInfo{Name: human.Name, EnsDomain: human.EnsDomain,
				Owner: human.Owner, Addresses: human.Addresses, Attributes: human.Attributes})
		}
	}
	return agent, fixture, nil
}

// printRenderedRequest builds the request a turn of agent in the prompt's
// phase would send, with set's templates, and prints it: the endpoint and
// budget on stderr, the body, indented for reading, on stdout.
func printRenderedRequest(cfg Config, set *templates.Set, agent ens.Agent, prompt string, fixture templates.Fixture, e env) error {
	def, named := llmProfiles(cfg.LLM)
	client, err := llm.New(def, named)
	if err != nil {
		return err
	}
	// The profile and budgets a turn of this agent gets, read from the
	// engine's own options.
	opts := engineOptions(cfg, "")
	tp := agents.FixturePrompt(agent, prompt, fixture)
	tp.Data.ChannelMembers[0] = agents.TemplateMember(agent, &opts) // with its session_pattern
	tp.AgentProfile = opts.Agents[agent.EnsDomain].LLMProfile
	tp.MaxInputTokens = opts.MaxInputTokens
	tp.MaxMessageChars = opts.MaxMessageChars
	req, info, err := agents.BuildRequest(set, client, tp)
	if err != nil {
		return err
	}
	url, body, err := client.RequestBody(req)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "POST %s (profile %q, ~%d of %d input tokens, %d history message(s) cut)\n",
		url, cmp.Or(req.Profile, "default"), info.Tokens, info.Budget, info.Dropped)
	if commit := set.Commit(); commit != "" {
		fmt.Fprintf(e.stderr, "prompts of commit %s\n", commit)
	}
	for _, w := range info.Warnings {
		fmt.Fprintln(e.stderr, "warning: "+w)
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", body)
	return err
}

// renderAgent finds the agent to render for in dir: the static agents,
// else the chain (when configured), else — for a name no resolver knows —
// an agent with the fixture's role, so authors can render before minting.
func renderAgent(ctx context.Context, dir *ens.Directory, name string, f templates.Fixture) (ens.Agent, error) {
	a, err := dir.Resolve(ctx, name)
	switch {
	case err == nil:
		return a, nil
	case errors.Is(err, ens.ErrNotFound) || errors.Is(err, ens.ErrNoRPC):
		if f.Role == "" {
			return ens.Agent{}, fmt.Errorf("%w (declare it in [[agents]], or give a --fixture with a role)", err)
		}
		n, perr := dir.Names().Parse(name)
		if perr != nil {
			return ens.Agent{}, perr
		}
		role := ens.ParseRole(f.Role)
		return ens.Agent{
			Name: n.FirstLabel(), EnsDomain: n.Canonical, Role: role,
			Attributes: map[string]string{"role": string(role)},
		}, nil
	default:
		return ens.Agent{}, err
	}
}

// withVars is the configuration's operator variables under a fixture's
// own: a fixture may set or change some for a render.
func withVars(configured, fixture map[string]string) map[string]string {
	if len(configured) == 0 {
		return fixture
	}
	out := maps.Clone(configured)
	maps.Copy(out, fixture)
	return out
}
