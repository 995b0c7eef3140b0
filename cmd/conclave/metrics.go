package main

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// runMetrics are the series of `conclave run` outside the Slack transport
// (which registers its own): turns from the engine's per-turn report, and
// the model client, the store and the identity cache observed from the
// outside, so none of those packages depends on Prometheus.
type runMetrics struct {
	reg prometheus.Registerer

	turns          *prometheus.CounterVec
	turnSeconds    *prometheus.HistogramVec
	waitSeconds    *prometheus.HistogramVec
	tokens         *prometheus.CounterVec
	cost           *prometheus.CounterVec
	budgetUsed     *prometheus.GaugeVec
	turnFailures   *prometheus.CounterVec
	templateErrors *prometheus.CounterVec

	events      *prometheus.CounterVec
	lockTries   *prometheus.CounterVec
	lockSeconds prometheus.Histogram

	llmCalls       *prometheus.HistogramVec
	llmAttempts    *prometheus.CounterVec
	llmAttemptTime prometheus.Histogram

	toolCalls      *prometheus.CounterVec
	postsAbandoned prometheus.Counter
	feedback       *prometheus.GaugeVec
}

func newRunMetrics(reg prometheus.Registerer) *runMetrics {
	m := &runMetrics{
		reg: reg,
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_turns_total", Help: "Agent turns, by role, phase and outcome.",
		}, []string{"role", "phase", "outcome"}),
		turnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "conclave_turn_duration_seconds", Help: "Time a turn ran (model calls and posting included), by role.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}, []string{"role"}),
		waitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "conclave_turn_wait_seconds", Help: "Time a turn waited before it started, by role.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"role"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_llm_tokens_total", Help: "Model tokens the endpoints reported, by agent, model and direction (input, output).",
		}, []string{"agent", "model", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_llm_cost_usd_total", Help: "Cost of the model tokens at the configured prices (llm.prices), in USD, by agent and model.",
		}, []string{"agent", "model"}),
		budgetUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "conclave_budget_used_ratio", Help: "Share of a daily token budget used, by scope (person, channel, workspace), as the last turn to start found it.",
		}, []string{"scope"}),
		turnFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_turn_failures_total", Help: "Turns that failed, by role and phase.",
		}, []string{"role", "phase"}),
		templateErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_template_errors_total", Help: "Turns failed by a template (parse, render or settings error), by role and phase.",
		}, []string{"role", "phase"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_events_total",
			Help: "Inbound messages offered to the store, by result: recorded, duplicate (a retry or the same message under another id) or error (left for Slack to deliver again).",
		}, []string{"result"}),
		lockTries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_lock_acquire_total",
			Help: "Attempts to take a conversation's lock, by result: acquired, busy (held by another worker or replica; the work waits for its release) or error.",
		}, []string{"result"}),
		lockSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "conclave_lock_acquire_duration_seconds", Help: "Time one attempt to take a conversation's lock took.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		llmCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "conclave_llm_request_duration_seconds", Help: "Time a model completion took (streamed or not), retries and waits included, by role and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 13),
		}, []string{"role", "outcome"}),
		llmAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_llm_attempts_total", Help: "HTTP calls to model endpoints, by status code (\"error\" when no response came).",
		}, []string{"status"}),
		llmAttemptTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "conclave_llm_attempt_duration_seconds", Help: "Time one HTTP call to a model endpoint took, until its response headers.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 13),
		}),
		postsAbandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "conclave_posts_abandoned_total",
			Help: "Posts given up: a permanent Slack error, or still failing when slack.post_retry_window ran out (each logged as an ERROR).",
		}),
	}
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "conclave_tool_calls_total",
		Help: "MCP tool calls a model asked for, by server, tool and outcome (ok, error, timeout, failed, unavailable, unknown, canceled).",
	}, []string{"server", "tool", "outcome"})
	m.feedback = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "conclave_feedback_total",
		Help: "Ratings given with the 👍/👎 buttons under agents' posts, by agent, role and value (positive, negative): a person's rating of a turn counts once, and a change moves it from one value to the other.",
	}, []string{"agent", "role", "value"})
	reg.MustRegister(m.turns, m.turnSeconds, m.waitSeconds, m.tokens, m.cost, m.budgetUsed, m.turnFailures, m.templateErrors,
		m.events, m.lockTries, m.lockSeconds, m.llmCalls, m.llmAttempts, m.llmAttemptTime, m.toolCalls, m.postsAbandoned,
		m.feedback)
	return m
}

// observeBudget is the engine's OnBudget hook.
func (m *runMetrics) observeBudget(scope string, ratio float64) {
	m.budgetUsed.WithLabelValues(scope).Set(ratio)
}

// observeFeedback is the engine's OnFeedback hook.
func (m *runMetrics) observeFeedback(agent, role, value, previous string) {
	if previous != "" {
		m.feedback.WithLabelValues(agent, role, previous).Dec()
	}
	m.feedback.WithLabelValues(agent, role, value).Inc()
}

// observeToolCall is the tool hub's OnCall hook.
func (m *runMetrics) observeToolCall(server, tool, outcome string) {
	m.toolCalls.WithLabelValues(server, tool, outcome).Inc()
}

// observeTurn is the engine's OnTurn hook.
func (m *runMetrics) observeTurn(r agents.TurnReport) {
	m.turns.WithLabelValues(r.Role, r.Phase, r.Outcome).Inc()
	m.turnSeconds.WithLabelValues(r.Role).Observe(r.Duration.Seconds())
	m.waitSeconds.WithLabelValues(r.Role).Observe(r.Wait.Seconds())
	for _, u := range r.Usage {
		m.tokens.WithLabelValues(r.Agent, u.Model, "input").Add(float64(u.InputTokens))
		m.tokens.WithLabelValues(r.Agent, u.Model, "output").Add(float64(u.OutputTokens))
		if u.Priced {
			m.cost.WithLabelValues(r.Agent, u.Model).Add(u.CostUSD)
		}
	}
	if r.Outcome == "failed" {
		m.turnFailures.WithLabelValues(r.Role, r.Phase).Inc()
	}
	var te *templates.Error
	if errors.As(r.Err, &te) {
		m.templateErrors.WithLabelValues(r.Role, r.Phase).Inc()
	}
}

// observePostAbandoned is the engine's OnPostAbandoned hook.
func (m *runMetrics) observePostAbandoned() { m.postsAbandoned.Inc() }

// watchPosts exports the posts waiting in every conversation's outbox, as
// the store counts them (shared by every replica), read at each scrape.
func (m *runMetrics) watchPosts(store memory.Store, log *slog.Logger) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "conclave_posts_pending",
		Help: "Posts recorded and not yet made (Slack failing or slow), over every replica.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := store.PendingPosts(ctx)
		if err != nil {
			log.Warn("metrics: count pending posts", slog.Any(logErr, err))
			return math.NaN()
		}
		return float64(n)
	}))
}

// watchTemplates exports how many problems the loaded prompt set has
// (files that do not parse, unknown file names), read at each scrape.
func (m *runMetrics) watchTemplates(lib *templates.Library) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "conclave_template_problems", Help: "Problems in the loaded config repository of prompts (each fails the prompts that use it).",
	}, func() float64 {
		if s := lib.Current(); s != nil {
			return float64(len(s.Problems()))
		}
		return 0
	}))
}

// watchENS exports the identity cache's counters, read at each scrape.
func (m *runMetrics) watchENS(stats func() ens.CacheStats) {
	counter := func(name, help string, field func(ens.CacheStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(field(stats())) })
	}
	m.reg.MustRegister(
		counter("conclave_ens_cache_hits_total", "Identity look-ups answered from the cache (found or not found).",
			func(s ens.CacheStats) uint64 { return s.Hits }),
		counter("conclave_ens_cache_misses_total", "Identity look-ups passed to the chain.",
			func(s ens.CacheStats) uint64 { return s.Misses }),
		counter("conclave_ens_cache_collapsed_total", "Identity look-ups that waited for the same name's look-up already under way.",
			func(s ens.CacheStats) uint64 { return s.Collapsed }),
		counter("conclave_ens_cache_stale_total", "Expired identities served because the chain could not be read.",
			func(s ens.CacheStats) uint64 { return s.Stale }),
	)
}

// observedModel times each call of the model client, streamed or not.
// It names every method it passes on, so none reaches the client
// untimed: a method added to the client is not a model call until it is
// written here.
type observedModel struct {
	client *llm.Client
	m      *runMetrics
}

var _ agents.StreamModel = observedModel{}

// observeModel returns the client as the engine's model: an
// agents.StreamModel too, as the client is.
func (m *runMetrics) observeModel(c *llm.Client) agents.Model { return observedModel{client: c, m: m} }

func (o observedModel) Profile(name string) (llm.Profile, error) { return o.client.Profile(name) }

func (o observedModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	resp, err := o.client.Complete(ctx, req)
	o.m.observeCall(req.Role, start, err)
	return resp, err
}

func (o observedModel) Stream(ctx context.Context, req llm.Request, onText func(content string)) (llm.Response, error) {
	start := time.Now()
	resp, err := o.client.Stream(ctx, req, onText)
	o.m.observeCall(req.Role, start, err)
	return resp, err
}

// observeCall records one model call that began at start, by role and
// outcome (the llm.Error's reason, "error" for any other failure).
func (m *runMetrics) observeCall(role string, start time.Time, err error) {
	outcome := "ok"
	var le *llm.Error
	switch {
	case errors.As(err, &le):
		outcome = strings.ReplaceAll(le.Reason, " ", "_")
	case err != nil:
		outcome = "error"
	}
	m.llmCalls.WithLabelValues(role, outcome).Observe(time.Since(start).Seconds())
}

// llmHTTP wraps the model client's HTTP client to count and time every
// call, retries included, by status.
func (m *runMetrics) llmHTTP(next llm.HTTPDoer) llm.HTTPDoer {
	return doerFunc(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := next.Do(req)
		m.llmAttemptTime.Observe(time.Since(start).Seconds())
		status := "error"
		if err == nil {
			status = strconv.Itoa(resp.StatusCode)
		}
		m.llmAttempts.WithLabelValues(status).Inc()
		return resp, err
	})
}

type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// observedStore counts what the engine's store calls say about events
// and locks.
type observedStore struct {
	memory.Store
	m *runMetrics
}

func (m *runMetrics) observeStore(s memory.Store) memory.Store {
	if r, ok := s.(memory.Recorder); ok {
		return observedRecorder{observedStore: observedStore{Store: s, m: m}, r: r}
	}
	return observedStore{Store: s, m: m}
}

// observedRecorder is an observedStore of a store that records a message
// with its look-ups in one round trip; it counts those events too.
type observedRecorder struct {
	observedStore
	r memory.Recorder
}

func (s observedRecorder) RecordLooked(ctx context.Context, in memory.Intake) (memory.Intaken, error) {
	out, err := s.r.RecordLooked(ctx, in)
	if err != nil || out.Met {
		s.countEvent(out.Recorded, err)
	}
	return out, err
}

func (s observedStore) RecordMessage(ctx context.Context, conv memory.Conversation, msg memory.Message, eventID string) (bool, error) {
	recorded, err := s.Store.RecordMessage(ctx, conv, msg, eventID)
	s.countEvent(recorded, err)
	return recorded, err
}

// countEvent counts the outcome of recording an event.
func (s observedStore) countEvent(recorded bool, err error) {
	switch {
	case err != nil:
		s.m.events.WithLabelValues("error").Inc()
	case recorded:
		s.m.events.WithLabelValues("recorded").Inc()
	default:
		s.m.events.WithLabelValues("duplicate").Inc()
	}
}

func (s observedStore) AcquireLock(ctx context.Context, convID string, ttl time.Duration) (memory.Lock, error) {
	start := time.Now()
	l, err := s.Store.AcquireLock(ctx, convID, ttl)
	s.lockTry(start, err)
	return l, err
}

// AcquireAndLoad is how the engine takes a lock (and loads the
// conversation in the same round trip).
func (s observedStore) AcquireAndLoad(ctx context.Context, convID string, ttl time.Duration, q memory.Lookup) (memory.Lock, memory.Snapshot, memory.Found, error) {
	start := time.Now()
	l, snap, found, err := s.Store.AcquireAndLoad(ctx, convID, ttl, q)
	s.lockTry(start, err)
	return l, snap, found, err
}

func (s observedStore) lockTry(start time.Time, err error) {
	s.m.lockSeconds.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		s.m.lockTries.WithLabelValues("acquired").Inc()
	case errors.Is(err, memory.ErrLocked):
		s.m.lockTries.WithLabelValues("busy").Inc()
	default:
		s.m.lockTries.WithLabelValues("error").Inc()
	}
}
