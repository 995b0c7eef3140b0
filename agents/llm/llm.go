// Package llm is conclave's model client: named profiles of
// OpenAI-compatible endpoints, per-request overrides, retries with backoff
// and jitter within a total deadline, and token usage.
package llm

import (
	"encoding/json"
	"errors"
	"time"
)

// Roles of chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one chat message sent to the model.
type Message struct {
	Role    string
	Content string
}

// ToolRound is one exchange of a tool loop, sent after a request's
// messages: the assistant's calls, then one result per call (as "tool"
// messages on the wire).
type ToolRound struct {
	Content string // the assistant's text beside its calls, if any
	Calls   []ToolCall
	Results []string // one per call, in the order of Calls
}

// Tool is a function the model may call (an OpenAI function tool).
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON Schema object; nil means any object
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text, as the model wrote it
}

// Request is one completion. Zero fields take the profile's values.
type Request struct {
	Profile     string // named profile; "" is the default [llm] profile
	Model       string
	Temperature *float64
	MaxTokens   int
	JSON        bool // ask for a JSON object (response_format json_object when the profile allows it)
	Messages    []Message
	// Tools are offered to the model as function tools; nil offers none
	// (and sends no "tools" key).
	Tools []Tool
	// ToolRounds follow Messages: the tool calls of this turn so far.
	ToolRounds []ToolRound

	// Labels for logs and metrics.
	Agent, Role, Prompt string
	// Session is the memory session the turn runs on (a label too; empty
	// when none).
	Session string
}

// Finish reasons the engine branches on.
const (
	FinishStop          = "stop"
	FinishLength        = "length"         // cut by the token limit: the content is partial
	FinishContentFilter = "content_filter" // cut by the endpoint's content filter: the content is partial
)

// Response is a completion's outcome. Its Content never holds the model's
// reasoning or a tool call written as text (quirks.go).
type Response struct {
	Content          string
	Reasoning        string     // removed from Content (<think> blocks, reasoning_content): for traces only
	ToolCalls        []ToolCall // the calls the model asked for (only when the request offered tools)
	FinishReason     string     // "stop", "length", "tool_calls", …
	Model            string
	PromptTokens     int
	CompletionTokens int
	Attempts         int // calls made, retries included
	// Sent is the JSON body of the request as it went out (the last
	// attempt's), for traces; it never holds the API key, which travels in
	// a header.
	Sent []byte
}

// Truncated reports whether the model stopped at the token limit, so the
// content is partial.
func (r Response) Truncated() bool { return r.FinishReason == FinishLength }

// Filtered reports whether the endpoint's content filter stopped the
// reply, so the content is partial.
func (r Response) Filtered() bool { return r.FinishReason == FinishContentFilter }

// Profile is one endpoint and its defaults. New fills the zero values
// marked "default" below and rejects a profile without a model; it does not
// merge profiles with each other (the configuration does that, since only it
// knows which keys were set).
type Profile struct {
	Name           string
	BaseURL        string // default https://api.openai.com/v1
	APIKey         string // may be empty (local endpoints); never logged or echoed in errors
	Model          string
	Temperature    *float64      // nil leaves it to the endpoint; 0 is sent as 0
	MaxTokens      int           // 0 leaves it to the endpoint
	MaxInputTokens int           // the prompt budget; used by the engine, not sent
	Timeout        time.Duration // per attempt of a call not streamed; default 60s
	IdleTimeout    time.Duration // a streamed attempt ends after this long without a chunk; default 30s
	TotalTimeout   time.Duration // all attempts and waits; default 150s
	MaxRetries     int           // retries after the first call; 0 means none
	// Headers are set on every request, replacing same-named ones (so a
	// gateway's own auth header can be used). Values of headers whose names
	// mention a key, token, secret or auth are redacted from errors.
	Headers          map[string]string
	JSONMode         bool // send response_format json_object when a request asks for JSON
	MergeConsecutive bool // merge consecutive same-role messages (strict backends)
}

// ErrUnknownProfile reports a profile name that is not configured.
var ErrUnknownProfile = errors.New("llm: unknown profile")
