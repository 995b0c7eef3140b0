package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// Start policies of a channel.
const (
	StartAll     = "all"     // every top-level message by a person starts a conversation
	StartMention = "mention" // only a top-level message naming an agent does
)

// Session policies: may an expert create a new memory session?
const (
	SessionAny     = "any"
	SessionPattern = "pattern" // only keys fully matching SessionPattern
	SessionNever   = "never"
)

// Session scopes of experts' memory.
const (
	ScopeAgent   = "agent"   // an expert's sessions follow it across channels
	ScopeChannel = "channel" // kept per channel
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
}

// AgentSettings are per-agent settings from the configuration.
type AgentSettings struct {
	LLMProfile     string
	SessionPolicy  string   // SessionAny (default), SessionPattern, SessionNever
	SessionPattern string   // RE2, matched against the whole key
	Tools          []string // MCP tools: "server" or "server/tool"
}

// Options mirror the configuration. Zero values take the documented
// defaults.
type Options struct {
	Timeout          time.Duration // conversation.timeout; 0 turns the inactivity conclusion off
	CallTimeout      time.Duration // conversation.call_timeout (3m)
	MaxTurns         int           // conversation.max_turns (40)
	MaxTurnsPerAgent int           // conversation.max_turns_per_agent (10)
	MaxParallel      int           // conversation.max_parallel (8)
	MaxMessageChars  int           // conversation.max_message_chars (12000)
	MaxQueued        int           // conversation.max_queued (100): turns waiting per conversation
	MaxInputTokens   int           // input budget when no prompt or profile sets one (16000)
	MaxToolRounds    int           // llm.max_tool_rounds (8)

	MatchThreshold float64 // expert.match_threshold (0.75)
	SessionScope   string  // expert.session_scope: ScopeAgent (default) or ScopeChannel

	Notify string // errors.notify: NotifyThread (default) or NotifyLog
	// PostRetryWindow is how long a failed post is retried, from its
	// first attempt (slack.post_retry_window, 30m).
	PostRetryWindow time.Duration
	// TurnTimeout bounds the model calls of one turn together (10m;
	// `conclave run`: three times the longest llm total_timeout, for a
	// threading turn's calls); PostTimeout bounds one attempt of a post,
	// all its parts and the look-up before it (1m; `conclave run`: six
	// times slack.timeout). Past them the turn fails with a ⚠️ notice, the
	// post is retried.
	TurnTimeout     time.Duration
	PostTimeout     time.Duration
	WorkingReaction string // slack.working_reaction (hourglass_flowing_sand)

	Channels    []ChannelConfig
	Agents      map[string]AgentSettings // by ENS name
	BotUserID   string                   // conclave's own Slack user
	BaseDomains []string                 // ens.base_domains; the first is canonical

	ShutdownGrace time.Duration // time for in-flight turns after Run's context ends (15s)
	LockTTL       time.Duration // per-conversation lock, renewed while a turn runs (30s)
	SweepInterval time.Duration // how often Due is polled (1s)

	// Stream shows plain-text replies while they are written
	// (slack.stream); StreamInterval spaces their updates
	// (slack.stream_interval, 1s).
	Stream         bool
	StreamInterval time.Duration

	// Owns, when set, limits the conversations the sweeper hands to
	// workers to those it accepts: `conclave chat` may share the store of
	// a running conclave and must leave its conversations alone.
	Owns func(conversationID string) bool
}

// Deps are the engine's collaborators.
type Deps struct {
	Store    Store
	Chat     Chat
	Model    Model
	Prompts  func() Prompts // the current prompt set; called once per turn
	Resolver Resolver
	Tools    Toolbox            // nil: agents have no tools
	Logger   *slog.Logger       // nil: discard
	Now      func() time.Time   // nil: time.Now
	OnTurn   func(r TurnReport) // optional: metrics, called after each turn
	// OnPostAbandoned, optional (metrics), is called for each post given
	// up (a permanent error, or its retry window over).
	OnPostAbandoned func()
	// Jitter, optional, draws the jitter of post retries, in [0, 1]
	// (default: math/rand).
	Jitter func() float64
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

// TurnReport describes one turn, for logs and metrics.
type TurnReport struct {
	Conversation     string
	TurnID           string
	Agent            string
	Role             string
	Phase            string // default, conclude, context-not-found, context-found
	Outcome          string // ok, empty, failed, skipped, timeout, cancelled
	Wait             time.Duration
	Duration         time.Duration
	PromptTokens     int
	CompletionTokens int
	ToolCalls        int // tools the model called in this turn
	Err              error
}

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
	opts     Options
	deps     Deps
	log      *slog.Logger
	patterns map[string]*regexp.Regexp
	static   map[string]ChannelConfig

	nudge chan struct{}
	ready chan task // conversations this replica just recorded a message of

	reactions *reactor

	mu   sync.Mutex
	busy map[string]bool // conversations a local worker is on
}

// New returns an engine; it starts nothing.
func New(opts Options, deps Deps) *Engine {
	opts = withFallbacks(opts)
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
		patterns: make(map[string]*regexp.Regexp),
		static:   make(map[string]ChannelConfig),
		nudge:    make(chan struct{}, 1),
		ready:    make(chan task, 256),
		busy:     make(map[string]bool),
	}
	e.reactions = newReactor(deps.Chat, e.log, opts.MaxParallel)
	bases := make([]string, len(opts.BaseDomains)) // the caller's slice stays as it is
	for i, b := range opts.BaseDomains {
		bases[i] = strings.ToLower(strings.Trim(b, ". "))
	}
	opts.BaseDomains = bases
	e.opts = opts
	e.opts.Agents = e.agentSettings(opts.Agents)
	for _, c := range opts.Channels {
		e.static[c.ID] = canonicalChannel(c, e.canonical)
	}
	return e
}

// withFallbacks fills the options left zero. The configuration
// (cmd/conclave) is where conclave's defaults are set, and `conclave run`
// and `conclave chat` always pass them; these fallbacks, the same values,
// serve callers that build Options by hand (tests, benchmarks), so that
// a zero value never means no worker, no lock lease or no turn.
func withFallbacks(opts Options) Options {
	fallback := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	fallbackDuration := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	fallback(&opts.MaxTurns, 40)
	fallback(&opts.MaxTurnsPerAgent, 10)
	fallback(&opts.MaxParallel, 8)
	fallback(&opts.MaxQueued, 100)
	fallback(&opts.MaxMessageChars, 12000)
	fallback(&opts.MaxInputTokens, DefaultMaxInputTokens)
	fallback(&opts.MaxToolRounds, DefaultMaxToolRounds)
	fallbackDuration(&opts.CallTimeout, 3*time.Minute)
	fallbackDuration(&opts.ShutdownGrace, 15*time.Second)
	fallbackDuration(&opts.LockTTL, 30*time.Second)
	fallbackDuration(&opts.SweepInterval, time.Second)
	fallbackDuration(&opts.PostRetryWindow, 30*time.Minute)
	fallbackDuration(&opts.TurnTimeout, 10*time.Minute)
	fallbackDuration(&opts.PostTimeout, time.Minute)
	if opts.MatchThreshold <= 0 {
		opts.MatchThreshold = 0.75
	}
	if opts.SessionScope == "" {
		opts.SessionScope = ScopeAgent
	}
	if opts.Notify == "" {
		opts.Notify = NotifyThread
	}
	if opts.WorkingReaction == "" {
		opts.WorkingReaction = "hourglass_flowing_sand"
	}
	if len(opts.BaseDomains) == 0 {
		opts.BaseDomains = []string{"protocol6022.eth", "6022.eth"}
	}
	return opts
}

// agentSettings keys the agents' settings by canonical name and compiles
// their session patterns (needs e.opts.BaseDomains set).
func (e *Engine) agentSettings(in map[string]AgentSettings) map[string]AgentSettings {
	out := make(map[string]AgentSettings, len(in))
	for name, s := range in {
		name = e.canonical(name)
		out[name] = s
		if s.SessionPolicy == SessionPattern {
			re, err := regexp.Compile(`^(?:` + s.SessionPattern + `)$`)
			if err != nil {
				e.log.Error("invalid session_pattern; the agent creates no session", slog.String(logAgent, name), slog.Any(logError, err))
				continue
			}
			e.patterns[name] = re
		}
	}
	return out
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

// canonical lowercases an ENS name and writes it under the first base
// domain when it is under any configured base.
func (e *Engine) canonical(name string) string {
	name = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), "@")))
	for _, b := range e.opts.BaseDomains {
		if prefix, ok := strings.CutSuffix(name, "."+b); ok {
			return prefix + "." + e.opts.BaseDomains[0]
		}
	}
	return name
}

// forms lists the spellings of canonical names that mention them.
func (e *Engine) forms(names []string) []nameForm {
	var out []nameForm
	for _, n := range names {
		out = append(out, nameForm{form: n, agent: n})
		first := "." + e.opts.BaseDomains[0]
		if prefix, ok := strings.CutSuffix(n, first); ok {
			for _, b := range e.opts.BaseDomains[1:] {
				out = append(out, nameForm{form: prefix + "." + b, agent: n})
			}
		}
	}
	return out
}

// registeredNames lists a channel's agents: the configuration's, then
// those added at run time, canonical and without duplicates.
func (e *Engine) registeredNames(ctx context.Context, channel string) ([]string, error) {
	added, err := e.deps.Store.ChannelAgents(ctx, channel)
	if err != nil {
		return nil, fmt.Errorf("agents: list agents of %s: %w", channel, err)
	}
	return e.channelNames(channel, added), nil
}

// channelNames merges a channel's configured agents with those added at
// run time (as the store lists them).
func (e *Engine) channelNames(channel string, added []string) []string {
	names := slices.Clone(e.static[channel].Agents)
	for _, n := range added {
		if n = e.canonical(n); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// isStatic reports whether the configuration declares agent in channel.
func (e *Engine) isStatic(channel, agent string) bool {
	return slices.Contains(e.static[channel].Agents, agent)
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
	added, err := e.deps.Store.AddChannelAgent(ctx, channel, name)
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
	removed, err := e.deps.Store.RemoveChannelAgent(ctx, channel, name)
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
	a, err := e.deps.Store.HumanAgent(ctx, userID)
	if errors.Is(err, memory.ErrNotFound) {
		return "", nil
	}
	return a, err
}

// PairedUser returns the Slack user paired with a human agent ("" when
// none).
func (e *Engine) PairedUser(ctx context.Context, agent string) (string, error) {
	u, err := e.deps.Store.HumanUser(ctx, e.canonical(agent))
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

// memberOf is the template member for an agent.
func memberOf(a ens.Agent) templates.Member {
	return templates.Agent(templates.AgentInfo{
		Name:       a.Name,
		EnsDomain:  a.EnsDomain,
		Owner:      a.Owner,
		Addresses:  a.Addresses,
		Attributes: a.Attributes,
	})
}
