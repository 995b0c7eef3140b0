package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

func asError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *llm.Error", err, err)
	}
	return e
}

func TestTimeout(t *testing.T) {
	tests := []struct {
		name       string
		replies    []llmfake.Reply
		wantText   string
		wantReason string
	}{
		{
			name:     "a slow attempt is retried",
			replies:  []llmfake.Reply{llmfake.Slow(time.Hour, "late"), llmfake.Text("on time")},
			wantText: "on time",
		},
		{
			name:       "every attempt slow",
			replies:    []llmfake.Reply{llmfake.Slow(time.Hour, "a"), llmfake.Slow(time.Hour, "b")},
			wantReason: llm.ReasonTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The attempt timeout is real (a context deadline); the fake
			// ends its delay as soon as the client gives up.
			r := newRig(t, func(p *llm.Profile) { p.Timeout, p.MaxRetries = 20*time.Millisecond, 1 }, nil)
			r.fake.Reply(tt.replies...)
			resp, err := r.client.Complete(t.Context(), ask("x"))
			if tt.wantText != "" {
				if err != nil || resp.Content != tt.wantText || resp.Attempts != 2 {
					t.Fatalf("Complete = %+v, %v; want %q after 2 attempts", resp, err, tt.wantText)
				}
				return
			}
			e := asError(t, err)
			if e.Reason != tt.wantReason || e.Attempts != 2 || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v (reason %q, %d attempts), want %q after 2 wrapping DeadlineExceeded", err, e.Reason, e.Attempts, tt.wantReason)
			}
			if !strings.Contains(err.Error(), "no reply within 20ms") {
				t.Errorf("message = %q", err)
			}
		})
	}
}

// flakyDoer is a real HTTP client that fails its first n calls as a broken
// connection would.
type flakyDoer struct {
	fail  atomic.Int32
	calls atomic.Int32
}

func (d *flakyDoer) Do(req *http.Request) (*http.Response, error) {
	d.calls.Add(1)
	if d.fail.Add(-1) >= 0 {
		return nil, fmt.Errorf("read tcp 127.0.0.1:1->127.0.0.1:2: connection reset by peer")
	}
	return http.DefaultClient.Do(req)
}

func TestConnectionErrors(t *testing.T) {
	t.Run("reset, then success", func(t *testing.T) {
		d := &flakyDoer{}
		d.fail.Store(2)
		r := newRig(t, nil, nil, llm.WithHTTPClient(d))
		r.fake.Reply(llmfake.Text("ok"))
		resp, err := r.client.Complete(t.Context(), ask("x"))
		if err != nil || resp.Content != "ok" || resp.Attempts != 3 || d.calls.Load() != 3 {
			t.Fatalf("Complete = %+v, %v after %d calls; want ok after 3", resp, err, d.calls.Load())
		}
	})
	t.Run("endpoint down", func(t *testing.T) {
		down := llmfake.New(t)
		down.Close()
		r := newRig(t, func(p *llm.Profile) { p.BaseURL, p.MaxRetries = down.URL(), 2 }, nil)
		_, err := r.client.Complete(t.Context(), ask("x"))
		e := asError(t, err)
		if e.Reason != llm.ReasonConnection || e.Attempts != 3 || e.Status != 0 {
			t.Errorf("err = %v (reason %q, %d attempts, status %d)", err, e.Reason, e.Attempts, e.Status)
		}
		if got := len(r.clock.Sleeps()); got != 2 {
			t.Errorf("waited %d times, want 2", got)
		}
	})
}

func TestTotalDeadline(t *testing.T) {
	tests := []struct {
		name         string
		total        time.Duration
		jitter       float64
		perRequest   time.Duration // the fake clock moves this much per request
		replies      []llmfake.Reply
		wantText     string
		wantAttempts int
		wantSleeps   []time.Duration
		wantInMsg    string
	}{
		{
			name: "backoff stops before the deadline", total: 2 * time.Second, jitter: 1,
			replies:      []llmfake.Reply{llmfake.Error(500, "a"), llmfake.Error(500, "b"), llmfake.Error(500, "c"), llmfake.Error(500, "d")},
			wantAttempts: 3, wantSleeps: []time.Duration{ms(500), time.Second},
			wantInMsg: "status 500: c (next try in 2s would pass the total timeout of 2s)",
		},
		{
			name: "Retry-After over the cap that fits is honoured", total: 150 * time.Second,
			replies:  []llmfake.Reply{llmfake.RateLimited("30"), llmfake.Text("ok")},
			wantText: "ok", wantAttempts: 2, wantSleeps: []time.Duration{30 * time.Second},
		},
		{
			name: "Retry-After past the deadline is not waited for", total: 150 * time.Second,
			replies:      []llmfake.Reply{llmfake.RateLimited("200"), llmfake.Text("never")},
			wantAttempts: 1,
			wantInMsg:    "rate limited after 1 attempt: status 429: rate limit reached (next try in 3m20s would pass the total timeout of 2m30s)",
		},
		{
			name: "slow attempts use up the deadline", total: 150 * time.Second, perRequest: time.Minute,
			replies:      []llmfake.Reply{llmfake.Error(503, "a"), llmfake.Error(503, "b"), llmfake.Error(503, "c"), llmfake.Text("late")},
			wantAttempts: 3, wantSleeps: []time.Duration{ms(250), ms(500)},
			wantInMsg: "status 503: c (next try in 1s would pass the total timeout of 2m30s)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, func(p *llm.Profile) { p.TotalTimeout, p.MaxRetries = tt.total, 10 }, nil,
				llm.WithJitter(func() float64 { return tt.jitter }))
			// The handler moves the fake clock before answering: that
			// stands for time spent waiting on the endpoint.
			var mu sync.Mutex
			replies := tt.replies
			r.fake.Handle(func(llmfake.Request) llmfake.Reply {
				mu.Lock()
				defer mu.Unlock()
				r.clock.Advance(tt.perRequest)
				next := replies[0]
				replies = replies[1:]
				return next
			})
			resp, err := r.client.Complete(t.Context(), ask("x"))
			attempts := len(r.fake.Requests())
			if attempts != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", attempts, tt.wantAttempts)
			}
			if tt.wantText != "" {
				if err != nil || resp.Content != tt.wantText {
					t.Fatalf("Complete = %+v, %v", resp, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantInMsg)
			}
			var slept time.Duration
			for _, s := range r.clock.Sleeps() {
				slept += s
			}
			if slept >= tt.total || fmt.Sprint(r.clock.Sleeps()) != fmt.Sprint(tt.wantSleeps) {
				t.Errorf("waits = %v, want %v (total under %s)", r.clock.Sleeps(), tt.wantSleeps, tt.total)
			}
		})
	}
}

// The total timeout also holds on the real clock: an attempt cannot outlive it.
// The timeout is a second, so that on a loaded machine the attempt has
// surely started before it ends.
func TestTotalDeadlineRealClock(t *testing.T) {
	r := newRig(t, func(p *llm.Profile) { p.Timeout, p.TotalTimeout = time.Hour, time.Second }, nil,
		llm.WithClock(time.Now, func(ctx context.Context, d time.Duration) error { return nil }))
	r.fake.Reply(llmfake.Slow(time.Hour, "never"))
	_, err := r.client.Complete(t.Context(), ask("x"))
	e := asError(t, err)
	if e.Reason != llm.ReasonDeadline || e.Attempts != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v (reason %q, %d attempts)", err, e.Reason, e.Attempts)
	}
	if !strings.Contains(err.Error(), "total timeout of 1s reached") {
		t.Errorf("message = %q", err)
	}
}

func TestCanceled(t *testing.T) {
	tests := []struct {
		name  string
		reply llmfake.Reply
	}{
		{"during an attempt", llmfake.Slow(time.Hour, "never")},
		{"between attempts", llmfake.Error(503, "busy")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			r := newRig(t, nil, nil)
			r.fake.Handle(func(llmfake.Request) llmfake.Reply {
				cancel()
				return tt.reply
			})
			_, err := r.client.Complete(ctx, ask("x"))
			e := asError(t, err)
			if e.Reason != llm.ReasonCanceled || e.Attempts != 1 || !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v (reason %q, %d attempts)", err, e.Reason, e.Attempts)
			}
			if n := len(r.fake.Requests()); n != 1 {
				t.Errorf("sent %d requests after cancel, want 1", n)
			}
		})
	}
}

func TestInvalidRequest(t *testing.T) {
	tests := []struct {
		name string
		req  llm.Request
		want string
	}{
		{"no messages", llm.Request{}, "invalid request after 0 attempts: no messages"},
		{"unknown role", llm.Request{Messages: []llm.Message{{Role: "tool", Content: "x"}}}, `message 0: unknown role "tool"`},
		{"negative temperature", llm.Request{Temperature: ptr(-0.5), Messages: ask("x").Messages}, "temperature -0.5 is negative"},
		{"negative max tokens", llm.Request{MaxTokens: -1, Messages: ask("x").Messages}, "max tokens -1 is negative"},
		{"model the library refuses for chat", llm.Request{Model: "text-davinci-003", Messages: ask("x").Messages}, "invalid request after 0 attempts: this model is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil, nil)
			_, err := r.client.Complete(t.Context(), tt.req)
			e := asError(t, err)
			if e.Reason != llm.ReasonInvalid || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v (reason %q), want %q", err, e.Reason, tt.want)
			}
			if n := len(r.fake.Requests()); n != 0 {
				t.Errorf("sent %d requests, want none", n)
			}
		})
	}
}

func TestProfiles(t *testing.T) {
	r := newRig(t, func(p *llm.Profile) { p.Name = "main" }, map[string]llm.Profile{
		"cheap": {Model: "cheap-model", Headers: map[string]string{"X-A": "1"}},
	})
	tests := []struct {
		name      string
		profile   string
		wantName  string
		wantModel string
		wantErr   error
	}{
		{"empty name is the default", "", "main", "fake-model", nil},
		{"the default by its name", "main", "main", "fake-model", nil},
		{"named", "cheap", "cheap", "cheap-model", nil},
		{"unknown", "pricey", "", "", llm.ErrUnknownProfile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := r.client.Profile(tt.profile)
			if !errors.Is(err, tt.wantErr) || p.Name != tt.wantName || p.Model != tt.wantModel {
				t.Errorf("Profile(%q) = %q %q, %v", tt.profile, p.Name, p.Model, err)
			}
			r.fake.Reply(llmfake.Text("ok"))
			_, err = r.client.Complete(t.Context(), llm.Request{Profile: tt.profile, Messages: ask("x").Messages})
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Complete err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil && !strings.Contains(err.Error(), `llm: unknown profile "pricey"`) {
				t.Errorf("message = %q", err)
			}
		})
	}
	p, _ := r.client.Profile("cheap")
	if p.Timeout != llm.DefaultTimeout || p.TotalTimeout != llm.DefaultTotalTimeout {
		t.Errorf("defaults not filled: timeout %s, total %s", p.Timeout, p.TotalTimeout)
	}
	p.Headers["X-A"] = "changed"
	if again, _ := r.client.Profile("cheap"); again.Headers["X-A"] != "1" {
		t.Error("Profile hands out the client's own header map")
	}
	if def, _ := llm.New(llm.Profile{Model: "m"}, nil); def != nil {
		if p, _ := def.Profile(""); p.BaseURL != llm.DefaultBaseURL || p.Name != "default" {
			t.Errorf("default profile = %q %q", p.Name, p.BaseURL)
		}
	}
}

func TestNewRejects(t *testing.T) {
	good := llm.Profile{Model: "m", APIKey: testKey}
	tests := []struct {
		name  string
		def   func(*llm.Profile)
		named map[string]llm.Profile
		want  []string
	}{
		{"no model", func(p *llm.Profile) { p.Model = " " }, nil, []string{`profile "default": no model`}},
		{"bad base URL", func(p *llm.Profile) { p.BaseURL = "localhost:11434" }, nil, []string{`base_url "localhost:11434" is not an http(s) URL`}},
		{"negative temperature", func(p *llm.Profile) { p.Temperature = ptr(-1.0) }, nil, []string{"temperature -1 is negative"}},
		{"negative numbers", func(p *llm.Profile) { p.MaxRetries, p.Timeout, p.MaxTokens = -1, -time.Second, -5 }, nil,
			[]string{"max_tokens is negative", "max_retries is negative", "timeout is negative"}},
		{"header name", func(p *llm.Profile) { p.Headers = map[string]string{"X Bad": "v"} }, nil, []string{`header "X Bad" is malformed`}},
		{"header value", func(p *llm.Profile) { p.Headers = map[string]string{"X-Ok": "a\r\nInjected: 1"} }, nil, []string{`header "X-Ok" is malformed`}},
		{"named profiles, each reported", nil, map[string]llm.Profile{"b": {}, "a": {Model: "m", BaseURL: "ftp://x"}},
			[]string{`profile "a": base_url "ftp://x"`, `profile "b": no model`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := good
			if tt.def != nil {
				tt.def(&def)
			}
			c, err := llm.New(def, tt.named)
			if err == nil || c != nil {
				t.Fatalf("New = %v, %v; want an error", c, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q shows the API key", err)
			}
		})
	}
}

// A base URL's user-info, query values and path keys are masked in the
// errors and logs of an endpoint that cannot be reached (net/http quotes
// the request's URL in its error).
func TestBaseURLSecretsMasked(t *testing.T) {
	down := llmfake.New(t)
	down.Close()
	host := strings.TrimPrefix(down.URL(), "http://")
	host, _, _ = strings.Cut(host, "/")
	base := "http://gw-user:gw-pass-1234@" + host + "/k/0123456789abcdef0123/v1?api-key=q-secret-5678"
	r := newRig(t, func(p *llm.Profile) { p.BaseURL, p.MaxRetries = base, 1 }, nil)
	_, err := r.client.Complete(t.Context(), ask("x"))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, out := range []string{err.Error(), r.logs.String()} {
		for _, secret := range []string{"gw-user", "gw-pass-1234", "0123456789abcdef0123", "q-secret-5678"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s leaked: %s", secret, out)
			}
		}
	}
	if !strings.Contains(err.Error(), host) {
		t.Errorf("the error no longer names the host: %v", err)
	}
}

func TestSecretsNeverInErrorsOrLogs(t *testing.T) {
	const gatewaySecret = "gw-secret-9876543210"
	r := newRig(t, func(p *llm.Profile) {
		p.MaxRetries = 1
		p.Headers = map[string]string{"X-Gateway-Key": gatewaySecret, "X-Team": "acme"}
	}, nil)
	echo := fmt.Sprintf("Incorrect API key provided: %s (gateway %s, team acme)", testKey, gatewaySecret)
	r.fake.Reply(llmfake.Error(500, echo), llmfake.Error(401, echo))
	_, err := r.client.Complete(t.Context(), ask("x"))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, out := range []string{err.Error(), r.logs.String()} {
		if strings.Contains(out, testKey) || strings.Contains(out, gatewaySecret) {
			t.Errorf("secret leaked: %s", out)
		}
		if !strings.Contains(out, "Incorrect API key provided: [redacted] (gateway [redacted], team acme)") {
			t.Errorf("server message not kept (redacted): %s", out)
		}
	}
	if !strings.Contains(r.logs.String(), "llm: retrying") {
		t.Errorf("retry not logged: %s", r.logs.String())
	}
}

func TestUsageCountsEveryAttempt(t *testing.T) {
	r := newRig(t, nil, nil)
	r.fake.Reply(
		llmfake.Reply{Content: " ", PromptTokens: 40, CompletionTokens: 1},
		llmfake.Reply{Content: "ok", PromptTokens: 40, CompletionTokens: 2},
	)
	resp, err := r.client.Complete(t.Context(), ask("x"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.PromptTokens != 80 || resp.CompletionTokens != 3 || resp.Attempts != 2 {
		t.Errorf("usage %d/%d after %d attempts, want 80/3 after 2", resp.PromptTokens, resp.CompletionTokens, resp.Attempts)
	}
}

// Many turns share one client; each gets its own reply.
func TestConcurrentCalls(t *testing.T) {
	r := newRig(t, nil, map[string]llm.Profile{"cheap": {Model: "cheap-model"}})
	r.fake.Handle(func(req llmfake.Request) llmfake.Reply {
		return llmfake.Text(req.Model + ": " + req.Messages[len(req.Messages)-1].Content)
	})
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := ask(fmt.Sprint("question ", i))
			if i%2 == 1 {
				req.Profile = "cheap"
			}
			resp, err := r.client.Complete(context.Background(), req)
			want := fmt.Sprintf("fake-model: question %d", i)
			if i%2 == 1 {
				want = fmt.Sprintf("cheap-model: question %d", i)
			}
			if err != nil || resp.Content != want {
				t.Errorf("call %d = %q, %v; want %q", i, resp.Content, err, want)
			}
		})
	}
	wg.Wait()
	if got := len(r.fake.Requests()); got != n {
		t.Errorf("sent %d requests, want %d", got, n)
	}
}
