package llmfake_test

import (
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// Every quirk of the corpus has its own name and is served: a plain
// request gets a reply or the error the quirk is about.
func TestQuirkCorpus(t *testing.T) {
	scene := llmfake.Scene{Text: "Cora will check claim C42.", Call: "cora.acme.137.protocol6022.eth", Name: "Cora",
		Key: "C45653", Tool: "crm__lookup", Args: `{"id": "C42"}`}
	seen := make(map[string]bool)
	for _, q := range llmfake.Quirks() {
		if q.Name == "" || seen[q.Name] || q.Seen == "" {
			t.Errorf("quirk %q: unnamed, repeated or undescribed", q.Name)
		}
		seen[q.Name] = true
		t.Run(q.Name, func(t *testing.T) {
			s := llmfake.New(t)
			s.Reply(llmfake.Quirked(q.Name, scene))
			_, err := newAPI(t, s, "k").CreateChatCompletion(t.Context(), chat("hi"))
			if wantErr := q.Name == llmfake.QuirkRefusesFormat; (err != nil) != wantErr {
				t.Errorf("err = %v, want an error: %v", err, wantErr)
			}
		})
	}
	if len(seen) < 25 {
		t.Errorf("%d quirks, want the whole corpus", len(seen))
	}
}

// RefuseResponseFormat refuses a request with response_format, naming it.
func TestRefuseResponseFormat(t *testing.T) {
	s := llmfake.New(t)
	s.RefuseResponseFormat()
	req := chat("hi")
	req.ResponseFormat = &openaiFormat
	_, err := newAPI(t, s, "k").CreateChatCompletion(t.Context(), req)
	if err == nil || !strings.Contains(err.Error(), "response_format") {
		t.Fatalf("err = %v, want a refusal naming response_format", err)
	}
	s.Reply(llmfake.Text("ok"))
	if _, err := newAPI(t, s, "k").CreateChatCompletion(t.Context(), chat("hi")); err != nil {
		t.Errorf("a request without response_format: %v", err)
	}
}

var openaiFormat = openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
