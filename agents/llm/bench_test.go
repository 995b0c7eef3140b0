package llm_test

import (
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// benchMessages is a typical turn: a system prompt, some history, the phase
// prompt.
func benchMessages() []llm.Message {
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: "You are Elen, the facilitator of the claims desk."}}
	for i := range 10 {
		role := llm.RoleUser
		if i%3 == 2 {
			role = llm.RoleAssistant
		}
		msgs = append(msgs, llm.Message{Role: role, Content: "Alice (person): the claim C45653 was filed on Monday; what happens next?"})
	}
	return append(msgs, llm.Message{Role: llm.RoleUser, Content: "Answer the latest request."})
}

// BenchmarkComplete is one call through the client against the fake, the
// fake's own work included; compare with BenchmarkGoOpenAI for the
// client's overhead.
func BenchmarkComplete(b *testing.B) { benchComplete(b, "The claim goes to review.") }

// benchComplete makes one call through the client a loop, the fake
// answering reply.
func benchComplete(b *testing.B, reply string) {
	fake := llmfake.New(b)
	fake.Handle(func(llmfake.Request) llmfake.Reply { return llmfake.Text(reply) })
	c, err := llm.New(llm.Profile{BaseURL: fake.URL(), APIKey: "sk-bench", Model: "fake-model", Temperature: ptr(0.0), MaxTokens: 256, JSONMode: true,
		Headers: map[string]string{"X-Team": "acme"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	req := llm.Request{Messages: benchMessages(), JSON: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Complete(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGoOpenAI is the same call made with go-openai directly.
func BenchmarkGoOpenAI(b *testing.B) {
	fake := llmfake.New(b)
	fake.Handle(func(llmfake.Request) llmfake.Reply { return llmfake.Text("The claim goes to review.") })
	cfg := openai.DefaultConfig("sk-bench")
	cfg.BaseURL = fake.URL()
	api := openai.NewClientWithConfig(cfg)
	var msgs []openai.ChatCompletionMessage
	for _, m := range benchMessages() {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: m.Role, Content: m.Content})
	}
	//lint:ignore SA1019 the same body the client sends
	req := openai.ChatCompletionRequest{Model: "fake-model", Messages: msgs, MaxTokens: 256, Temperature: 1e-45,
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := api.CreateChatCompletion(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// thinkReply is a reasoning model's reply: a 4,000-character <think>
// block, then the answer.
func thinkReply() string {
	thought := strings.Repeat("The user asks about claim C45653; the policy covers glass. ", 70)[:4000]
	return "<think>\n" + thought + "\n</think>\n\nThe claim goes to review."
}

// BenchmarkCompleteThink is BenchmarkComplete answered by a reasoning
// model: the <think> block is removed before the content is returned.
// Run on a build without the removal, it measures what the removal adds.
func BenchmarkCompleteThink(b *testing.B) { benchComplete(b, thinkReply()) }
