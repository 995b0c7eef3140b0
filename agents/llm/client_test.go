package llm_test

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/internal/testlog"
)

const testKey = "sk-test-0123456789abcdef"

// rig is a client wired to a fake endpoint and a fake clock.
type rig struct {
	fake   *llmfake.Server
	clock  *testclock.Clock // paces retries without waiting
	client *llm.Client
	logs   *testlog.Buffer
}

// newRig builds a client whose default profile points at a fresh fake;
// edit adjusts that profile, named profiles get the fake's URL too.
func newRig(t *testing.T, edit func(*llm.Profile), named map[string]llm.Profile, opts ...llm.Option) *rig {
	t.Helper()
	r := &rig{fake: llmfake.New(t), clock: testclock.New(time.Time{}), logs: &testlog.Buffer{}}
	def := llm.Profile{BaseURL: r.fake.URL(), APIKey: testKey, Model: "fake-model", MaxRetries: 3, JSONMode: true}
	if edit != nil {
		edit(&def)
	}
	for name, p := range named {
		if p.BaseURL == "" {
			p.BaseURL = r.fake.URL()
		}
		named[name] = p
	}
	opts = append([]llm.Option{
		llm.WithClock(r.clock.Now, r.clock.Sleep),
		llm.WithJitter(func() float64 { return 0 }),
		llm.WithLogger(slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	}, opts...)
	c, err := llm.New(def, named, opts...)
	if err != nil {
		t.Fatalf("llm.New: %v", err)
	}
	r.client = c
	return r
}

func ask(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You are Elen."},
		{Role: llm.RoleUser, Content: text},
	}}
}

func ptr[T any](v T) *T { return &v }

// smallest is what temperature 0 looks like on the wire.
const smallest = float64(math.SmallestNonzeroFloat32)

func TestRequestBody(t *testing.T) {
	named := func() map[string]llm.Profile {
		return map[string]llm.Profile{
			"cheap":     {Model: "cheap-model", Temperature: ptr(0.2), MaxTokens: 100, JSONMode: true},
			"reasoning": {Model: "o3-mini", Temperature: ptr(0.5), MaxTokens: 300, JSONMode: true},
			"nojson":    {Model: "strict-model", JSONMode: false},
			"merging":   {Model: "strict-model", MergeConsecutive: true},
		}
	}
	type want struct {
		model          string
		temperature    *float64 // nil: key absent
		maxTokens      int      // 0: key absent
		maxCompletion  int      // 0: key absent
		responseFormat string
		messages       []llmfake.Message
	}
	sysUser := []llmfake.Message{{Role: "system", Content: "You are Elen."}, {Role: "user", Content: "hello"}}
	tests := []struct {
		name    string
		profile func(*llm.Profile)
		req     func(*llm.Request)
		want    want
	}{
		{
			name:    "default profile",
			profile: func(p *llm.Profile) { p.Temperature, p.MaxTokens = ptr(0.7), 500 },
			want:    want{model: "fake-model", temperature: ptr(0.7), maxTokens: 500, messages: sysUser},
		},
		{
			name:    "request overrides the profile",
			profile: func(p *llm.Profile) { p.Temperature, p.MaxTokens = ptr(0.7), 500 },
			req:     func(r *llm.Request) { r.Model, r.Temperature, r.MaxTokens = "other-model", ptr(1.2), 42 },
			want:    want{model: "other-model", temperature: ptr(1.2), maxTokens: 42, messages: sysUser},
		},
		{
			name: "named profile",
			req:  func(r *llm.Request) { r.Profile = "cheap" },
			want: want{model: "cheap-model", temperature: ptr(0.2), maxTokens: 100, messages: sysUser},
		},
		{
			name: "named profile with an override",
			req:  func(r *llm.Request) { r.Profile, r.MaxTokens = "cheap", 7 },
			want: want{model: "cheap-model", temperature: ptr(0.2), maxTokens: 7, messages: sysUser},
		},
		{
			name:    "profile temperature 0 is sent",
			profile: func(p *llm.Profile) { p.Temperature = ptr(0.0) },
			want:    want{model: "fake-model", temperature: ptr(smallest), messages: sysUser},
		},
		{
			name:    "request temperature 0 beats the profile's",
			profile: func(p *llm.Profile) { p.Temperature = ptr(0.9) },
			req:     func(r *llm.Request) { r.Temperature = ptr(0.0) },
			want:    want{model: "fake-model", temperature: ptr(smallest), messages: sysUser},
		},
		{
			name: "no temperature anywhere leaves it out",
			want: want{model: "fake-model", messages: sysUser},
		},
		{
			name: "reasoning profile: max_completion_tokens, no temperature",
			req:  func(r *llm.Request) { r.Profile = "reasoning" },
			want: want{model: "o3-mini", maxCompletion: 300, messages: sysUser},
		},
		{
			name:    "reasoning model by override",
			profile: func(p *llm.Profile) { p.Temperature, p.MaxTokens = ptr(0.0), 64 },
			req:     func(r *llm.Request) { r.Model, r.Temperature = "gpt-5-mini", ptr(0.3) },
			want:    want{model: "gpt-5-mini", maxCompletion: 64, messages: sysUser},
		},
		{
			name: "JSON asked, JSON mode on",
			req:  func(r *llm.Request) { r.JSON = true },
			want: want{model: "fake-model", responseFormat: "json_object", messages: sysUser},
		},
		{
			name: "JSON asked, JSON mode off",
			req:  func(r *llm.Request) { r.Profile, r.JSON = "nojson", true },
			want: want{model: "strict-model", messages: sysUser},
		},
		{
			name: "JSON mode on, not asked",
			want: want{model: "fake-model", messages: sysUser},
		},
		{
			name: "merge consecutive",
			req: func(r *llm.Request) {
				r.Profile = "merging"
				r.Messages = []llm.Message{
					{Role: "system", Content: "S1"}, {Role: "system", Content: "S2"},
					{Role: "user", Content: "a"}, {Role: "user", Content: "b"},
					{Role: "assistant", Content: "c"}, {Role: "user", Content: "d"},
					{Role: "assistant", Content: "e"}, {Role: "assistant", Content: "f"}, {Role: "user", Content: "g"},
				}
			},
			want: want{model: "strict-model", messages: []llmfake.Message{
				{Role: "system", Content: "S1\n\nS2"}, {Role: "user", Content: "a\n\nb"},
				{Role: "assistant", Content: "c"}, {Role: "user", Content: "d"},
				{Role: "assistant", Content: "e\n\nf"}, {Role: "user", Content: "g"},
			}},
		},
		{
			name: "no merging by default",
			req: func(r *llm.Request) {
				r.Messages = []llm.Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}
			},
			want: want{model: "fake-model", messages: []llmfake.Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.profile, named())
			r.fake.Reply(llmfake.Text("hi"))
			req := ask("hello")
			if tt.req != nil {
				tt.req(&req)
			}
			if _, err := r.client.Complete(t.Context(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			got := r.fake.Requests()
			if len(got) != 1 {
				t.Fatalf("sent %d requests, want 1", len(got))
			}
			g := got[0]
			if g.Model != tt.want.model {
				t.Errorf("model = %q, want %q", g.Model, tt.want.model)
			}
			switch {
			case tt.want.temperature == nil && g.Has("temperature"):
				t.Errorf("temperature = %v, want it left out", *g.Temperature)
			case tt.want.temperature != nil && (g.Temperature == nil || float32(*g.Temperature) != float32(*tt.want.temperature)):
				t.Errorf("temperature = %v, want %v", g.Temperature, *tt.want.temperature)
			}
			checkTokens(t, "max_tokens", g.Has("max_tokens"), g.MaxTokens, tt.want.maxTokens)
			checkTokens(t, "max_completion_tokens", g.Has("max_completion_tokens"), g.MaxCompletionTokens, tt.want.maxCompletion)
			if g.ResponseFormat != tt.want.responseFormat || (tt.want.responseFormat == "") == g.Has("response_format") {
				t.Errorf("response_format = %q (present %v), want %q", g.ResponseFormat, g.Has("response_format"), tt.want.responseFormat)
			}
			if fmt.Sprintf("%q", g.Messages) != fmt.Sprintf("%q", tt.want.messages) {
				t.Errorf("messages = %q\nwant %q", g.Messages, tt.want.messages)
			}
			if g.Stream || !g.Has("stream") {
				t.Errorf("stream = %v (present %v), want false", g.Stream, g.Has("stream"))
			}
		})
	}
}

func checkTokens(t *testing.T, key string, present bool, got *int, want int) {
	t.Helper()
	switch {
	case want == 0 && present:
		t.Errorf("%s sent, want it left out", key)
	case want != 0 && (got == nil || *got != want):
		t.Errorf("%s = %v, want %d", key, got, want)
	}
}

// The exact body, byte for byte, for the default profile: what `templates
// render` and operators reading a proxy log will see.
func TestExactBody(t *testing.T) {
	r := newRig(t, func(p *llm.Profile) { p.Temperature, p.MaxTokens = ptr(0.0), 256 }, nil)
	r.fake.Reply(llmfake.Text("{}"))
	req := ask("hello")
	req.JSON = true
	if _, err := r.client.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	want := `{"model":"fake-model","messages":[{"role":"system","content":"You are Elen."},{"role":"user","content":"hello"}],` +
		`"max_tokens":256,"temperature":1e-45,"stream":false,"response_format":{"type":"json_object"}}`
	if got := strings.TrimSpace(string(r.fake.Requests()[0].Body)); got != want {
		t.Errorf("body =\n%s\nwant\n%s", got, want)
	}
}

func TestIsReasoningModel(t *testing.T) {
	tests := []struct {
		model string
		want  bool
	}{
		{"o1", true}, {"o1-mini", true}, {"o3", true}, {"o3-mini", true}, {"o4-mini", true},
		{"gpt-5", true}, {"gpt-5-mini", true}, {"gpt-5.1", true}, {"gpt-6-sol", true}, {"gpt-6-astra", true},
		{"gpt-4o-mini", false}, {"gpt-4.1", false}, {"llama3.1:8b", false}, {"fake-model", false},
		{"my-o1", false}, {"", false},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := llm.IsReasoningModel(tt.model); got != tt.want {
				t.Errorf("IsReasoningModel(%q) = %v, want %v", tt.model, got, tt.want)
			}
		})
	}
}

// Every model go-openai checks is sent without a client-side refusal, with
// whatever temperature and token limit the settings hold.
func TestNoClientSideRefusal(t *testing.T) {
	for _, model := range []string{"o1", "o1-preview", "o3", "o4-mini", "gpt-5", "gpt-5-nano", "gpt-6-sol", "gpt-6-luna", "gpt-6.1-sol", "gpt-4o"} {
		for _, temp := range []*float64{nil, ptr(0.0), ptr(0.3), ptr(1.0)} {
			t.Run(fmt.Sprint(model, "/", temp), func(t *testing.T) {
				r := newRig(t, func(p *llm.Profile) { p.Model, p.Temperature, p.MaxTokens = model, temp, 128 }, nil)
				r.fake.Reply(llmfake.Text("ok"))
				if _, err := r.client.Complete(t.Context(), ask("x")); err != nil {
					t.Fatalf("Complete: %v", err)
				}
			})
		}
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		headers map[string]string
		want    map[string]string // "" means absent
	}{
		{
			name: "key and extra headers", key: testKey,
			headers: map[string]string{"X-Team": "acme", "openai-organization": "org-1"},
			want:    map[string]string{"Authorization": "Bearer " + testKey, "X-Team": "acme", "Openai-Organization": "org-1", "Content-Type": "application/json"},
		},
		{
			name: "no key, no Authorization", key: "",
			want: map[string]string{"Authorization": ""},
		},
		{
			name: "a header replaces the library's", key: testKey,
			headers: map[string]string{"authorization": "Token gateway-secret"},
			want:    map[string]string{"Authorization": "Token gateway-secret"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, func(p *llm.Profile) { p.APIKey, p.Headers = tt.key, tt.headers }, nil)
			r.fake.Reply(llmfake.Text("ok"))
			if _, err := r.client.Complete(t.Context(), ask("x")); err != nil {
				t.Fatal(err)
			}
			h := r.fake.Requests()[0].Header
			for k, v := range tt.want {
				if got := h.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestResponse(t *testing.T) {
	tests := []struct {
		name  string
		reply llmfake.Reply
		want  llm.Response
	}{
		{
			name:  "stop",
			reply: llmfake.Reply{Content: "Hello!", PromptTokens: 12, CompletionTokens: 3},
			want:  llm.Response{Content: "Hello!", FinishReason: "stop", Model: "fake-model", PromptTokens: 12, CompletionTokens: 3, Attempts: 1},
		},
		{
			name:  "length returns what came",
			reply: llmfake.Reply{Content: "The answer is", FinishReason: "length", PromptTokens: 12, CompletionTokens: 4},
			want:  llm.Response{Content: "The answer is", FinishReason: "length", Model: "fake-model", PromptTokens: 12, CompletionTokens: 4, Attempts: 1},
		},
		{
			name:  "served model",
			reply: llmfake.Reply{Content: "ok", Model: "fake-model-2026-01-01", PromptTokens: 1, CompletionTokens: 1},
			want:  llm.Response{Content: "ok", FinishReason: "stop", Model: "fake-model-2026-01-01", PromptTokens: 1, CompletionTokens: 1, Attempts: 1},
		},
		{
			name: "tool calls without content are a reply",
			reply: llmfake.Reply{ToolCalls: []llmfake.ToolCall{{ID: "c1", Name: "crm__lookup", Arguments: `{"q":"Ada"}`}, {Name: "crm__list"}},
				PromptTokens: 5, CompletionTokens: 2},
			want: llm.Response{FinishReason: "tool_calls", Model: "fake-model", PromptTokens: 5, CompletionTokens: 2, Attempts: 1,
				ToolCalls: []llm.ToolCall{{ID: "c1", Name: "crm__lookup", Arguments: `{"q":"Ada"}`}, {ID: "call_2", Name: "crm__list", Arguments: "{}"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil, nil)
			r.fake.Reply(tt.reply)
			got, err := r.client.Complete(t.Context(), ask("x"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Sent) == 0 {
				t.Error("the response carries no body sent")
			}
			got.Sent = nil // TestResponseCarriesSentBody checks it
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("response = %+v\nwant %+v", got, tt.want)
			}
			if got.Truncated() != (tt.want.FinishReason == llm.FinishLength) {
				t.Errorf("Truncated() = %v", got.Truncated())
			}
			if n := len(r.fake.Requests()); n != 1 {
				t.Errorf("sent %d requests, want 1", n)
			}
		})
	}
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestRetries(t *testing.T) {
	tests := []struct {
		name       string
		maxRetries int // 0 means 3; -1 means none
		replies    []llmfake.Reply
		wantText   string // "" when an error is expected
		wantSleeps []time.Duration
		wantReason string
		wantStatus int
		wantIs     error
		wantInMsg  string
	}{
		{
			name:     "429 with Retry-After, then success",
			replies:  []llmfake.Reply{llmfake.RateLimited("2"), llmfake.Text("ok")},
			wantText: "ok", wantSleeps: []time.Duration{2 * time.Second},
		},
		{
			name:     "429 with retry-after-ms",
			replies:  []llmfake.Reply{{Status: 429, Header: http.Header{"Retry-After-Ms": {"1500"}}}, llmfake.Text("ok")},
			wantText: "ok", wantSleeps: []time.Duration{ms(1500)},
		},
		{
			name:     "429 with an HTTP date",
			replies:  []llmfake.Reply{llmfake.RateLimited("Fri, 02 Jan 2026 03:04:15 GMT"), llmfake.Text("ok")},
			wantText: "ok", wantSleeps: []time.Duration{10 * time.Second},
		},
		{
			name:     "429 without Retry-After backs off",
			replies:  []llmfake.Reply{llmfake.Error(429, "slow down"), llmfake.Text("ok")},
			wantText: "ok", wantSleeps: []time.Duration{ms(250)},
		},
		{
			name:     "5xx twice, then success",
			replies:  []llmfake.Reply{llmfake.Error(500, "oops"), llmfake.Error(503, "busy"), llmfake.Text("ok")},
			wantText: "ok", wantSleeps: []time.Duration{ms(250), ms(500)},
		},
		{
			name:       "5xx exhausted",
			maxRetries: 2,
			replies:    []llmfake.Reply{llmfake.Error(502, "a"), llmfake.Error(503, "b"), llmfake.Error(500, "c")},
			wantSleeps: []time.Duration{ms(250), ms(500)},
			wantReason: llm.ReasonServer, wantStatus: 500,
			wantInMsg: `server error after 3 attempts: status 500: c (max_retries 2 reached)`,
		},
		{
			name:       "HTML error page",
			maxRetries: -1,
			replies:    []llmfake.Reply{{Status: 502, Body: "<html><body>Bad Gateway</body></html>"}},
			wantReason: llm.ReasonServer, wantStatus: 502,
			wantInMsg: "status 502: <html><body>Bad Gateway</body></html>",
		},
		{
			name:       "400 is not retried",
			replies:    []llmfake.Reply{llmfake.Error(400, "context too long"), llmfake.Text("never")},
			wantReason: llm.ReasonRejected, wantStatus: 400,
			wantInMsg: "request rejected after 1 attempt: status 400: context too long",
		},
		{
			name:       "401 is not retried",
			replies:    []llmfake.Reply{llmfake.Error(401, "bad key"), llmfake.Text("never")},
			wantReason: llm.ReasonRejected, wantStatus: 401,
		},
		{
			name:       "404 is not retried",
			replies:    []llmfake.Reply{llmfake.Error(404, "no such model"), llmfake.Text("never")},
			wantReason: llm.ReasonRejected, wantStatus: 404,
		},
		{
			name:     "no choice is retried",
			replies:  []llmfake.Reply{llmfake.NoChoices(), llmfake.Text("ok")},
			wantText: "ok", wantSleeps: []time.Duration{ms(250)},
		},
		{
			name:     "blank content is retried",
			replies:  []llmfake.Reply{llmfake.Blank(), llmfake.Reply{Content: "\t"}, llmfake.Text("ok")},
			wantText: "ok", wantSleeps: []time.Duration{ms(250), ms(500)},
		},
		{
			name:       "empty replies exhausted",
			maxRetries: 1,
			replies:    []llmfake.Reply{llmfake.Blank(), llmfake.NoChoices()},
			wantSleeps: []time.Duration{ms(250)},
			wantReason: llm.ReasonEmpty, wantStatus: 200, wantIs: llm.ErrEmptyReply,
			wantInMsg: "empty reply after 2 attempts: empty reply: no choice",
		},
		{
			name:     "malformed 200 is retried",
			replies:  []llmfake.Reply{{Body: `{"choices": [`}, llmfake.Text("ok")},
			wantText: "ok", wantSleeps: []time.Duration{ms(250)},
		},
		{
			name:       "no retries configured",
			maxRetries: -1,
			replies:    []llmfake.Reply{llmfake.Error(503, "busy"), llmfake.Text("never")},
			wantReason: llm.ReasonServer, wantStatus: 503,
		},
		{
			name:     "truncated is not retried",
			replies:  []llmfake.Reply{llmfake.Truncated("partial"), llmfake.Text("never")},
			wantText: "partial",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maxRetries := max(cmp.Or(tt.maxRetries, 3), 0)
			r := newRig(t, func(p *llm.Profile) { p.MaxRetries = maxRetries }, nil)
			r.fake.Reply(tt.replies...)
			resp, err := r.client.Complete(t.Context(), ask("x"))
			attempts := len(r.fake.Requests())
			if tt.wantText != "" {
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if resp.Content != tt.wantText || resp.Attempts != attempts {
					t.Errorf("response %q after %d attempts, want %q after %d", resp.Content, resp.Attempts, tt.wantText, attempts)
				}
			} else {
				var e *llm.Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v (%T), want *llm.Error", err, err)
				}
				if e.Attempts != attempts || e.Reason != tt.wantReason || e.Status != tt.wantStatus {
					t.Errorf("error: %d attempts, reason %q, status %d; want %d, %q, %d", e.Attempts, e.Reason, e.Status, attempts, tt.wantReason, tt.wantStatus)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
				}
				if !strings.Contains(err.Error(), tt.wantInMsg) || !strings.HasPrefix(err.Error(), `llm: profile "default", model "fake-model": `) {
					t.Errorf("message = %q, want it to contain %q", err, tt.wantInMsg)
				}
			}
			if got := r.clock.Sleeps(); fmt.Sprint(got) != fmt.Sprint(tt.wantSleeps) {
				t.Errorf("waits = %v, want %v", got, tt.wantSleeps)
			}
			if attempts != len(tt.replies)-r.fake.Pending() {
				t.Errorf("%d requests for %d used replies", attempts, len(tt.replies)-r.fake.Pending())
			}
		})
	}
}
