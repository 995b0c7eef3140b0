package llmfake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

func newAPI(t *testing.T, s *llmfake.Server, key string) *openai.Client {
	t.Helper()
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = s.URL()
	return openai.NewClientWithConfig(cfg)
}

func chat(content string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model: "fake-model",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "You are terse."},
			{Role: openai.ChatMessageRoleUser, Content: content},
		},
	}
}

func TestJSONReplies(t *testing.T) {
	tests := []struct {
		name       string
		reply      llmfake.Reply
		wantText   string
		wantFinish openai.FinishReason
		wantModel  string
		wantChoice bool
		wantUsage  openai.Usage
	}{
		{
			name: "text", reply: llmfake.Text("hello there"),
			wantText: "hello there", wantFinish: "stop", wantModel: "fake-model", wantChoice: true,
			// counted words: "You are terse." + "ping me" = 5, "hello there" = 2
			wantUsage: openai.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7},
		},
		{
			name: "truncated", reply: llmfake.Truncated("half an"),
			wantText: "half an", wantFinish: "length", wantModel: "fake-model", wantChoice: true,
			wantUsage: openai.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7},
		},
		{
			name: "blank", reply: llmfake.Blank(),
			wantText: " \n", wantFinish: "stop", wantModel: "fake-model", wantChoice: true,
			wantUsage: openai.Usage{PromptTokens: 5, CompletionTokens: 0, TotalTokens: 5},
		},
		{
			name: "no choices", reply: llmfake.NoChoices(), wantModel: "fake-model",
			wantUsage: openai.Usage{PromptTokens: 5, CompletionTokens: 0, TotalTokens: 5},
		},
		{
			name:     "explicit usage and model",
			reply:    llmfake.Reply{Content: "x", Model: "served", PromptTokens: 100, CompletionTokens: 7},
			wantText: "x", wantFinish: "stop", wantModel: "served", wantChoice: true,
			wantUsage: openai.Usage{PromptTokens: 100, CompletionTokens: 7, TotalTokens: 107},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmfake.New(t)
			s.Reply(tt.reply)
			resp, err := newAPI(t, s, "sk-test").CreateChatCompletion(t.Context(), chat("ping me"))
			if err != nil {
				t.Fatalf("CreateChatCompletion: %v", err)
			}
			if got := len(resp.Choices) > 0; got != tt.wantChoice {
				t.Fatalf("has choice = %v, want %v", got, tt.wantChoice)
			}
			if tt.wantChoice {
				c := resp.Choices[0]
				if c.Message.Content != tt.wantText || c.FinishReason != tt.wantFinish || c.Message.Role != "assistant" {
					t.Errorf("choice = %q %q %q, want assistant %q %q", c.Message.Role, c.Message.Content, c.FinishReason, tt.wantText, tt.wantFinish)
				}
			}
			if resp.Model != tt.wantModel {
				t.Errorf("model = %q, want %q", resp.Model, tt.wantModel)
			}
			if resp.Usage.PromptTokens != tt.wantUsage.PromptTokens ||
				resp.Usage.CompletionTokens != tt.wantUsage.CompletionTokens ||
				resp.Usage.TotalTokens != tt.wantUsage.TotalTokens {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tt.wantUsage)
			}
		})
	}
}

func TestErrorReplies(t *testing.T) {
	tests := []struct {
		name       string
		reply      llmfake.Reply
		wantStatus int
		wantMsg    string // in the library's error
		wantHeader string // Retry-After seen on the wire
	}{
		{"rate limited", llmfake.RateLimited("7"), 429, "rate limit reached", "7"},
		{"server error", llmfake.Error(503, "overloaded"), 503, "overloaded", ""},
		{"bad request", llmfake.Error(400, "bad messages"), 400, "bad messages", ""},
		{"html body", llmfake.Reply{Status: 502, Body: "<html>bad gateway</html>"}, 502, "<html>bad gateway</html>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmfake.New(t)
			s.Reply(tt.reply, tt.reply)
			_, err := newAPI(t, s, "").CreateChatCompletion(t.Context(), chat("x"))
			var apiErr *openai.APIError
			var reqErr *openai.RequestError
			switch {
			case errors.As(err, &apiErr):
				if apiErr.HTTPStatusCode != tt.wantStatus || apiErr.Message != tt.wantMsg {
					t.Errorf("APIError = %d %q, want %d %q", apiErr.HTTPStatusCode, apiErr.Message, tt.wantStatus, tt.wantMsg)
				}
			case errors.As(err, &reqErr):
				if reqErr.HTTPStatusCode != tt.wantStatus || string(reqErr.Body) != tt.wantMsg {
					t.Errorf("RequestError = %d %q, want %d %q", reqErr.HTTPStatusCode, reqErr.Body, tt.wantStatus, tt.wantMsg)
				}
			default:
				t.Fatalf("err = %v, want an API or request error", err)
			}

			// The same reply over plain HTTP, for the header.
			resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || resp.Header.Get("Retry-After") != tt.wantHeader {
				t.Errorf("wire: %d Retry-After %q, want %d %q", resp.StatusCode, resp.Header.Get("Retry-After"), tt.wantStatus, tt.wantHeader)
			}
		})
	}
}

func TestStream(t *testing.T) {
	tests := []struct {
		name         string
		reply        llmfake.Reply
		includeUsage bool
		wantText     string
		wantFinish   openai.FinishReason
		wantUsage    *openai.Usage
	}{
		{
			name: "text with usage", reply: llmfake.Text("Hello, wörld — streamed in pieces!"), includeUsage: true,
			wantText: "Hello, wörld — streamed in pieces!", wantFinish: "stop",
			wantUsage: &openai.Usage{PromptTokens: 4, CompletionTokens: 6, TotalTokens: 10}, // "You are terse." + "stream"
		},
		{
			name: "explicit chunks", reply: llmfake.Reply{Content: "abc", Chunks: []string{"a", "b", "c"}},
			wantText: "abc", wantFinish: "stop",
		},
		{
			name: "truncated", reply: llmfake.Truncated("cut sho"),
			wantText: "cut sho", wantFinish: "length",
		},
		{
			name: "no choices", reply: llmfake.NoChoices(), includeUsage: true,
			wantUsage: &openai.Usage{PromptTokens: 4, CompletionTokens: 0, TotalTokens: 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmfake.New(t)
			s.Reply(tt.reply)
			req := chat("stream")
			req.Stream = true
			if tt.includeUsage {
				req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
			}
			stream, err := newAPI(t, s, "sk-test").CreateChatCompletionStream(t.Context(), req)
			if err != nil {
				t.Fatalf("CreateChatCompletionStream: %v", err)
			}
			defer stream.Close()
			var text strings.Builder
			var finish openai.FinishReason
			var usage *openai.Usage
			var deltas int
			for {
				chunk, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Recv: %v", err)
				}
				if chunk.Usage != nil {
					usage = chunk.Usage
				}
				for _, c := range chunk.Choices {
					if c.Delta.Content != "" {
						deltas++
					}
					text.WriteString(c.Delta.Content)
					if c.FinishReason != "" {
						finish = c.FinishReason
					}
				}
			}
			if text.String() != tt.wantText || finish != tt.wantFinish {
				t.Errorf("stream = %q finish %q, want %q %q", text.String(), finish, tt.wantText, tt.wantFinish)
			}
			if len(tt.wantText) > 8 && deltas < 2 {
				t.Errorf("content came in %d delta(s), want it split", deltas)
			}
			if (usage == nil) != (tt.wantUsage == nil) || usage != nil &&
				(usage.PromptTokens != tt.wantUsage.PromptTokens || usage.CompletionTokens != tt.wantUsage.CompletionTokens || usage.TotalTokens != tt.wantUsage.TotalTokens) {
				t.Errorf("usage = %+v, want %+v", usage, tt.wantUsage)
			}
			got := s.Requests()
			if len(got) != 1 || !got[0].Stream || got[0].IncludeUsage != tt.includeUsage || got[0].Header.Get("Accept") != "text/event-stream" {
				t.Errorf("recorded %+v, want one streaming request", got)
			}
		})
	}
}

func TestStreamError(t *testing.T) {
	s := llmfake.New(t)
	s.Reply(llmfake.RateLimited("1"))
	req := chat("x")
	req.Stream = true
	_, err := newAPI(t, s, "").CreateChatCompletionStream(t.Context(), req)
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 429 {
		t.Fatalf("err = %v, want a 429 APIError", err)
	}
}

func TestRecordsRequest(t *testing.T) {
	s := llmfake.New(t)
	s.Reply(llmfake.Text("ok"))
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = s.URL()
	req := chat("what is 2+2?")
	req.Temperature = 0.25
	req.MaxCompletionTokens = 64
	req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	req.Messages = append(req.Messages, openai.ChatCompletionMessage{
		Role: "user", MultiContent: []openai.ChatMessagePart{{Type: "text", Text: "part one"}, {Type: "text", Text: "part two"}},
	})
	if _, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	got := s.Requests()
	if len(got) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(got))
	}
	r := got[0]
	want := []llmfake.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "what is 2+2?"},
		{Role: "user", Content: "part one\npart two"},
	}
	if fmt.Sprint(r.Messages) != fmt.Sprint(want) {
		t.Errorf("messages = %+v, want %+v", r.Messages, want)
	}
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Model != "fake-model" {
		t.Errorf("got %s %s model %q", r.Method, r.Path, r.Model)
	}
	if r.Temperature == nil || *r.Temperature != 0.25 {
		t.Errorf("temperature = %v, want 0.25", r.Temperature)
	}
	if r.MaxCompletionTokens == nil || *r.MaxCompletionTokens != 64 || r.MaxTokens != nil || r.Has("max_tokens") {
		t.Errorf("max_completion_tokens = %v, max_tokens = %v", r.MaxCompletionTokens, r.MaxTokens)
	}
	if r.ResponseFormat != "json_object" {
		t.Errorf("response_format = %q", r.ResponseFormat)
	}
	if r.Header.Get("Authorization") != "Bearer sk-test" || !r.Has("stream") || r.Stream {
		t.Errorf("auth %q, stream key %v %v", r.Header.Get("Authorization"), r.Has("stream"), r.Stream)
	}
	if !strings.Contains(string(r.Body), `"model":"fake-model"`) {
		t.Errorf("raw body = %s", r.Body)
	}
}

func TestHandleAfterQueue(t *testing.T) {
	s := llmfake.New(t)
	s.Reply(llmfake.Text("queued"))
	s.Handle(func(r llmfake.Request) llmfake.Reply {
		return llmfake.Text("echo: " + r.Messages[len(r.Messages)-1].Content)
	})
	api := newAPI(t, s, "")
	var got []string
	for _, q := range []string{"one", "two"} {
		resp, err := api.CreateChatCompletion(t.Context(), chat(q))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.Choices[0].Message.Content)
	}
	if want := "[queued echo: two]"; fmt.Sprint(got) != want {
		t.Errorf("replies = %v, want %s", got, want)
	}
	if s.Pending() != 0 {
		t.Errorf("pending = %d", s.Pending())
	}
}

// failRecorder stands in for a test to catch the failure the fake reports.
type failRecorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (f *failRecorder) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, fmt.Sprintf(format, args...))
}

func TestUnscriptedRequestFails(t *testing.T) {
	rec := &failRecorder{TB: t}
	s := llmfake.New(rec)
	_, err := newAPI(t, s, "").CreateChatCompletion(t.Context(), chat("x"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 {
		t.Errorf("err = %v, want a 500", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.failed) != 1 || !strings.Contains(rec.failed[0], "no scripted reply") {
		t.Errorf("reported failures = %q", rec.failed)
	}
}

func TestRequireAPIKey(t *testing.T) {
	tests := []struct {
		name, key  string
		wantStatus int
	}{
		{"right key", "sk-right", 0},
		{"wrong key", "sk-wrong", 401},
		{"no key", "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmfake.New(t)
			s.RequireAPIKey("sk-right")
			s.Reply(llmfake.Text("ok"))
			_, err := newAPI(t, s, tt.key).CreateChatCompletion(t.Context(), chat("x"))
			var apiErr *openai.APIError
			switch {
			case tt.wantStatus == 0 && err != nil:
				t.Errorf("err = %v", err)
			case tt.wantStatus != 0 && (!errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tt.wantStatus):
				t.Errorf("err = %v, want status %d", err, tt.wantStatus)
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		wantStatus               int
	}{
		{"not JSON", "POST", "/v1/chat/completions", "{nope", 400},
		{"JSON array", "POST", "/v1/chat/completions", "[]", 400},
		{"other path", "POST", "/v1/embeddings", "{}", 404},
		{"GET", "GET", "/v1/chat/completions", "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmfake.New(t)
			req, err := http.NewRequestWithContext(t.Context(), tt.method, strings.TrimSuffix(s.URL(), "/v1")+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := s.Requests(); len(got) != 1 || got[0].Path != tt.path {
				t.Errorf("recorded %+v, want the request recorded", got)
			}
		})
	}
}

func TestDelayEndsWithClient(t *testing.T) {
	s := llmfake.New(t)
	s.Reply(llmfake.Slow(time.Hour, "too late"), llmfake.Text("on time"))
	api := newAPI(t, s, "")
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		if _, err := s.Wait(t.Context(), 1); err == nil {
			cancel()
		}
	}()
	if _, err := api.CreateChatCompletion(ctx, chat("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	resp, err := api.CreateChatCompletion(t.Context(), chat("x"))
	if err != nil || resp.Choices[0].Message.Content != "on time" {
		t.Fatalf("second call = %v, %v", resp, err)
	}
}

func TestWait(t *testing.T) {
	s := llmfake.New(t)
	s.Handle(func(r llmfake.Request) llmfake.Reply { return llmfake.Text("ok") })
	api := newAPI(t, s, "")
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := api.CreateChatCompletion(context.Background(), chat(fmt.Sprint("q", i))); err != nil {
				t.Error(err)
			}
		})
	}
	got, err := s.Wait(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, r := range got {
		seen[r.Messages[1].Content] = true
	}
	if len(seen) != n {
		t.Errorf("saw %d distinct prompts, want %d", len(seen), n)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Wait(ctx, n+1); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait for more = %v, want canceled", err)
	}
}

func TestCloseEndsSlowReplies(t *testing.T) {
	s := llmfake.New(t)
	s.Reply(llmfake.Slow(time.Hour, "never"))
	api := newAPI(t, s, "")
	done := make(chan error, 1)
	go func() {
		_, err := api.CreateChatCompletion(context.Background(), chat("x"))
		done <- err
	}()
	if _, err := s.Wait(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := <-done; err == nil {
		t.Error("a reply held back past Close came through")
	}
}

// A streamed reply carries its tool calls as indexed deltas, which the
// real client reassembles.
func TestStreamToolCalls(t *testing.T) {
	s := llmfake.New(t)
	s.Reply(llmfake.Calls(llmfake.Call("crm__lookup", `{"id":"C42"}`), llmfake.ToolCall{ID: "x", Name: "crm__ping"}))
	req := chat("stream")
	req.Stream = true
	stream, err := newAPI(t, s, "sk-test").CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var calls []openai.ToolCall
	var finish openai.FinishReason
	for {
		chunk, err := stream.Recv()
		if err != nil {
			break
		}
		for _, c := range chunk.Choices {
			calls = append(calls, c.Delta.ToolCalls...)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[0].Function.Name != "crm__lookup" || calls[0].Function.Arguments != `{"id":"C42"}` ||
		calls[1].ID != "x" || calls[1].Function.Arguments != "{}" || *calls[1].Index != 1 || finish != "tool_calls" {
		t.Errorf("calls = %+v, finish %q", calls, finish)
	}
}
