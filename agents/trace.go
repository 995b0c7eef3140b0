package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/internal/clip"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// TraceLog reads the turn traces the commits wrote and records feedback
// on them (memory's stores implement it).
type TraceLog interface {
	// Traces reads a conversation's traces and their feedback; none reads
	// as empty.
	Traces(ctx context.Context, convID string) (memory.Traces, error)
	// TraceRef finds the conversation of a thread (memory.ErrNotFound
	// when it has no traces).
	TraceRef(ctx context.Context, channel, threadTS string) (string, error)
	// RecordFeedback records a person's rating of a turn, replacing that
	// person's earlier one.
	RecordFeedback(ctx context.Context, convID string, f memory.Feedback) error
}

// Trace is one turn as it happened: what the model was sent and answered,
// the tools it ran, how long each step took, and what came of it.
// Durations are in milliseconds.
type Trace struct {
	Conversation string        `json:"conversation"`
	Channel      string        `json:"channel"`
	ThreadTS     string        `json:"thread_ts"`
	TurnID       string        `json:"turn"`
	Agent        string        `json:"agent"`
	Role         string        `json:"role"`
	Phase        string        `json:"phase"`
	Replica      string        `json:"replica,omitempty"`
	Started      time.Time     `json:"started"`
	Prompts      []TracePrompt `json:"prompts,omitempty"`
	// PromptsCommit is the config repository's commit the prompts were
	// read from, when templates.dir is a git work tree.
	PromptsCommit string       `json:"prompts_commit,omitempty"`
	Calls         []TraceCall  `json:"calls,omitempty"`
	Tools         []TraceTool  `json:"tools,omitempty"`
	Timings       TraceTimings `json:"timings"`
	Outcome       string       `json:"outcome"`
	// Notice is the reason class of the ⚠️ notice the turn posted.
	Notice string `json:"notice,omitempty"`
	// InputTokens and OutputTokens are the turn's, over its calls;
	// CostUSD is their cost when every model it called has a price.
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd,omitempty"`
	// Posted are the Slack ts of the messages the turn posted.
	Posted []string `json:"posted,omitempty"`
	// Feedback is filled when traces are read (ReadTraces).
	Feedback []memory.Feedback `json:"feedback,omitempty"`

	posts []timeSpan // each post's attempt, for its span
}

// timeSpan is when something began and how long it took.
type timeSpan struct {
	began time.Time
	took  time.Duration
}

// TracePrompt is one template a turn rendered.
type TracePrompt struct {
	Prompt string `json:"prompt"` // system, default, conclude, …
	File   string `json:"file"`   // its path in the config repository, or "built-in"
	Hash   string `json:"sha256,omitempty"`
}

// TraceCall is one model call: the request as sent and what came back.
type TraceCall struct {
	Model      string          `json:"model,omitempty"` // the model asked for
	Started    time.Time       `json:"started"`
	Request    json.RawMessage `json:"request"`
	Response   *TraceResponse  `json:"response,omitempty"`
	Error      string          `json:"error,omitempty"` // a reason class, as a notice gives it
	DurationMS int64           `json:"duration_ms"`
}

// TraceResponse is what a model call answered.
type TraceResponse struct {
	Content string `json:"content"`
	// Reasoning is what the model thought aloud, removed from Content
	// (llm.Response.Reasoning): kept here, never posted.
	Reasoning        string          `json:"reasoning,omitempty"`
	ToolCalls        []TraceToolCall `json:"tool_calls,omitempty"`
	FinishReason     string          `json:"finish_reason"`
	Model            string          `json:"model,omitempty"`
	PromptTokens     int             `json:"prompt_tokens"`
	CompletionTokens int             `json:"completion_tokens"`
	// CostUSD is the call's cost at its model's price (none unpriced).
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// TraceToolCall is one call a model asked for.
type TraceToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// TraceTool is one tool call.
type TraceTool struct {
	Started    time.Time `json:"started"`
	Name       string    `json:"name"`
	Arguments  string    `json:"arguments"`
	Result     string    `json:"result"`  // cut to maxTraceToolResult runes
	Outcome    string    `json:"outcome"` // ok, error, unavailable
	DurationMS int64     `json:"duration_ms"`
}

// TraceTimings is where a turn's time went.
type TraceTimings struct {
	QueuedMS int64 `json:"queued_ms"`
	RenderMS int64 `json:"render_ms"`
	ModelMS  int64 `json:"model_ms"`
	ToolsMS  int64 `json:"tools_ms"`
	PostMS   int64 `json:"post_ms"`
	TotalMS  int64 `json:"total_ms"`
}

// maxTraceToolResult is how much of a tool's result a trace keeps.
const maxTraceToolResult = 4000

// Tool outcomes in a trace.
const (
	toolOK          = "ok"
	toolError       = "error"
	toolUnavailable = "unavailable"
)

// promptSources is what a prompt set tells of its files
// (templates.Set): a trace names the file each prompt came from.
type promptSources interface {
	Source(agentENS, role, prompt string) (file, hash string)
}

// promptCommit is what a prompt set tells of its version
// (templates.Set): the config repository's commit.
type promptCommit interface{ Commit() string }

// turnTracer starts a conversation's turn traces (each kept in its turn)
// and makes a finished one's record and spans.
type turnTracer struct {
	opts *Options
	deps tracePorts // Tracer, CaptureContent, and the model's profiles
	conv *memory.Conversation
	msgs *[]memory.Message // the thread: what a turn posted
	now  func() time.Time
	log  *slog.Logger
}

// tracePorts are the engine's ports the tracer uses, each on its own.
type tracePorts struct {
	Model          Model
	Tracer         trace.Tracer
	CaptureContent bool
}

// newTrace starts the trace of a turn, or returns nil when traces are off.
func (c turnTracer) newTrace(t *turnRun) *Trace {
	if !c.opts.Traces && c.deps.Tracer == nil {
		return nil
	}
	tr := &Trace{
		Conversation: c.conv.ID, Channel: c.conv.Channel, ThreadTS: c.conv.ThreadTS,
		TurnID: t.id, Agent: t.agent.EnsDomain, Role: string(t.agent.Role), Replica: c.opts.Replica,
		Started: t.started,
	}
	return tr
}

// tracePrompts notes the templates a request was rendered from.
func (t *turnRun) tracePrompts(prompt string, took time.Duration) {
	tr := t.trace
	if tr == nil {
		return
	}
	tr.Timings.RenderMS += took.Milliseconds()
	if src, ok := t.prompts.(promptCommit); ok {
		tr.PromptsCommit = src.Commit()
	}
	for _, p := range []string{templates.PromptSystem, prompt} {
		if slices.ContainsFunc(tr.Prompts, func(tp TracePrompt) bool { return tp.Prompt == p }) {
			continue
		}
		tp := TracePrompt{Prompt: p, File: templates.BuiltinSource}
		if src, ok := t.prompts.(promptSources); ok {
			tp.File, tp.Hash = src.Source(t.agent.EnsDomain, string(t.agent.Role), p)
		}
		tr.Prompts = append(tr.Prompts, tp)
	}
}

// traceCall notes one model call.
func (c turnTracer) traceCall(t *turnRun, req llm.Request, resp llm.Response, err error, began time.Time) {
	tr := t.trace
	if tr == nil {
		return
	}
	call := TraceCall{Model: modelName(c.deps.Model, req), Started: began, Request: resp.Sent, DurationMS: c.now().Sub(began).Milliseconds()}
	if len(call.Request) == 0 {
		// Not sent, or by a model that does not say what it sent: the
		// request as the engine built it.
		call.Request, _ = json.Marshal(tracedRequest(req))
	}
	if err != nil {
		call.Error = turn.NoticeReason(err)
	} else {
		call.Response = &TraceResponse{
			Content: resp.Content, Reasoning: resp.Reasoning, FinishReason: resp.FinishReason, Model: resp.Model,
			PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens,
		}
		if p, ok := c.opts.Prices[call.Model]; ok {
			cost := p.Cost(int64(resp.PromptTokens), int64(resp.CompletionTokens))
			call.Response.CostUSD = &cost
		}
		for _, tc := range resp.ToolCalls {
			call.Response.ToolCalls = append(call.Response.ToolCalls, TraceToolCall{tc.ID, tc.Name, tc.Arguments})
		}
	}
	tr.Calls = append(tr.Calls, call)
	tr.Timings.ModelMS += call.DurationMS
}

// logBodies logs, at debug level only, the body a request went out with
// and the reply's text, the configuration's secrets masked (SPEC §12.2):
// prompt bodies never reach a log at info.
func (c turnTracer) logBodies(ctx context.Context, req llm.Request, resp llm.Response, err error) {
	if !c.log.Enabled(ctx, slog.LevelDebug) || err != nil {
		return
	}
	body := string(resp.Sent)
	if body == "" {
		b, _ := json.Marshal(tracedRequest(req))
		body = string(b)
	}
	reply := resp.Content
	body, reply = c.opts.Mask.String(body), c.opts.Mask.String(reply)
	c.log.LogAttrs(ctx, slog.LevelDebug, "llm: request", slog.String(logAgent, req.Agent), slog.String(logRole, req.Role),
		slog.String(logPhase, req.Prompt), slog.String("model", resp.Model), slog.String("body", body), slog.String("reply", reply))
}

// tracedRequest is an llm.Request as a trace shows it when the model did
// not report the body it sent.
func tracedRequest(req llm.Request) any {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	out := struct {
		Profile     string          `json:"profile,omitempty"`
		Model       string          `json:"model,omitempty"`
		Temperature *float64        `json:"temperature,omitempty"`
		MaxTokens   int             `json:"max_tokens,omitempty"`
		JSON        bool            `json:"json,omitempty"`
		Messages    []message       `json:"messages"`
		Tools       []tool          `json:"tools,omitempty"`
		ToolRounds  []llm.ToolRound `json:"tool_rounds,omitempty"`
	}{Profile: req.Profile, Model: req.Model, Temperature: req.Temperature, MaxTokens: req.MaxTokens, JSON: req.JSON, ToolRounds: req.ToolRounds}
	for _, m := range req.Messages {
		out.Messages = append(out.Messages, message{m.Role, m.Content})
	}
	for _, tl := range req.Tools {
		out.Tools = append(out.Tools, tool{tl.Name, tl.Description, tl.Parameters})
	}
	return out
}

// traceTool notes one tool call.
func (t *turnRun) traceTool(call llm.ToolCall, result, outcome string, began time.Time, took time.Duration) TraceTool {
	return TraceTool{
		Started: began, Name: call.Name, Arguments: call.Arguments, Result: clip.Runes(result, maxTraceToolResult, " …"),
		Outcome: outcome, DurationMS: took.Milliseconds(),
	}
}

// finishTrace completes a turn's trace from its report and the messages
// it posted and encodes it with the secrets masked, for the step's next
// commit; false when it is not kept.
func (c turnTracer) finishTrace(t *turnRun) (memory.TurnTrace, bool) {
	tr := t.trace
	if tr == nil {
		return memory.TurnTrace{}, false
	}
	r := t.report
	tr.Phase, tr.Outcome = r.Phase, r.Outcome
	tr.Timings.QueuedMS = r.Wait.Milliseconds()
	tr.Timings.TotalMS = r.Duration.Milliseconds()
	tr.InputTokens, tr.OutputTokens, tr.CostUSD = usageTotals(r.Usage)
	for _, m := range *c.msgs {
		if m.TurnID == t.id || strings.HasPrefix(m.TurnID, t.id+"-") {
			tr.Posted = append(tr.Posted, m.TS)
		}
	}
	if c.deps.Tracer == nil && !c.opts.Traces {
		return memory.TurnTrace{}, false
	}
	body, err := json.Marshal(tr)
	if err != nil {
		c.log.Warn("encode a turn's trace", slog.String(logTurn, t.id), slog.Any(logError, err))
		return memory.TurnTrace{}, false
	}
	body = c.opts.Mask.Bytes(body)
	var m *Trace
	if c.deps.Tracer != nil {
		m = masked(tr, body)
		c.emitSpans(m)
	}
	if !c.opts.Traces {
		return memory.TurnTrace{}, false
	}
	if limit := c.opts.TraceEntryMaxBytes; limit > 0 && len(body) > limit {
		if m == nil {
			m = masked(tr, body)
		}
		if body, err = capTraceEntry(m, limit); err != nil {
			c.log.Warn("encode a turn's trace", slog.String(logTurn, t.id), slog.Any(logError, err))
			return memory.TurnTrace{}, false
		}
	}
	return memory.TurnTrace{TurnID: t.id, Body: body}, true
}

// masked is the trace the spans are built from: tr as its masked
// encoding body decodes, so that no span carries what the stored trace
// does not (the posts' timings, not encoded, are tr's).
func masked(tr *Trace, body []byte) *Trace {
	var m Trace
	if err := json.Unmarshal(body, &m); err != nil {
		// The masks replace text inside JSON strings with text that needs
		// no escaping, so body stays valid; were it not, no content goes.
		m = Trace{Conversation: tr.Conversation, TurnID: tr.TurnID, Agent: tr.Agent, Role: tr.Role, Phase: tr.Phase,
			Outcome: tr.Outcome, Channel: tr.Channel, ThreadTS: tr.ThreadTS, Started: tr.Started, Timings: tr.Timings}
	}
	m.posts = tr.posts
	return &m
}

// ReadTraces reads a conversation's traces, oldest first, each with its
// feedback. A trace that cannot be decoded is an error naming its turn.
func ReadTraces(ctx context.Context, log TraceLog, convID string) ([]Trace, error) {
	kept, err := log.Traces(ctx, convID)
	if err != nil {
		return nil, err
	}
	out := make([]Trace, 0, len(kept.Turns))
	for _, k := range kept.Turns {
		var tr Trace
		if err := json.Unmarshal(k.Body, &tr); err != nil {
			return nil, fmt.Errorf("agents: trace of turn %s: %w", k.TurnID, err)
		}
		for _, f := range kept.Feedback {
			if f.TurnID == tr.TurnID {
				tr.Feedback = append(tr.Feedback, f)
			}
		}
		out = append(out, tr)
	}
	return out, nil
}
