// Package llmfake is an in-process OpenAI-compatible chat completions server
// for tests. It answers POST /v1/chat/completions in plain JSON or as a
// server-sent event stream (when the request says "stream": true), plays
// scripted replies, injects failures (status codes, Retry-After, error
// bodies, empty or truncated replies, delays) and records every request so a
// test can assert on the exact prompt that was sent.
//
// A Server is safe for concurrent use: the code under test calls it from its
// own goroutines while the test scripts replies and reads what was recorded.
package llmfake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reply is one scripted answer. The zero value answers 200 with blank
// content; use Text, Error and the other constructors for the usual cases.
type Reply struct {
	// Content is the assistant message. Blank content is a valid reply
	// (which a careful client treats as empty).
	Content string
	// ReasoningContent is sent as the message's reasoning_content field
	// (DeepSeek's and vLLM's reasoning parsers), streamed before Content.
	ReasoningContent string
	// ToolCalls are function calls the assistant asks for (see Calls).
	ToolCalls []ToolCall
	// FinishReason defaults to "stop", or "tool_calls" with ToolCalls.
	FinishReason string
	// Model is echoed in the reply; it defaults to the requested model.
	Model string
	// PromptTokens and CompletionTokens fill usage. When both are zero, they
	// are counted as whitespace-separated words of the request's messages and
	// of Content, so usage is never silently zero.
	PromptTokens, CompletionTokens int
	// NoChoices answers with "choices": [].
	NoChoices bool
	// Chunks splits Content for a streamed reply; by default Content is sent
	// in pieces of about eight bytes, cut at rune boundaries.
	Chunks []string
	// Pace, when not nil, holds a streamed reply back before each piece
	// after the first until a value is received from it (or the client
	// goes away, or the server closes), so a test decides when the model
	// writes on; closing it lets the rest flow.
	Pace <-chan struct{}
	// Cut ends a streamed reply after its pieces, with no finish reason
	// and no [DONE], as a dropped connection leaves it.
	Cut bool

	// Status, when not 2xx, makes the reply an error: an OpenAI-style
	// {"error":{…}} body with ErrorMessage and ErrorType, or Body verbatim.
	Status       int
	ErrorMessage string
	ErrorType    string
	// RetryAfter is sent as the Retry-After header when not empty.
	RetryAfter string
	// Header adds response headers.
	Header http.Header
	// Body, when not empty, is written verbatim instead of the JSON the
	// other fields describe (malformed bodies, proxies' HTML pages).
	Body string

	// Delay holds the answer back; it ends early when the client goes away
	// or the server closes, so a client's timeout can be triggered cheaply.
	Delay time.Duration
}

// Text is a normal reply with content.
func Text(content string) Reply { return Reply{Content: content} }

// ToolCall is one function call of a scripted reply. An empty ID is
// filled with "call_<n>" (n counting from 1 within the reply).
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text; "{}" when empty
}

// Calls is a reply that asks for tool calls and has no content.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Call is one tool call with its arguments as JSON text.
func Call(name, arguments string) ToolCall { return ToolCall{Name: name, Arguments: arguments} }

// Truncated is a reply cut by the token limit: finish_reason "length".
func Truncated(content string) Reply { return Reply{Content: content, FinishReason: "length"} }

// Blank is a 200 reply whose content is only white space.
func Blank() Reply { return Reply{Content: " \n"} }

// NoChoices is a 200 reply with an empty choices list.
func NoChoices() Reply { return Reply{NoChoices: true} }

// Error is an error reply with an OpenAI-style body.
func Error(status int, message string) Reply {
	return Reply{Status: status, ErrorMessage: message, ErrorType: errorType(status)}
}

// RateLimited is a 429 with a Retry-After header (seconds or an HTTP date).
func RateLimited(retryAfter string) Reply {
	r := Error(http.StatusTooManyRequests, "rate limit reached")
	r.RetryAfter = retryAfter
	return r
}

// Slow is a normal reply held back by d.
func Slow(d time.Duration, content string) Reply { return Reply{Content: content, Delay: d} }

func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	default:
		return "invalid_request_error"
	}
}

// Message is one chat message of a recorded request.
type Message struct {
	Role       string
	Content    string // text parts joined by "\n" when the content was an array
	Name       string
	ToolCallID string // what a "tool" message answers
	// ToolCalls are the calls an "assistant" message asked for, one per
	// line: "<id> <name> <arguments>" (text, so a Message stays comparable).
	ToolCalls string
}

// Tool is one function tool a request offered.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Request is one recorded request. Pointer fields are nil when the key was
// absent from the body, so tests can tell "0" from "not sent".
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte         // the raw body
	Fields map[string]any // the body decoded generically: every key sent

	Model               string
	Messages            []Message
	Tools               []Tool // the function tools offered; nil when the key was absent
	Temperature         *float64
	MaxTokens           *int
	MaxCompletionTokens *int
	ResponseFormat      string // response_format.type, "" when absent
	Stream              bool
	IncludeUsage        bool // stream_options.include_usage
}

// Has reports whether the body carried key at its top level.
func (r Request) Has(key string) bool {
	_, ok := r.Fields[key]
	return ok
}

// Server is the fake endpoint. Create one with New.
type Server struct {
	t    testing.TB
	srv  *httptest.Server
	done chan struct{}

	mu       sync.Mutex
	queue    []Reply
	handler  func(Request) Reply
	apiKey   string
	noFormat bool // RefuseResponseFormat
	requests []Request
	changed  chan struct{} // closed and replaced whenever a request is recorded
}

// New starts a fake server that is closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, done: make(chan struct{}), changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Close stops the server, ending delayed replies first. It is called by the
// test's cleanup and may be called earlier, for example to make the endpoint
// unreachable.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return
	default:
		close(s.done)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// URL is the base URL to configure a client with; it ends in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Reply queues replies, answered in order, one per request.
func (s *Server) Reply(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Handle sets the function that answers when the queue is empty. Without
// one, a request finding the queue empty fails the test and gets a 500.
func (s *Server) Handle(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = f
}

// RequireAPIKey makes the server answer 401 to requests that do not carry
// "Authorization: Bearer <key>".
func (s *Server) RequireAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// RefuseResponseFormat makes the server answer 400, naming the
// parameter, to every request that carries response_format, as some
// local servers and gateways do; such a request takes no scripted reply.
func (s *Server) RefuseResponseFormat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noFormat = true
}

// Requests returns a copy of every request recorded so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Pending reports how many queued replies have not been used.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Wait blocks until at least n requests were recorded and returns the first
// n, or returns ctx's error.
func (s *Server) Wait(ctx context.Context, n int) ([]Request, error) {
	for {
		s.mu.Lock()
		if len(s.requests) >= n {
			got := append([]Request(nil), s.requests[:n]...)
			s.mu.Unlock()
			return got, nil
		}
		changed, have := s.changed, len(s.requests)
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("llmfake: waiting for %d requests, have %d: %w", n, have, ctx.Err())
		}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, Error(http.StatusBadRequest, "reading body: "+err.Error()))
		return
	}
	req := decodeRequest(r, body)

	s.mu.Lock()
	s.requests = append(s.requests, req)
	close(s.changed)
	s.changed = make(chan struct{})
	wantKey, noFormat := s.apiKey, s.noFormat
	s.mu.Unlock()

	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		writeError(w, Error(http.StatusNotFound, "llmfake: no route "+r.Method+" "+r.URL.Path))
		return
	case req.Fields == nil:
		writeError(w, Error(http.StatusBadRequest, "llmfake: body is not a JSON object"))
		return
	case wantKey != "" && r.Header.Get("Authorization") != "Bearer "+wantKey:
		writeError(w, Error(http.StatusUnauthorized, "llmfake: wrong or missing API key"))
		return
	case noFormat && req.Has("response_format"):
		writeError(w, refusedFormat())
		return
	}

	reply, ok := s.next(req)
	if !ok {
		s.t.Errorf("llmfake: request %d found no scripted reply", len(s.Requests()))
		writeError(w, Error(http.StatusInternalServerError, "llmfake: no reply scripted"))
		return
	}
	if reply.Delay > 0 {
		timer := time.NewTimer(reply.Delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	for k, vs := range reply.Header {
		w.Header()[k] = append([]string(nil), vs...)
	}
	if reply.RetryAfter != "" {
		w.Header().Set("Retry-After", reply.RetryAfter)
	}
	switch {
	case reply.Status != 0 && (reply.Status < 200 || reply.Status > 299):
		writeError(w, reply)
	case reply.Body != "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(statusOr200(reply.Status))
		_, _ = io.WriteString(w, reply.Body)
	case req.Stream:
		writeStream(w, req, reply, func() bool {
			select {
			case <-reply.Pace:
				return true
			case <-r.Context().Done():
			case <-s.done:
			}
			return false
		})
	default:
		writeJSON(w, statusOr200(reply.Status), completion(req, reply))
	}
}

// next takes the reply for req: the queue first, then the handler.
func (s *Server) next(req Request) (Reply, bool) {
	s.mu.Lock()
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return r, true
	}
	h := s.handler
	s.mu.Unlock()
	if h == nil {
		return Reply{}, false
	}
	return h(req), true
}

func statusOr200(status int) int {
	if status == 0 {
		return http.StatusOK
	}
	return status
}

func decodeRequest(r *http.Request, body []byte) Request {
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var fields map[string]any
	if json.Unmarshal(body, &fields) != nil || fields == nil {
		return req
	}
	req.Fields = fields
	var wire struct {
		Model               string   `json:"model"`
		Temperature         *float64 `json:"temperature"`
		MaxTokens           *int     `json:"max_tokens"`
		MaxCompletionTokens *int     `json:"max_completion_tokens"`
		Stream              bool     `json:"stream"`
		ResponseFormat      *struct {
			Type string `json:"type"`
		} `json:"response_format"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			Name       string          `json:"name"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []wireToolCall  `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	// Fields of the wrong type are left zero; Fields still shows them.
	_ = json.Unmarshal(body, &wire)
	req.Model = wire.Model
	req.Temperature = wire.Temperature
	req.MaxTokens = wire.MaxTokens
	req.MaxCompletionTokens = wire.MaxCompletionTokens
	req.Stream = wire.Stream
	if wire.ResponseFormat != nil {
		req.ResponseFormat = wire.ResponseFormat.Type
	}
	if wire.StreamOptions != nil {
		req.IncludeUsage = wire.StreamOptions.IncludeUsage
	}
	for _, m := range wire.Messages {
		msg := Message{Role: m.Role, Content: contentText(m.Content), Name: m.Name, ToolCallID: m.ToolCallID}
		var calls []string
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID+" "+c.Function.Name+" "+c.Function.Arguments)
		}
		msg.ToolCalls = strings.Join(calls, "\n")
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range wire.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return req
}

// contentText reads a message's content: a string, or an array of parts
// whose text parts are joined.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Wire shapes of the replies, as OpenAI sends them.
type (
	wireUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	wireMessage struct {
		Role             string         `json:"role,omitempty"`
		Content          string         `json:"content,omitempty"`
		ReasoningContent string         `json:"reasoning_content,omitempty"`
		ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	}
	wireToolCall struct {
		Index    *int   `json:"index,omitempty"`
		ID       string `json:"id,omitempty"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name,omitempty"`
			Arguments string `json:"arguments,omitempty"`
		} `json:"function"`
	}
	wireChoice struct {
		Index        int          `json:"index"`
		Message      *wireMessage `json:"message,omitempty"`
		Delta        *wireMessage `json:"delta,omitempty"`
		FinishReason *string      `json:"finish_reason"`
	}
	wireCompletion struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   *wireUsage   `json:"usage,omitempty"`
	}
)

const created = 1700000000 // fixed, so replies are reproducible

func completion(req Request, reply Reply) wireCompletion {
	c := wireCompletion{
		ID: "chatcmpl-fake", Object: "chat.completion", Created: created,
		Model: modelOf(req, reply), Choices: []wireChoice{}, Usage: usage(req, reply),
	}
	if !reply.NoChoices {
		finish := finishOf(reply)
		c.Choices = append(c.Choices, wireChoice{
			Message: &wireMessage{Role: "assistant", Content: reply.Content, ReasoningContent: reply.ReasoningContent,
				ToolCalls: wireCalls(reply, false)},
			FinishReason: &finish,
		})
	}
	return c
}

// wireCalls writes a reply's tool calls; streamed ones carry their index.
func wireCalls(reply Reply, indexed bool) []wireToolCall {
	var out []wireToolCall
	for i, c := range reply.ToolCalls {
		w := wireToolCall{ID: c.ID, Type: "function"}
		if w.ID == "" {
			w.ID = fmt.Sprintf("call_%d", i+1)
		}
		if indexed {
			w.Index = &i
		}
		w.Function.Name = c.Name
		w.Function.Arguments = c.Arguments
		if w.Function.Arguments == "" {
			w.Function.Arguments = "{}"
		}
		out = append(out, w)
	}
	return out
}

func modelOf(req Request, reply Reply) string {
	if reply.Model != "" {
		return reply.Model
	}
	return req.Model
}

func finishOf(reply Reply) string {
	if reply.FinishReason != "" {
		return reply.FinishReason
	}
	if len(reply.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func usage(req Request, reply Reply) *wireUsage {
	u := wireUsage{PromptTokens: reply.PromptTokens, CompletionTokens: reply.CompletionTokens}
	if u.PromptTokens == 0 && u.CompletionTokens == 0 {
		for _, m := range req.Messages {
			u.PromptTokens += len(strings.Fields(m.Content))
		}
		u.CompletionTokens = len(strings.Fields(reply.Content))
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

// writeStream answers as OpenAI streams: a first chunk with the role, the
// content in pieces, a chunk with the finish reason, a usage chunk with no
// choices when the request asked for it, then [DONE]. With reply.Pace,
// each piece after the first waits for pace; a false from it ends the
// stream where it is, without a finish reason or [DONE].
func writeStream(w http.ResponseWriter, req Request, reply Reply, pace func() bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(statusOr200(reply.Status))
	flusher, _ := w.(http.Flusher)
	chunk := wireCompletion{ID: "chatcmpl-fake", Object: "chat.completion.chunk", Created: created, Model: modelOf(req, reply)}
	send := func(choices []wireChoice, u *wireUsage) {
		chunk.Choices, chunk.Usage = choices, u
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	if !reply.NoChoices {
		send([]wireChoice{{Delta: &wireMessage{Role: "assistant"}}}, nil)
		if reply.ReasoningContent != "" {
			send([]wireChoice{{Delta: &wireMessage{ReasoningContent: reply.ReasoningContent}}}, nil)
		}
		for i, piece := range pieces(reply) {
			if i > 0 && reply.Pace != nil && !pace() {
				return
			}
			send([]wireChoice{{Delta: &wireMessage{Content: piece}}}, nil)
		}
		if reply.Cut {
			return
		}
		if calls := wireCalls(reply, true); calls != nil {
			send([]wireChoice{{Delta: &wireMessage{ToolCalls: calls}}}, nil)
		}
		finish := finishOf(reply)
		send([]wireChoice{{Delta: &wireMessage{}, FinishReason: &finish}}, nil)
	}
	if req.IncludeUsage {
		send([]wireChoice{}, usage(req, reply))
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func pieces(reply Reply) []string {
	if reply.Chunks != nil {
		return reply.Chunks
	}
	const size = 8
	var out []string
	start := 0
	for i := range reply.Content {
		if i-start >= size {
			out = append(out, reply.Content[start:i])
			start = i
		}
	}
	if start < len(reply.Content) {
		out = append(out, reply.Content[start:])
	}
	return out
}

func writeError(w http.ResponseWriter, reply Reply) {
	if reply.Body != "" {
		w.WriteHeader(reply.Status)
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
	body.Error.Message = reply.ErrorMessage
	if body.Error.Message == "" {
		body.Error.Message = http.StatusText(reply.Status)
	}
	body.Error.Type = reply.ErrorType
	if body.Error.Type == "" {
		body.Error.Type = errorType(reply.Status)
	}
	body.Error.Code = strconv.Itoa(reply.Status)
	writeJSON(w, reply.Status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
