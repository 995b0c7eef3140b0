package llm

import (
	"errors"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// overflowPhrases are how OpenAI-compatible servers word a request longer
// than the model's context window when they give no code: OpenAI's own
// message, vLLM's, Ollama's, LiteLLM's and Anthropic-style gateways'.
var overflowPhrases = []string{
	"context_length_exceeded",
	"context length exceeded",
	"maximum context length",
	"context window",
	"prompt is too long",
	"input is too long",
	"too many input tokens",
	"exceeds the model's context",
	"reduce the length of the messages",
}

// IsContextOverflow reports whether err is an endpoint's refusal of a
// request longer than the model's context window: OpenAI's
// context_length_exceeded code, or one of the messages other servers give
// with a 4xx status. A rate limit (429) never is, whatever it says of
// tokens.
func IsContextOverflow(err error) bool {
	var le *Error
	if !errors.As(err, &le) || le.Status < 400 || le.Status >= 500 || le.Status == http.StatusTooManyRequests {
		return false
	}
	if api, ok := errors.AsType[*openai.APIError](err); ok {
		if code, _ := api.Code.(string); code == "context_length_exceeded" {
			return true
		}
		if overflowWords(api.Message) {
			return true
		}
	}
	return overflowWords(le.msg)
}

func overflowWords(msg string) bool {
	msg = strings.ToLower(msg)
	for _, p := range overflowPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
