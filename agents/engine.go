package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/redact"
	"github.com/conclavehq/conclave/memory"
)

// Start policies of a channel.
const (
	StartAll     = conversation.StartAll     // every top-level message by a person starts a conversation
	StartMention = conversation.StartMention // only a top-level message naming an agent does
)

// Session policies: may an expert create a new memory session?
const (
	SessionAny     = turn.SessionAny
	SessionPattern = turn.SessionPattern // only keys fully matching SessionPattern
	SessionNever   = turn.SessionNever
)

// Session scopes of experts' memory.
const (
	ScopeAgent   = "agent"   // an expert's sessions follow it across channels
	ScopeChannel = "channel" // kept per channel
	// ScopeWorkspace lets a clone's and a human agent's memory follow them
	// across channels (memory.clone_scope); ScopeChannel keeps it per
	// channel, so that a private channel's words never reach another's.
	ScopeWorkspace = "workspace"
)

// doneReaction marks a concluded conversation's root (✅).
const doneReaction = "white_check_mark"

// Where failures are reported.
const (
	NotifyThread = "thread" // a ⚠️ notice in the thread
	NotifyLog    = "log"    // only logged
)

// ChannelConfig is a channel declared in the configuration.
type ChannelConfig struct {
	ID     string
	Agents []string // ENS names, in configuration order
	Start  string   // StartAll (default) or StartMention
	// DailyTokens is the channel's daily token budget, over
	// Budgets.PerChannel (0: that one).
	DailyTokens int64
}

// AgentSettings are per-agent settings from the configuration.
type AgentSettings struct {
	LLMProfile     string
	SessionPolicy  string   // SessionAny (default), SessionPattern, SessionNever
	SessionPattern string   // RE2, matched against the whole key
	Tools          []string // MCP tools: "server" or "server/tool"
}

// Options mirror the configuration. DefaultOptions holds the default of
// each; New takes the default for any option left zero, except where zero
// means off.
type Options struct {
	Timeout          time.Duration // conversation.timeout; 0 turns the inactivity conclusion off
	CallTimeout      time.Duration // conversation.call_timeout
	MaxTurns         int           // conversation.max_turns
	MaxTurnsPerAgent int           // conversation.max_turns_per_agent
	MaxParallel      int           // conversation.max_parallel
	// ComputeWorkers bounds the workers computing at once (see
	// Engine.cpu); 0 is two per core, a negative value no bound.
	ComputeWorkers  int
	MaxMessageChars int // conversation.max_message_chars
	MaxQueued       int // conversation.max_queued: turns waiting per conversation
	MaxInputTokens  int // llm.max_input_tokens: the input budget when no prompt or profile sets one
	MaxToolRounds   int // llm.max_tool_rounds
	// MaxToolCallsPerRound bounds the tool calls run in one round
	// (llm.max_tool_calls_per_round); the rest get an error result.
	MaxToolCallsPerRound int

	MatchThreshold float64 // expert.match_threshold
	SessionScope   string  // expert.session_scope: ScopeAgent or ScopeChannel
	CloneScope     string  // memory.clone_scope: ScopeChannel (default) or ScopeWorkspace

	Notify string // errors.notify: NotifyThread or NotifyLog
	// PostRetryWindow is how long a failed post is retried, from its
	// first attempt (slack.post_retry_window).
	PostRetryWindow time.Duration
	// TurnTimeout bounds the model calls of one turn together (`conclave
	// run`: three times the longest llm total_timeout, for a threading
	// turn's calls); PostTimeout bounds one attempt of a post, all its
	// parts and the look-up before it (`conclave run`: six times
	// slack.timeout). Past them the turn fails with a ⚠️ notice, the post
	// is retried.
	TurnTimeout     time.Duration
	PostTimeout     time.Duration
	WorkingReaction string // slack.working_reaction

	// TemplateVars are the operator's variables every template reads as
	// .Vars ([templates.vars]).
	TemplateVars map[string]string

	Channels    []ChannelConfig
	Agents      map[string]AgentSettings // by ENS name
	BotUserID   string                   // conclave's own Slack user
	BaseDomains []string                 // ens.base_domains; the first is canonical

	// DirectChannel (slack.dm_channel), when set, names the configured
	// channel whose agents hold the conversations of direct messages
	// (channels "D…"): its roster, start rule, description and memory
	// scopes are theirs, and a direct message in a thread conclave does
	// not know starts a conversation.
	DirectChannel string

	ShutdownGrace time.Duration // shutdown_grace: time for in-flight turns after Run's context ends
	LockTTL       time.Duration // per-conversation lock, renewed while a turn runs
	SweepInterval time.Duration // how often Due is polled

	// Stream shows plain-text replies while they are written
	// (slack.stream); StreamInterval spaces their updates
	// (slack.stream_interval).
	Stream         bool
	StreamInterval time.Duration

	// Traces writes a trace of every turn with the commit that ends it
	// (trace.enabled); Replica names this process in them.
	Traces  bool
	Replica string
	// TraceEntryMaxBytes bounds one encoded trace (0: no bound): its
	// largest fields are cut, with a mark, to fit, so that the store's
	// per-conversation bound (trace.max_bytes_per_conversation) holds for
	// the newest entry too.
	TraceEntryMaxBytes int
	// Feedback says which posts carry 👍/👎 buttons (slack.feedback:
	// FeedbackAnswers, FeedbackAll, FeedbackOff; "" is off).
	Feedback string
	// Mask masks the configured secrets (API keys, tokens, headers'
	// values, credentials in URLs) in everything a turn sends out: posts,
	// stored messages, traces, spans and debug logs of a request's body.
	// Nil masks nothing.
	Mask *redact.Masker

	// Prices are the models' prices, by model name (llm.prices): a turn's
	// usage and trace carry its cost when its model has one. Budgets are
	// the daily token budgets, checked before a turn starts
	// (Deps.Spending reads the counters).
	Prices  map[string]Price
	Budgets Budgets

	// Owns, when set, limits the conversations the sweeper hands to
	// workers to those it accepts: `conclave chat` may share the store of
	// a running conclave and must leave its conversations alone.
	Owns func(conversationID string) bool
}

// DefaultOptions are the engine's defaults: the one place each is
// written. The configuration's defaults for the engine's keys are read
// from here (cmd/conclave), and New takes them for options left zero.
// The conversation timeout is on by default, but a zero Timeout passed to
// New stays off.
func DefaultOptions() Options {
	return Options{
		Timeout:          10 * time.Minute,
		CallTimeout:      3 * time.Minute,
		MaxTurns:         40,
		MaxTurnsPerAgent: 10,
		MaxParallel:      8,
		MaxMessageChars:  12000,
		MaxQueued:        100,
		MaxInputTokens:   turn.DefaultMaxInputTokens,
		MaxToolRounds:    8,
		MatchThreshold:   0.75,
		SessionScope:     ScopeAgent,
		CloneScope:       ScopeChannel,
		Notify:           NotifyThread,
		PostRetryWindow:  30 * time.Minute,
		TurnTimeout:      10 * time.Minute,
		PostTimeout:      time.Minute,
		WorkingReaction:  "hourglass_flowing_sand",
		BaseDomains:      slices.Clone(ens.DefaultBaseDomains),
		ShutdownGrace:    15 * time.Second,
		LockTTL:          30 * time.Second,
		SweepInterval:    time.Second,
		StreamInterval:   time.Second,
		Traces:           true,

		MaxToolCallsPerRound: 8,
	}
}

// Deps are the engine's collaborators.
type Deps struct {
	// The store's ports, each passed on its own (ports.go);
	// memory.InProcess and memory.Redis satisfy them all.
	Inbound       Inbound       // recording events (Record)
	Conversations Conversations // a turn's load and commits
	Locks         Locks         // a conversation's lock, kept and given back
	Sessions      Sessions      // the memory sessions a turn reads
	Registry      Registry      // the agents added to channels at run time
	Pairings      Pairings      // who is paired with whom

	Chat     Chat
	Model    Model
	Prompts  func() Prompts // the current prompt set; called once per turn
	Resolver Resolver
	Tools    Toolbox            // nil: agents have no tools
	Logger   *slog.Logger       // nil: discard
	Now      func() time.Time   // nil: time.Now
	OnTurn   func(r TurnReport) // optional: metrics, called after each turn
	// Working, optional, is told when turns start and end (a thread's
	// status while agents work).
	Working Working
	// Traces, optional, keeps the feedback people give (RecordFeedback);
	// OnFeedback, optional (metrics), is called for each press recorded.
	Traces TraceLog
	// previous is the person's earlier rating of the turn ("" for none);
	// a press repeating it is not reported.
	OnFeedback func(agent, role, value, previous string)
	// Tracer, optional, receives each turn's OpenTelemetry spans
	// (otel.go); CaptureContent puts prompts, replies and tool
	// arguments and results in them.
	Tracer         trace.Tracer
	CaptureContent bool
	// OnPostAbandoned, optional (metrics), is called for each post given
	// up (a permanent error, or its retry window over).
	OnPostAbandoned func()
	// Jitter, optional, draws the jitter of post retries, in [0, 1]
	// (default: math/rand).
	Jitter func() float64
	// Spending, optional, reads today's usage counters for the daily
	// budgets (none are checked without it); OnBudget, optional
	// (metrics), is called with each budget's used share as a turn's
	// start finds it.
	Spending Spending
	OnBudget func(scope string, ratio float64)
	// StreamTicker, optional, ticks every d while a reply is streamed
	// (default: time.NewTicker); it returns the ticks and a stop.
	StreamTicker func(d time.Duration) (<-chan time.Time, func())
}

// Resolver turns an agent name into an identity (an ens resolver chain).
type Resolver interface {
	// Resolve returns the identity behind name; errors wrap ens.ErrNotFound
	// when nobody knows it.
	Resolve(ctx context.Context, name string) (ens.Agent, error)
}

// TurnReport describes one turn, for logs and metrics (turn.Report).
type TurnReport = turn.Report

// Errors of the run-time registry.
var (
	ErrAgentPresent      = errors.New("agent already in this channel")
	ErrAgentAbsent       = errors.New("agent not in this channel")
	ErrStaticAgent       = errors.New("agent declared in the configuration")
	ErrSecondFacilitator = errors.New("channel already has a facilitator")
)

// Engine runs conversations. Build it with New; feed it events with Record
// and run its workers with Run.
type Engine struct {
	opts   Options
	deps   Deps
	log    *slog.Logger
	naming // how agents are named: base domains, the configuration's channels
	// turns runs a conversation's turns (given its log and place per
	// conversation); tracer finishes their traces.
	turns  turn.Runner
	tracer turnTracer

	nudge chan struct{}
	ready chan task // conversations this replica just recorded a message of

	reactions *reactor

	// The store's ports (Deps), as each part uses them: recording, the
	// workers' load and commits, their locks, the sessions a turn reads,
	// the channels' run-time agents, pairings.
	inbound  Inbound
	convs    Conversations
	locks    Locks
	sessions Sessions
	registry Registry
	pairings Pairings

	workers *workers // the conversations local workers are on
	// cpu bounds the workers computing at once, two per core: a worker
	// holds a token while it works on a conversation and gives it back
	// while it waits on the model, a Slack post, tools or an identity
	// (cpuTokens.off). Without it a hundred turns in flight are a hundred
	// runnable goroutines, and each step of recording and acknowledging
	// an event (socket read, store round trip, ack write) waits behind
	// them all. Nil when Options.ComputeWorkers is negative: no bound.
	cpu     cpuTokens
	budgets *budgetKeeper // the daily budgets
}

// New returns an engine; it starts nothing.
func New(opts Options, deps Deps) *Engine {
	opts = withDefaults(opts)
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Jitter == nil {
		deps.Jitter = rand.Float64
	}
	e := &Engine{
		deps:     deps,
		log:      deps.Logger.With(slog.String("component", "agents")),
		naming:   naming{static: make(map[string]ChannelConfig)},
		nudge:    make(chan struct{}, 1),
		ready:    make(chan task, 256),
		workers:  newWorkers(),
		inbound:  deps.Inbound,
		convs:    deps.Conversations,
		locks:    deps.Locks,
		sessions: deps.Sessions,
		registry: deps.Registry,
		pairings: deps.Pairings,
	}
	switch {
	case opts.ComputeWorkers == 0:
		e.cpu = make(cpuTokens, 2*runtime.GOMAXPROCS(0))
	case opts.ComputeWorkers > 0:
		e.cpu = make(cpuTokens, opts.ComputeWorkers)
	}
	e.reactions = newReactor(deps.Chat, e.log, opts.MaxParallel)
	bases := make([]string, len(opts.BaseDomains)) // the caller's slice stays as it is
	for i, b := range opts.BaseDomains {
		bases[i] = strings.ToLower(strings.Trim(b, ". "))
	}
	opts.BaseDomains = bases
	e.bases = bases
	e.opts = opts
	e.budgets = newBudgetKeeper(&e.opts, &e.deps)
	var agentCfg map[string]turn.AgentConfig
	e.opts.Agents, agentCfg = agentSettings(opts.Agents, e.naming, e.log)
	for _, c := range opts.Channels {
		e.static[c.ID] = canonicalChannel(c, e.canonical)
	}
	e.turns = turn.Runner{
		Model: deps.Model, Prompts: deps.Prompts, Tools: deps.Tools, Config: turnConfig(&e.opts, agentCfg, deps.Tracer != nil),
		Now: deps.Now, Off: e.cpu.off, Ticker: deps.StreamTicker, Log: e.log,
	}
	e.tracer = turnTracer{opts: &e.opts, deps: tracePorts{Tracer: deps.Tracer, CaptureContent: deps.CaptureContent}, log: e.log}
	return e
}

// turnConfig is what a turn reads of the options: agents are their
// settings as a turn reads them, spans says whether spans are sent (a
// turn then builds its trace even when none is kept).
func turnConfig(o *Options, agents map[string]turn.AgentConfig, spans bool) *turn.Config {
	return &turn.Config{
		Timeout: o.TurnTimeout, MaxToolRounds: o.MaxToolRounds, MaxToolCallsPerRound: o.MaxToolCallsPerRound,
		MaxMessageChars: o.MaxMessageChars, MaxInputTokens: o.MaxInputTokens, MatchThreshold: o.MatchThreshold,
		Stream: o.Stream, StreamInterval: o.StreamInterval, Mask: o.Mask, Vars: o.TemplateVars, BotUserID: o.BotUserID,
		Prices: o.Prices, Trace: o.Traces || spans, Replica: o.Replica, Agents: agents,
	}
}

// withDefaults takes DefaultOptions for the options left zero (negative
// counts and durations too), so that a zero value never means no worker,
// no lock lease or no turn. Timeout is left as it is: zero turns the
// inactivity conclusion off.
func withDefaults(opts Options) Options {
	d := DefaultOptions()
	orDefault(&opts.CallTimeout, d.CallTimeout)
	orDefault(&opts.MaxTurns, d.MaxTurns)
	orDefault(&opts.MaxTurnsPerAgent, d.MaxTurnsPerAgent)
	orDefault(&opts.MaxParallel, d.MaxParallel)
	orDefault(&opts.MaxMessageChars, d.MaxMessageChars)
	orDefault(&opts.MaxQueued, d.MaxQueued)
	orDefault(&opts.MaxInputTokens, d.MaxInputTokens)
	orDefault(&opts.MaxToolRounds, d.MaxToolRounds)
	orDefault(&opts.MaxToolCallsPerRound, d.MaxToolCallsPerRound)
	orDefault(&opts.MatchThreshold, d.MatchThreshold)
	orDefault(&opts.PostRetryWindow, d.PostRetryWindow)
	orDefault(&opts.TurnTimeout, d.TurnTimeout)
	orDefault(&opts.PostTimeout, d.PostTimeout)
	orDefault(&opts.ShutdownGrace, d.ShutdownGrace)
	orDefault(&opts.LockTTL, d.LockTTL)
	orDefault(&opts.SweepInterval, d.SweepInterval)
	orDefault(&opts.StreamInterval, d.StreamInterval)
	opts.SessionScope = cmp.Or(opts.SessionScope, d.SessionScope)
	opts.CloneScope = cmp.Or(opts.CloneScope, d.CloneScope)
	opts.Notify = cmp.Or(opts.Notify, d.Notify)
	opts.WorkingReaction = cmp.Or(opts.WorkingReaction, d.WorkingReaction)
	if len(opts.BaseDomains) == 0 {
		opts.BaseDomains = d.BaseDomains
	}
	return opts
}

// orDefault sets *v to d when it is zero or negative.
func orDefault[T int | float64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// agentSettings keys the agents' settings by canonical name, and gives
// them as a turn reads them, their session patterns compiled; an invalid
// pattern is logged and its agent creates no session.
func agentSettings(in map[string]AgentSettings, n naming, log *slog.Logger) (map[string]AgentSettings, map[string]turn.AgentConfig) {
	out := make(map[string]AgentSettings, len(in))
	cfg := make(map[string]turn.AgentConfig, len(in))
	for name, s := range in {
		name = n.canonical(name)
		out[name] = s
		a := turn.AgentConfig{Profile: s.LLMProfile, Tools: s.Tools, SessionPolicy: s.SessionPolicy, SessionPattern: s.SessionPattern}
		if s.SessionPolicy == SessionPattern {
			re, err := regexp.Compile(`^(?:` + s.SessionPattern + `)$`)
			if err != nil {
				log.Error("invalid session_pattern; the agent creates no session", slog.String(logAgent, name), slog.Any(logError, err))
			}
			a.Pattern = re
		}
		cfg[name] = a
	}
	return out, cfg
}

// canonicalChannel is a configured channel with its agents canonical,
// each once, and its start policy set.
func canonicalChannel(c ChannelConfig, canonical func(string) string) ChannelConfig {
	names := make([]string, 0, len(c.Agents))
	for _, n := range c.Agents {
		if n = canonical(n); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	c.Agents = names
	if c.Start == "" {
		c.Start = StartAll
	}
	return c
}

// Log attribute keys.
const (
	logConversation = "conversation"
	logChannel      = "channel"
	logAgent        = "agent"
	logRole         = "role"
	logPhase        = "phase"
	logOutcome      = "outcome"
	logTurn         = "turn"
	logPost         = "post"
	logError        = "error"
)

func (e *Engine) now() time.Time { return e.deps.Now() }

// jitter draws the jitter of a post retry's backoff.
func (e *Engine) jitter() float64 { return e.deps.Jitter() }

// registeredNames lists a channel's agents: the configuration's, then
// those added at run time, canonical and without duplicates.
func (e *Engine) registeredNames(ctx context.Context, channel string) ([]string, error) {
	added, err := e.registry.ChannelAgents(ctx, channel)
	if err != nil {
		return nil, fmt.Errorf("agents: list agents of %s: %w", channel, err)
	}
	return e.channelNames(channel, added), nil
}

// ChannelAgent is an agent registered in a channel.
type ChannelAgent struct {
	Agent  ens.Agent
	Static bool  // declared in the configuration (cannot be removed at run time)
	Err    error // the identity could not be resolved (Agent then holds only EnsDomain)
}

// ChannelAgents lists a channel's agents in the order /list-agents shows
// them: facilitator, experts, clones, humans, then by ENS name.
func (e *Engine) ChannelAgents(ctx context.Context, channel string) ([]ChannelAgent, error) {
	names, err := e.registeredNames(ctx, channel)
	if err != nil {
		return nil, err
	}
	out := make([]ChannelAgent, 0, len(names))
	for _, n := range names {
		a, err := e.resolve(ctx, n)
		out = append(out, ChannelAgent{Agent: a, Static: e.isStatic(channel, n), Err: err})
	}
	rank := map[ens.Role]int{ens.RoleFacilitator: 0, ens.RoleExpert: 1, ens.RoleClone: 2, ens.RoleHuman: 3}
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := rank[out[i].Agent.Role], rank[out[j].Agent.Role]
		if ri != rj {
			return ri < rj
		}
		return out[i].Agent.EnsDomain < out[j].Agent.EnsDomain
	})
	return out, nil
}

// AddAgent registers an agent in a channel at run time. It resolves the
// name first; ErrAgentPresent when it is already there, ErrSecondFacilitator
// when it is a facilitator and the channel has one.
func (e *Engine) AddAgent(ctx context.Context, channel, name string) (ens.Agent, error) {
	name = e.canonical(name)
	a, err := e.resolve(ctx, name)
	if err != nil {
		return ens.Agent{}, err
	}
	names, err := e.registeredNames(ctx, channel)
	if err != nil {
		return a, err
	}
	if slices.Contains(names, name) {
		return a, fmt.Errorf("agents: add %s: %w", name, ErrAgentPresent)
	}
	if a.Role == ens.RoleFacilitator {
		for _, n := range names {
			other, err := e.resolve(ctx, n)
			if err == nil && other.Role == ens.RoleFacilitator {
				return a, fmt.Errorf("agents: add %s: %w (%s)", name, ErrSecondFacilitator, n)
			}
		}
	}
	added, err := e.registry.AddChannelAgent(ctx, channel, name)
	if err != nil {
		return a, fmt.Errorf("agents: add %s: %w", name, err)
	}
	if !added {
		return a, fmt.Errorf("agents: add %s: %w", name, ErrAgentPresent)
	}
	return a, nil
}

// RemoveAgent unregisters an agent added at run time. ErrStaticAgent for
// agents declared in the configuration, ErrAgentAbsent when it is not there.
func (e *Engine) RemoveAgent(ctx context.Context, channel, name string) error {
	name = e.canonical(name)
	if e.isStatic(channel, name) {
		return fmt.Errorf("agents: remove %s: %w", name, ErrStaticAgent)
	}
	removed, err := e.registry.RemoveChannelAgent(ctx, channel, name)
	if err != nil {
		return fmt.Errorf("agents: remove %s: %w", name, err)
	}
	if !removed {
		return fmt.Errorf("agents: remove %s: %w", name, ErrAgentAbsent)
	}
	return nil
}

// PairedAgent returns the human agent paired with a Slack user ("" when
// none).
func (e *Engine) PairedAgent(ctx context.Context, userID string) (string, error) {
	a, err := e.pairings.HumanAgent(ctx, userID)
	if errors.Is(err, memory.ErrNotFound) {
		return "", nil
	}
	return a, err
}

// PairedUser returns the Slack user paired with a human agent ("" when
// none).
func (e *Engine) PairedUser(ctx context.Context, agent string) (string, error) {
	return pairedUser(ctx, e.pairings, e.canonical(agent))
}

// pairedUser is the Slack user paired with a human agent of canonical
// name ("" when none).
func pairedUser(ctx context.Context, p Pairings, agent string) (string, error) {
	u, err := p.HumanUser(ctx, agent)
	if errors.Is(err, memory.ErrNotFound) {
		return "", nil
	}
	return u, err
}

func (e *Engine) resolve(ctx context.Context, name string) (ens.Agent, error) {
	a, err := e.deps.Resolver.Resolve(ctx, name)
	if err != nil {
		return ens.Agent{Name: firstLabel(name), EnsDomain: name, Role: ens.RoleExpert}, err
	}
	a.EnsDomain = e.canonical(a.EnsDomain)
	if a.EnsDomain == "" {
		a.EnsDomain = name
	}
	if a.Name == "" {
		a.Name = firstLabel(a.EnsDomain)
	}
	if a.Role == "" {
		a.Role = ens.ParseRole(a.Attribute("role"))
	}
	if a.Attribute("role") == "" {
		attrs := make(map[string]string, len(a.Attributes)+1)
		for k, v := range a.Attributes {
			attrs[k] = v
		}
		attrs["role"] = string(a.Role)
		a.Attributes = attrs
	}
	if a.CloneOf != "" {
		a.CloneOf = e.canonical(a.CloneOf)
	}
	return a, nil
}

func firstLabel(name string) string {
	l, _, _ := strings.Cut(name, ".")
	return l
}
