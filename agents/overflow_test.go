package agents_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// overflowBody is OpenAI's answer to a request past the context window.
const overflowBody = `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`

// A long thread refused by the endpoint as past the model's context
// window: the turn retries once with its history cut to half its budget;
// a second refusal ends in a notice that says so.
func TestContextOverflow(t *testing.T) {
	tests := []struct {
		name     string
		second   llmfake.Reply
		wantPost string
	}{
		{name: "the shorter request fits", second: llmfake.Text("short answer"), wantPost: "Elen: short answer"},
		{name: "refused twice", second: llmfake.Reply{Status: http.StatusBadRequest, Body: overflowBody},
			wantPost: "Elen: ⚠️ Elen could not answer: the conversation is too long for the model's context window, even with its history cut to half (ref "},
		{name: "a message without a code", second: llmfake.Error(http.StatusBadRequest, "prompt is too long: 9000 tokens > 8192 maximum"),
			wantPost: "Elen: ⚠️ Elen could not answer: the conversation is too long for the model's context window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := llmfake.New(t)
			fake.Reply(llmfake.Reply{Status: http.StatusBadRequest, Body: overflowBody}, tt.second)
			client, err := llm.New(llm.Profile{BaseURL: fake.URL(), APIKey: "sk-test", Model: "fake", MaxInputTokens: 4000, MaxRetries: 2}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := newRig(t, func(r *rig) { r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Model = client }) })
			// A thread of about 3,000 tokens: within the 4,000 budget, not
			// within half of it. Recorded before the engine looks, it is
			// one facilitator turn.
			words := strings.Repeat("insurance claim details ", 25) // about 150 tokens
			root := r.send("", "U1", "Ada", "question: "+words)
			for range 19 {
				r.send(root.TS, "U1", "Ada", words)
			}
			r.settle()
			reqs := fake.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want the first and one shorter retry (400 is not retried otherwise)", len(reqs))
			}
			if first, second := len(reqs[0].Body), len(reqs[1].Body); second >= first || second > first*2/3 {
				t.Errorf("the retry is %d bytes, the first %d: want the history cut to about half", second, first)
			}
			if got := lastMessage(reqs[1]); got != lastMessage(reqs[0]) {
				t.Errorf("the retry's phase prompt %q differs from %q", got, lastMessage(reqs[0]))
			}
			texts := r.chat.texts()
			if len(texts) != 1 || !strings.HasPrefix(texts[0], tt.wantPost) {
				t.Errorf("posts = %q, want one starting %q", texts, tt.wantPost)
			}
			for _, p := range texts {
				if strings.Contains(p, "HTTP 400") {
					t.Errorf("a generic error was posted: %q", p)
				}
			}
		})
	}
}

func lastMessage(r llmfake.Request) string { return r.Messages[len(r.Messages)-1].Content }
