package llm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// scene is what the quirked replies of these tests mean to say.
var scene = llmfake.Scene{
	Text: "Cora will check claim C42.", Call: "cora.acme.137.protocol6022.eth", Name: "Cora",
	Key: "C45653", Tool: "crm__lookup", Args: `{"id": "C42"}`,
}

// Reasoning never reaches Response.Content, whichever way the model
// writes it, streamed or not; it is kept in Response.Reasoning.
func TestReasoningIsRemoved(t *testing.T) {
	tests := []struct {
		quirk         string
		wantContent   string
		wantReasoning bool
	}{
		{llmfake.QuirkThink, scene.Text, true},
		{llmfake.QuirkThinking, scene.Text, true},
		{llmfake.QuirkReasoning, scene.Text, true},
		{llmfake.QuirkReasoningContent, scene.Text, true},
		{llmfake.QuirkEmptyThink, scene.Text, false},
	}
	for _, tt := range tests {
		for _, streamed := range []bool{false, true} {
			name := tt.quirk
			if streamed {
				name += "/streamed"
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t, nil, nil)
				r.fake.Reply(llmfake.Quirked(tt.quirk, scene))
				var shown []string
				var resp llm.Response
				var err error
				if streamed {
					resp, err = r.client.Stream(t.Context(), ask("hi"), func(s string) { shown = append(shown, s) })
				} else {
					resp, err = r.client.Complete(t.Context(), ask("hi"))
				}
				if err != nil {
					t.Fatal(err)
				}
				if resp.Content != tt.wantContent {
					t.Errorf("content = %q, want %q", resp.Content, tt.wantContent)
				}
				if got := resp.Reasoning != ""; got != tt.wantReasoning {
					t.Errorf("reasoning = %q, want some: %v", resp.Reasoning, tt.wantReasoning)
				}
				if tt.wantReasoning && !strings.Contains(resp.Reasoning, ":end:") {
					t.Errorf("reasoning = %q, want the thought kept whole", resp.Reasoning)
				}
				for _, s := range shown {
					if strings.Contains(s, ":end:") || strings.Contains(s, "<") || strings.Contains(s, scene.Call) {
						t.Errorf("the stream showed %q", s)
					}
				}
				if streamed && (len(shown) == 0 || shown[len(shown)-1] != tt.wantContent) {
					t.Errorf("the stream showed %q, want it to end with the reply", shown)
				}
			})
		}
	}
}

// A reasoning block cut by the length limit leaves nothing: an empty
// reply at the limit, not retried.
func TestUnterminatedReasoningIsAnEmptyReplyAtTheLimit(t *testing.T) {
	r := newRig(t, nil, nil)
	r.fake.Reply(llmfake.Quirked(llmfake.QuirkUnterminated, scene))
	_, err := r.client.Complete(t.Context(), ask("hi"))
	var le *llm.Error
	if !errors.As(err, &le) || le.Reason != llm.ReasonLength || !errors.Is(err, llm.ErrEmptyReply) {
		t.Fatalf("err = %v, want an empty reply at the length limit", err)
	}
	if n := len(r.fake.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (no retry)", n)
	}
}

func TestSplitsOnEdgeCases(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"closing tag only", "plan it\n</think>\nThe answer.", "The answer."},
		{"two blocks", "<think>a</think>One.<think>b</think> Two.", "One. Two."},
		{"tag in any case", "<Think>x</THINK>Done.", "Done."},
		{"no tag", "Plain <b>text</b>.", "Plain <b>text</b>."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil, nil)
			r.fake.Reply(llmfake.Text(tt.in))
			resp, err := r.client.Complete(t.Context(), ask("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != tt.want {
				t.Errorf("content = %q, want %q", resp.Content, tt.want)
			}
		})
	}
}

// A Llama text tool call is a tool call when tools were offered, and
// removed otherwise; either way it is not content.
func TestTextToolCalls(t *testing.T) {
	reply := llmfake.Quirked(llmfake.QuirkPythonTag, scene)
	t.Run("with tools", func(t *testing.T) {
		r := newRig(t, nil, nil)
		r.fake.Reply(reply)
		req := ask("who is C42?")
		req.Tools = []llm.Tool{{Name: "crm__lookup"}}
		resp, err := r.client.Complete(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "crm__lookup" || resp.ToolCalls[0].Arguments != `{"id": "C42"}` || resp.ToolCalls[0].ID == "" {
			t.Errorf("tool calls = %+v, want the text call read", resp.ToolCalls)
		}
		if resp.Content != "" {
			t.Errorf("content = %q, want none", resp.Content)
		}
	})
	t.Run("without tools", func(t *testing.T) {
		r := newRig(t, nil, nil)
		r.fake.Reply(llmfake.Text("Let me look. "+reply.Content), llmfake.Text("fine"))
		resp, err := r.client.Complete(t.Context(), ask("who is C42?"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "Let me look." || len(resp.ToolCalls) != 0 {
			t.Errorf("content = %q, calls %+v; want the call removed", resp.Content, resp.ToolCalls)
		}
	})
	t.Run("hermes block, two calls", func(t *testing.T) {
		r := newRig(t, nil, nil)
		r.fake.Reply(llmfake.Text(`<tool_call>{"name": "a", "arguments": {"x": 1}}; {"name": "b", "arguments": "{\"y\":2}"}</tool_call>`))
		req := ask("go")
		req.Tools = []llm.Tool{{Name: "a"}, {Name: "b"}}
		resp, err := r.client.Complete(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].Arguments != `{"x": 1}` || resp.ToolCalls[1].Arguments != `{"y":2}` {
			t.Errorf("tool calls = %+v", resp.ToolCalls)
		}
	})
}

// Tool-call arguments that are almost JSON are repaired.
func TestToolArgumentsRepaired(t *testing.T) {
	r := newRig(t, nil, nil)
	r.fake.Reply(llmfake.Quirked(llmfake.QuirkMalformedArgs, scene))
	req := ask("who is C42?")
	req.Tools = []llm.Tool{{Name: "crm__lookup"}}
	resp, err := r.client.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != `{"id": "C42"}` {
		t.Errorf("tool calls = %+v, want the arguments repaired", resp.ToolCalls)
	}
}

// Empty replies stopped by the length limit or the content filter are
// not retried, and say which.
func TestEmptyRepliesAtALimitAreNotRetried(t *testing.T) {
	for quirk, reason := range map[string]string{
		llmfake.QuirkEmptyLength:   llm.ReasonLength,
		llmfake.QuirkEmptyFiltered: llm.ReasonFiltered,
	} {
		t.Run(quirk, func(t *testing.T) {
			r := newRig(t, nil, nil)
			r.fake.Reply(llmfake.Quirked(quirk, scene))
			_, err := r.client.Complete(t.Context(), ask("hi"))
			var le *llm.Error
			if !errors.As(err, &le) || le.Reason != reason || le.Attempts != 1 {
				t.Fatalf("err = %v, want %q after one attempt", err, reason)
			}
			if n := len(r.fake.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// A partial reply cut by the content filter comes back, marked as
// filtered.
func TestFilteredReplyIsReturned(t *testing.T) {
	r := newRig(t, nil, nil)
	r.fake.Reply(llmfake.Quirked(llmfake.QuirkFilteredCut, scene))
	resp, err := r.client.Complete(t.Context(), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Filtered() || resp.Content == "" {
		t.Errorf("response = %+v, want partial content marked filtered", resp)
	}
}

// A stream that goes silent times out on its idle timeout, however long
// the per-attempt timeout is, and is retried; a slow steady stream
// outlasting the per-attempt timeout is not cut.
func TestStreamIdleTimeout(t *testing.T) {
	t.Run("silence", func(t *testing.T) {
		r := newRig(t, func(p *llm.Profile) { p.IdleTimeout = 100 * time.Millisecond; p.Timeout = time.Hour }, nil)
		r.fake.Reply(llmfake.Quirked(llmfake.QuirkSilence, scene), llmfake.Text("again"))
		resp, err := r.client.Stream(t.Context(), ask("hi"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "again" || resp.Attempts != 2 {
			t.Errorf("response = %q after %d attempts, want the retry's", resp.Content, resp.Attempts)
		}
		if !strings.Contains(r.logs.String(), "idle_timeout") {
			t.Errorf("the retry does not say the stream was idle:\n%s", r.logs)
		}
	})
	t.Run("slow but steady", func(t *testing.T) {
		r := newRig(t, func(p *llm.Profile) { p.IdleTimeout = time.Hour; p.Timeout = 50 * time.Millisecond }, nil)
		pace := make(chan struct{})
		r.fake.Reply(llmfake.Reply{Content: "one two three", Chunks: []string{"one ", "two ", "three"}, Pace: pace})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 2 {
				// Each piece waits past the per-attempt timeout.
				timer := time.NewTimer(80 * time.Millisecond)
				<-timer.C
				pace <- struct{}{}
			}
		}()
		resp, err := r.client.Stream(t.Context(), ask("hi"), nil)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "one two three" || resp.Attempts != 1 {
			t.Errorf("response = %q after %d attempts", resp.Content, resp.Attempts)
		}
	})
}

// An endpoint that refuses response_format gets the request again
// without it, and is remembered: the next JSON request goes without it
// at once; a WARN says so, once.
func TestResponseFormatFallback(t *testing.T) {
	r := newRig(t, nil, nil)
	r.fake.RefuseResponseFormat()
	r.fake.Reply(llmfake.Text(`{"session": "C1"}`), llmfake.Text(`{"session": "C2"}`))
	req := ask("which key?")
	req.JSON = true
	for i, want := range []string{`{"session": "C1"}`, `{"session": "C2"}`} {
		resp, err := r.client.Complete(t.Context(), req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if resp.Content != want {
			t.Errorf("request %d: content %q, want %q", i, resp.Content, want)
		}
	}
	reqs := r.fake.Requests()
	if len(reqs) != 3 || reqs[0].ResponseFormat != "json_object" || reqs[1].Has("response_format") || reqs[2].Has("response_format") {
		t.Fatalf("requests: %d, response formats %v", len(reqs), formats(reqs))
	}
	if n := strings.Count(r.logs.String(), "refuses response_format"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, r.logs)
	}
	// Another 400 is not taken for a refusal.
	r2 := newRig(t, nil, nil)
	r2.fake.Reply(llmfake.Error(400, "messages: too long"))
	if _, err := r2.client.Complete(t.Context(), req); err == nil || len(r2.fake.Requests()) != 1 {
		t.Errorf("err = %v after %d requests, want one refused request", err, len(r2.fake.Requests()))
	}
}

func formats(reqs []llmfake.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.ResponseFormat)
	}
	return out
}
