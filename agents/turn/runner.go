package turn

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/clip"
	"github.com/conclavehq/conclave/internal/redact"
	"github.com/conclavehq/conclave/templates"
)

// Config is what a turn reads of the engine's configuration.
type Config struct {
	// Timeout bounds the model calls of one turn together, from its
	// start (conversation.turn_timeout).
	Timeout              time.Duration
	MaxToolRounds        int // llm.max_tool_rounds
	MaxToolCallsPerRound int // llm.max_tool_calls_per_round
	MaxMessageChars      int // conversation.max_message_chars
	MaxInputTokens       int // llm.max_input_tokens
	MatchThreshold       float64
	// Stream shows plain-text replies while they are written, one update
	// per StreamInterval at most, when the turn's input has a Shower.
	Stream         bool
	StreamInterval time.Duration
	Mask           *redact.Masker    // the configured secrets
	Vars           map[string]string // the operator's template variables
	BotUserID      string            // conclave's own Slack user, never a member
	Prices         map[string]Price  // by model name
	// Trace builds each turn's trace; Replica names this process in it.
	Trace   bool
	Replica string
	Agents  map[string]AgentConfig // by ENS name
}

// AgentConfig is what a turn reads of one agent's settings.
type AgentConfig struct {
	Profile        string         // its LLM profile
	Tools          []string       // its MCP tools
	SessionPolicy  string         // SessionAny, SessionPattern or SessionNever
	SessionPattern string         // RE2, matched against a whole key
	Pattern        *regexp.Regexp // SessionPattern compiled (nil when none or invalid)
}

// Session policies: whether an expert may start a memory session for a
// key it has none for.
const (
	SessionAny     = "any"
	SessionPattern = "pattern" // only keys fully matching SessionPattern
	SessionNever   = "never"
)

// Place is where a turn's conversation is.
type Place struct {
	Conversation string
	Channel      string
	ThreadTS     string
}

// Runner runs the turns of one conversation: it renders the prompts,
// calls the model and the tools, and returns a Result. It holds no store
// and no transport; what it reads of the conversation comes in an Input.
type Runner struct {
	Model   Model
	Prompts func() Prompts // one prompt set per turn
	Tools   Toolbox
	Config  *Config
	Now     func() time.Time
	// Off runs a call to the outside (the model, the tools) the turn
	// waits on; the engine gives its CPU token back meanwhile. Nil runs
	// it as it is.
	Off func(func())
	// Ticker ticks once per stream interval (nil: a time.Ticker).
	Ticker func(d time.Duration) (<-chan time.Time, func())
	Log    *slog.Logger
	Place  Place
}

// Turn is one agent producing (or failing to produce) one reply: the
// engine starts it (NewTurn), runs its functions (Facilitator, Threading,
// Session, Conclusion) and reads its Report and Trace when it ends.
type Turn struct {
	ID      string
	Agent   ens.Agent
	Report  Report
	Started time.Time
	Trace   *Trace // nil when traces are off

	prompts Prompts // one prompt set for the whole turn
	// deadline ends its model calls (real time: contexts run on it).
	deadline time.Time
	fit      *fitting // what its last request was built from
	stream   *shown   // while its reply is shown as it is written
	// What it produced beyond its text: history notes, and the results
	// of the tools it ran (a threading key may be written there).
	notes       []Note
	toolResults []string
}

// shown is a reply being shown while the model writes it.
type shown struct {
	model StreamModel
	pace  *Stream
}

// NewTurn starts the turn id of agent a in phase ("" until its first
// request says).
func (r Runner) NewTurn(id string, a ens.Agent, phase string) *Turn {
	t := &Turn{
		ID:      id,
		Agent:   a,
		prompts: r.Prompts(),
		Started: r.Now(),
		// Real time: contexts run on it.
		deadline: time.Now().Add(r.Config.Timeout),
		Report: Report{
			Conversation: r.Place.Conversation,
			TurnID:       id,
			Agent:        a.EnsDomain,
			Role:         string(a.Role),
			Phase:        phase,
			Outcome:      "ok",
		},
	}
	t.Trace = r.newTrace(t)
	return t
}

// result ends a run of one of the turn's functions: the notes it added
// go with r.
func (t *Turn) result(r Result) Result {
	r.Notes, t.notes = t.notes, nil
	return r
}

// off runs f, a call to the outside, through Runner.Off.
func (r Runner) off(f func()) {
	if r.Off == nil {
		f()
		return
	}
	r.Off(f)
}

// build renders and fits one request of a turn.
func (r Runner) build(t *Turn, prompt string, data templates.Data, history, tail []HistoryMessage) (llm.Request, error) {
	began := r.Now()
	defer func() { t.tracePrompts(prompt, r.Now().Sub(began)) }()
	tp := TurnPrompt{
		Agent:           t.Agent,
		Prompt:          prompt,
		Data:            data,
		History:         history,
		Tail:            tail,
		AgentProfile:    r.Config.Agents[t.Agent.EnsDomain].Profile,
		MaxInputTokens:  r.Config.MaxInputTokens,
		MaxMessageChars: r.Config.MaxMessageChars,
	}
	req, info, err := BuildRequest(t.prompts, r.Model, tp)
	t.fit = &fitting{prompt: tp, budget: info.Budget}
	for _, w := range info.Warnings {
		r.Log.Warn(w, slog.String(logAgent, t.Agent.EnsDomain), slog.String(logPhase, prompt))
	}
	if info.Dropped > 0 {
		r.Log.Info("history cut to the input budget", slog.String(logAgent, t.Agent.EnsDomain),
			slog.Int("dropped", info.Dropped), slog.Int("budget", info.Budget))
	}
	t.Report.Phase = prompt
	if err == nil {
		req.Tools = r.toolsFor(t.Agent.EnsDomain, info.Tools)
	}
	return req, err
}

// ask calls the model, and the tools it calls, within what is left of the
// turn's deadline (Config.Timeout from its start). A partial reply is
// marked (MarkCut).
func (r Runner) ask(ctx context.Context, t *Turn, req llm.Request) (string, error) {
	resp, err := r.askResponse(ctx, t, req)
	if err != nil {
		return "", err
	}
	return MarkCut(r.Config.Mask, resp), nil
}

// askResponse is ask, answering the model's response as it came.
func (r Runner) askResponse(ctx context.Context, t *Turn, req llm.Request) (llm.Response, error) {
	mctx, cancel := context.WithDeadline(ctx, t.deadline)
	defer cancel()
	resp, err := r.completeFitting(mctx, t, req)
	if err != nil && ctx.Err() == nil && mctx.Err() != nil {
		err = fmt.Errorf("%w (%s): %w", ErrTurnDeadline, r.Config.Timeout, err)
	}
	return resp, err
}

// askStreamed is ask, with the reply shown through show while it is
// written when streaming is on, show is not nil and the model can
// stream; JSON replies are never shown.
func (r Runner) askStreamed(ctx context.Context, t *Turn, req llm.Request, show Shower) (string, error) {
	sm, ok := r.Model.(StreamModel)
	if !r.Config.Stream || show == nil || !ok || req.JSON {
		return r.ask(ctx, t, req)
	}
	tick, stopTick := r.ticker()
	t.stream = &shown{model: sm, pace: StartStream(ctx, show, r.Config.Mask, tick)}
	text, err := r.ask(ctx, t, req)
	t.stream.pace.Stop()
	stopTick()
	t.stream = nil
	return text, err
}

// ticker ticks once per stream interval.
func (r Runner) ticker() (<-chan time.Time, func()) {
	d := r.Config.StreamInterval
	if r.Ticker != nil {
		return r.Ticker(d)
	}
	tk := time.NewTicker(d)
	return tk.C, tk.Stop
}

// callModel is complete's model call: streamed when the turn's reply is
// shown.
func (r Runner) callModel(ctx context.Context, t *Turn, req llm.Request) (resp llm.Response, err error) {
	r.off(func() {
		if s := t.stream; s != nil {
			resp, err = s.model.Stream(ctx, req, s.pace.OnText)
			return
		}
		resp, err = r.Model.Complete(ctx, req)
	})
	return resp, err
}

// spend adds one model call's tokens to the turn's usage. A call that
// failed without a reply costs nothing and is not counted.
func (r Runner) spend(t *Turn, model string, resp llm.Response, err error) {
	if err != nil && resp.PromptTokens == 0 && resp.CompletionTokens == 0 {
		return
	}
	t.Report.spend(r.Config.Prices, model, int64(resp.PromptTokens), int64(resp.CompletionTokens))
}

// CapText keeps the first max runes of s and marks the cut
// (TruncatedMark), so one huge Slack message cannot blow a prompt's
// budget. max <= 0 means no cap.
func CapText(s string, max int) string { return clip.Runes(s, max, TruncatedMark) }

// FirstLine is the first line of s, capped at 300 runes: what a log or
// a model reads of an error.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return CapText(s, 300)
}

// Log attribute keys, as the engine's.
const (
	logAgent = "agent"
	logRole  = "role"
	logPhase = "phase"
	logTurn  = "turn"
	logError = "error"
)
