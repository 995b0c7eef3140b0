package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/conclavehq/conclave/internal/backoff"
)

// Defaults for zero Profile fields.
const (
	DefaultBaseURL      = "https://api.openai.com/v1"
	DefaultTimeout      = 60 * time.Second
	DefaultIdleTimeout  = 30 * time.Second
	DefaultTotalTimeout = 150 * time.Second
	defaultProfileName  = "default"
)

// HTTPDoer sends HTTP requests; *http.Client is one.
type HTTPDoer interface {
	Do(*http.Request) (*http.Response, error)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through d (a proxy-aware client, a test
// transport) instead of a plain *http.Client.
func WithHTTPClient(d HTTPDoer) Option { return func(c *Client) { c.http = d } }

// WithLogger logs retries to l. Prompts and keys are never logged.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithClock replaces the clock that paces retries: now reads the time and
// sleep waits d or until ctx ends (returning ctx's error). Tests pass a fake
// so retry paths run instantly; the total deadline is measured on this
// clock, and is also enforced on the real one.
func WithClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.now, c.sleep = now, sleep }
}

// WithJitter replaces the source of backoff jitter: f returns a number in
// [0, 1). Returning 1 would give the longest waits.
func WithJitter(f func() float64) Option { return func(c *Client) { c.jitter = f } }

// Client completes chats against the configured profiles. It is safe for
// concurrent use and starts no goroutines.
type Client struct {
	def    *endpoint
	named  map[string]*endpoint
	http   HTTPDoer
	log    *slog.Logger
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	jitter func() float64
}

// endpoint is one profile made ready to call.
type endpoint struct {
	profile Profile
	api     *openai.Client
	redact  redactor
	// noResponseFormat: the endpoint refused response_format once; JSON
	// requests go without it from then on (dropResponseFormat).
	noResponseFormat atomic.Bool
}

// New checks the profiles and builds a client: def answers requests that
// name no profile, profiles the named ones (the map keys are the names).
// Zero Timeout, TotalTimeout and BaseURL take the defaults; a profile
// without a model, or with a negative number or a malformed URL or header,
// is an error.
func New(def Profile, profiles map[string]Profile, opts ...Option) (*Client, error) {
	c := &Client{
		http:   &http.Client{},
		log:    slog.New(slog.DiscardHandler),
		now:    time.Now,
		sleep:  backoff.Sleep,
		jitter: rand.Float64,
		named:  make(map[string]*endpoint, len(profiles)),
	}
	for _, o := range opts {
		o(c)
	}
	if def.Name == "" {
		def.Name = defaultProfileName
	}
	var errs []error
	ep, err := c.newEndpoint(def)
	if err != nil {
		errs = append(errs, err)
	}
	c.def = ep
	for _, name := range slices.Sorted(maps.Keys(profiles)) {
		p := profiles[name]
		p.Name = name
		ep, err := c.newEndpoint(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.named[name] = ep
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

func (c *Client) newEndpoint(p Profile) (*endpoint, error) {
	p.Headers = maps.Clone(p.Headers)
	if p.BaseURL == "" {
		p.BaseURL = DefaultBaseURL
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.IdleTimeout == 0 {
		p.IdleTimeout = DefaultIdleTimeout
	}
	if p.TotalTimeout == 0 {
		p.TotalTimeout = DefaultTotalTimeout
	}
	red := newRedactor(p)
	if err := checkProfile(p, red); err != nil {
		return nil, fmt.Errorf("llm: profile %q: %w", p.Name, err)
	}
	cfg := openai.DefaultConfig(p.APIKey)
	cfg.BaseURL = p.BaseURL
	cfg.HTTPClient = &doer{next: c.http, header: canonicalHeader(p.Headers), now: c.now}
	return &endpoint{profile: p, api: openai.NewClientWithConfig(cfg), redact: red}, nil
}

func checkProfile(p Profile, red redactor) error {
	var problems []string
	if strings.TrimSpace(p.Model) == "" {
		problems = append(problems, "no model")
	}
	if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Sprintf("base_url %q is not an http(s) URL", red.clean(p.BaseURL)))
	}
	if p.Temperature != nil && !(*p.Temperature >= 0) {
		problems = append(problems, fmt.Sprintf("temperature %v is negative", *p.Temperature))
	}
	for _, n := range []struct {
		key string
		v   int64
	}{
		{"max_tokens", int64(p.MaxTokens)},
		{"max_input_tokens", int64(p.MaxInputTokens)},
		{"max_retries", int64(p.MaxRetries)},
		{"timeout", int64(p.Timeout)},
		{"idle_timeout", int64(p.IdleTimeout)},
		{"total_timeout", int64(p.TotalTimeout)},
	} {
		if n.v < 0 {
			problems = append(problems, n.key+" is negative")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Headers)) {
		if !validHeaderName(name) || strings.ContainsAny(p.Headers[name], "\r\n\x00") {
			problems = append(problems, fmt.Sprintf("header %q is malformed", name))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// validHeaderName reports whether name is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("!#$%&'*+-.^_`|~", r)
		if !ok {
			return false
		}
	}
	return true
}

// Profile returns the profile called name, with its defaults filled in; ""
// is the default profile. An unknown name gives ErrUnknownProfile.
func (c *Client) Profile(name string) (Profile, error) {
	ep, err := c.endpoint(name)
	if err != nil {
		return Profile{}, err
	}
	p := ep.profile
	p.Headers = maps.Clone(p.Headers)
	return p, nil
}

func (c *Client) endpoint(name string) (*endpoint, error) {
	if name == "" {
		return c.def, nil
	}
	if ep, ok := c.named[name]; ok {
		return ep, nil
	}
	if name == c.def.profile.Name {
		return c.def, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownProfile, name)
}

// Complete sends req with its profile's settings (req's non-zero fields win)
// and retries failures that may pass: 429, 5xx, timeouts, connection errors,
// malformed and empty replies. Waits grow from 0.5 s, doubling, up to 10 s,
// with jitter; a Retry-After header sets the wait instead. No wait is taken
// that would end past the profile's total timeout. A reply cut by the token
// limit is returned as it came (see Response.Truncated).
//
// Errors: ErrUnknownProfile for an unknown req.Profile; otherwise *Error,
// which wraps ErrEmptyReply, a context error, or the library's API error.
func (c *Client) Complete(ctx context.Context, req Request) (Response, error) {
	return c.send(ctx, req, nil)
}

// send sends req on its profile's endpoint, streamed when onText is set.
func (c *Client) send(ctx context.Context, req Request, onText func(string)) (Response, error) {
	ep, err := c.endpoint(req.Profile)
	if err != nil {
		return Response{}, err
	}
	call, err := buildCall(ep.callProfile(), req)
	if err != nil {
		return Response{}, ep.fail(call.Model, 0, outcome{reason: ReasonInvalid, msg: err.Error(), cause: err})
	}
	if onText != nil {
		call.Stream = true
		call.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	return c.run(ctx, ep, call, req, onText)
}

// run makes the attempts of one request; with onText they are streamed.
func (c *Client) run(ctx context.Context, ep *endpoint, call openai.ChatCompletionRequest, req Request, onText func(string)) (Response, error) {
	p := ep.profile
	deadline := c.now().Add(p.TotalTimeout)
	total, cancel := context.WithTimeout(ctx, p.TotalTimeout)
	defer cancel()
	var used usage
	fallbacks := 0 // attempts that were not retries: the request went again without response_format
	for attempt := 1; ; attempt++ {
		remaining := deadline.Sub(c.now())
		if remaining <= 0 {
			return Response{}, ep.fail(call.Model, attempt-1, deadlineOutcome(p))
		}
		out := ep.attempt(total, call, min(p.Timeout, remaining), onText)
		used.add(out.usage)
		if out.reason == "" {
			return out.response(call.Model, attempt, used), nil
		}
		made := attempt
		if !out.sent { // refused by the library, or canceled before sending
			made--
		}
		if c.dropResponseFormat(ctx, ep, &call, out) {
			fallbacks++
			continue
		}
		switch {
		case ctx.Err() != nil:
			return Response{}, ep.fail(call.Model, made, canceledOutcome(ctx))
		case total.Err() != nil:
			return Response{}, ep.fail(call.Model, made, deadlineOutcome(p))
		case !out.retry:
			return Response{}, ep.fail(call.Model, made, out)
		case attempt-fallbacks > p.MaxRetries:
			out.msg += fmt.Sprintf(" (max_retries %d reached)", p.MaxRetries)
			return Response{}, ep.fail(call.Model, made, out)
		}
		wait := retryPolicy.Wait(attempt, c.jitter(), out.retryAfter)
		if left := deadline.Sub(c.now()); wait >= left {
			out.msg += fmt.Sprintf(" (next try in %s would pass the total timeout of %s)", wait.Round(time.Millisecond), p.TotalTimeout)
			return Response{}, ep.fail(call.Model, attempt, out)
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, "llm: retrying",
			slog.String(logProfile, p.Name), slog.String(logModel, call.Model),
			slog.String(logAgent, req.Agent), slog.String(logRole, req.Role), slog.String(logPrompt, req.Prompt),
			slog.Int(logAttempt, attempt), slog.Int(logStatus, out.status),
			slog.String(logReason, out.reason), slog.Duration(logWait, wait),
			slog.String(logError, ep.redact.clean(out.msg)))
		if err := c.sleep(total, wait); err != nil {
			if ctx.Err() != nil {
				return Response{}, ep.fail(call.Model, attempt, canceledOutcome(ctx))
			}
			return Response{}, ep.fail(call.Model, attempt, deadlineOutcome(p))
		}
	}
}

// Log attribute keys.
const (
	logProfile = "profile"
	logModel   = "model"
	logAgent   = "agent"
	logRole    = "role"
	logPrompt  = "prompt"
	logAttempt = "attempt"
	logStatus  = "status"
	logReason  = "reason"
	logWait    = "wait"
	logError   = "error"
)

func deadlineOutcome(p Profile) outcome {
	return outcome{reason: ReasonDeadline, msg: fmt.Sprintf("total timeout of %s reached", p.TotalTimeout), cause: context.DeadlineExceeded}
}

func canceledOutcome(ctx context.Context) outcome {
	return outcome{reason: ReasonCanceled, msg: ctx.Err().Error(), cause: ctx.Err()}
}

func (ep *endpoint) fail(model string, attempts int, out outcome) *Error {
	return &Error{
		Profile: ep.profile.Name, Model: model, Attempts: attempts, Status: out.status,
		Reason: out.reason, msg: ep.redact.clean(out.msg), cause: out.cause,
	}
}

// RequestBody returns the JSON body Complete would send for req (the first
// attempt's), for tools that show operators exactly what a model receives.
// The body never holds the API key, which travels in a header.
func (c *Client) RequestBody(req Request) (endpointURL string, body []byte, err error) {
	ep, err := c.endpoint(req.Profile)
	if err != nil {
		return "", nil, err
	}
	call, err := buildCall(ep.callProfile(), req)
	if err != nil {
		return "", nil, fmt.Errorf("llm: profile %q: %w", ep.profile.Name, err)
	}
	body, err = json.MarshalIndent(call, "", "  ")
	if err != nil {
		return "", nil, fmt.Errorf("llm: encode request: %w", err)
	}
	return strings.TrimRight(ep.profile.BaseURL, "/") + "/chat/completions", body, nil
}
