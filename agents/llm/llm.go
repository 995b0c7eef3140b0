// Package llm is conclave's model client: named profiles of
// OpenAI-compatible endpoints, per-request overrides, retries with backoff
// and jitter within a total deadline, and token usage.
package llm

import (
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

// Request is one completion. Zero fields take the profile's values.
type Request struct {
	Profile     string // named profile; "" is the default [llm] profile
	Model       string
	Temperature *float64
	MaxTokens   int
	JSON        bool // ask for a JSON object (response_format json_object when the profile allows it)
	Messages    []Message

	// Labels for logs and metrics.
	Agent, Role, Prompt string
}

// Response is a completion's outcome.
type Response struct {
	Content          string
	FinishReason     string // "stop", "length", …
	Model            string
	PromptTokens     int
	CompletionTokens int
	Attempts         int // calls made, retries included
}

// Profile is one endpoint and its defaults.
type Profile struct {
	Name             string
	BaseURL          string
	APIKey           string
	Model            string
	Temperature      *float64
	MaxTokens        int
	MaxInputTokens   int
	Timeout          time.Duration // per attempt
	TotalTimeout     time.Duration // all attempts and waits
	MaxRetries       int
	Headers          map[string]string
	JSONMode         bool // send response_format json_object when a request asks for JSON
	MergeConsecutive bool // merge consecutive same-role messages (strict backends)
}

// ErrUnknownProfile reports a profile name that is not configured.
var ErrUnknownProfile = errors.New("llm: unknown profile")
