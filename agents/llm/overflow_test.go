package llm_test

import (
	"net/http"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// OpenAI's code and the messages of other servers are context overflows;
// rate limits and other refusals are not.
func TestIsContextOverflow(t *testing.T) {
	tests := []struct {
		name  string
		reply llmfake.Reply
		want  bool
	}{
		{"openai code", llmfake.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`}, true},
		{"vllm message", llmfake.Error(http.StatusBadRequest, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"), true},
		{"413 input too long", llmfake.Error(http.StatusRequestEntityTooLarge, "Input is too long for requested model."), true},
		{"rate limit on tokens", llmfake.Error(http.StatusTooManyRequests, "Rate limit reached for tokens per min; context window"), false},
		{"bad request", llmfake.Error(http.StatusBadRequest, "Invalid value for temperature"), false},
		{"server error", llmfake.Error(http.StatusInternalServerError, "maximum context length"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := llmfake.New(t)
			fake.Handle(func(llmfake.Request) llmfake.Reply { return tt.reply })
			client, err := llm.New(llm.Profile{BaseURL: fake.URL(), Model: "fake", MaxRetries: 0}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.Complete(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			if err == nil {
				t.Fatal("no error")
			}
			if got := llm.IsContextOverflow(err); got != tt.want {
				t.Errorf("IsContextOverflow(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}
