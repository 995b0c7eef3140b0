package turn

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/internal/clip"
	"github.com/conclavehq/conclave/templates"
)

// Trace is one turn as it happened: what the model was sent and answered,
// the tools it ran, how long each step took, and what came of it.
// Durations are in milliseconds. A turn fills what it did; the engine
// adds its posts and outcome, then keeps or sends it.
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
	// Feedback is filled when traces are read.
	Feedback []Feedback `json:"feedback,omitempty"`

	// Posts are each post's attempt, for its span (not encoded).
	Posts []Span `json:"-"`
}

// Feedback is a person's rating of a turn.
type Feedback struct {
	TurnID string    `json:"turn"`
	User   string    `json:"user"`
	Value  string    `json:"value"`
	At     time.Time `json:"at"`
}

// Span is when something began and how long it took.
type Span struct {
	Began time.Time
	Took  time.Duration
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

// Tool outcomes in a trace (TraceTool.Outcome).
const (
	ToolOK          = "ok"
	ToolError       = "error"
	ToolUnavailable = "unavailable"
)

// promptSources is what a prompt set tells of its files
// (templates.Set): a trace names the file each prompt came from.
type promptSources interface {
	Source(agentENS, role, prompt string) (file, hash string)
}

// promptCommit is what a prompt set tells of its version
// (templates.Set): the config repository's commit.
type promptCommit interface{ Commit() string }

// newTrace starts the trace of a turn, or returns nil when traces are off.
func (r Runner) newTrace(t *Turn) *Trace {
	if !r.Config.Trace {
		return nil
	}
	return &Trace{
		Conversation: r.Place.Conversation, Channel: r.Place.Channel, ThreadTS: r.Place.ThreadTS,
		TurnID: t.ID, Agent: t.Agent.EnsDomain, Role: string(t.Agent.Role), Replica: r.Config.Replica,
		Started: t.Started,
	}
}

// tracePrompts notes the templates a request was rendered from.
func (t *Turn) tracePrompts(prompt string, took time.Duration) {
	tr := t.Trace
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
			tp.File, tp.Hash = src.Source(t.Agent.EnsDomain, string(t.Agent.Role), p)
		}
		tr.Prompts = append(tr.Prompts, tp)
	}
}

// traceCall notes one model call.
func (r Runner) traceCall(t *Turn, req llm.Request, resp llm.Response, err error, began time.Time) {
	tr := t.Trace
	if tr == nil {
		return
	}
	call := TraceCall{Model: ModelName(r.Model, req), Started: began, Request: resp.Sent, DurationMS: r.Now().Sub(began).Milliseconds()}
	if len(call.Request) == 0 {
		// Not sent, or by a model that does not say what it sent: the
		// request as the engine built it.
		call.Request, _ = json.Marshal(tracedRequest(req))
	}
	if err != nil {
		call.Error = NoticeReason(err)
	} else {
		call.Response = &TraceResponse{
			Content: resp.Content, Reasoning: resp.Reasoning, FinishReason: resp.FinishReason, Model: resp.Model,
			PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens,
		}
		if p, ok := r.Config.Prices[call.Model]; ok {
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
func (r Runner) logBodies(ctx context.Context, req llm.Request, resp llm.Response, err error) {
	if !r.Log.Enabled(ctx, slog.LevelDebug) || err != nil {
		return
	}
	body := string(resp.Sent)
	if body == "" {
		b, _ := json.Marshal(tracedRequest(req))
		body = string(b)
	}
	reply := resp.Content
	body, reply = r.Config.Mask.String(body), r.Config.Mask.String(reply)
	r.Log.LogAttrs(ctx, slog.LevelDebug, "llm: request", slog.String(logAgent, req.Agent), slog.String(logRole, req.Role),
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

// traceTool is one tool call as a trace keeps it.
func traceTool(call llm.ToolCall, result, outcome string, began time.Time, took time.Duration) TraceTool {
	return TraceTool{
		Started: began, Name: call.Name, Arguments: call.Arguments, Result: clip.Runes(result, maxTraceToolResult, " …"),
		Outcome: outcome, DurationMS: took.Milliseconds(),
	}
}

// ModelName is the model a request asks for: its own, else its
// profile's.
func ModelName(m Model, req llm.Request) string {
	if req.Model != "" {
		return req.Model
	}
	if p, err := m.Profile(req.Profile); err == nil {
		return p.Model
	}
	return ""
}
