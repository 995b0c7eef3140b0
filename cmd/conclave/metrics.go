package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclavehq/conclave/agents"
)

// runMetrics are the engine's series, fed by its per-turn report.
type runMetrics struct {
	turns        *prometheus.CounterVec
	turnSeconds  *prometheus.HistogramVec
	waitSeconds  *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	turnFailures *prometheus.CounterVec
}

func newRunMetrics(reg prometheus.Registerer) *runMetrics {
	m := &runMetrics{
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
			Name: "conclave_llm_tokens_total", Help: "Model tokens used, by agent, role and kind (prompt, completion).",
		}, []string{"agent", "role", "kind"}),
		turnFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_turn_failures_total", Help: "Turns that failed, by role and phase.",
		}, []string{"role", "phase"}),
	}
	reg.MustRegister(m.turns, m.turnSeconds, m.waitSeconds, m.tokens, m.turnFailures)
	return m
}

// observeTurn is the engine's OnTurn hook.
func (m *runMetrics) observeTurn(r agents.TurnReport) {
	m.turns.WithLabelValues(r.Role, r.Phase, r.Outcome).Inc()
	m.turnSeconds.WithLabelValues(r.Role).Observe(r.Duration.Seconds())
	m.waitSeconds.WithLabelValues(r.Role).Observe(r.Wait.Seconds())
	if r.PromptTokens > 0 {
		m.tokens.WithLabelValues(r.Agent, r.Role, "prompt").Add(float64(r.PromptTokens))
	}
	if r.CompletionTokens > 0 {
		m.tokens.WithLabelValues(r.Agent, r.Role, "completion").Add(float64(r.CompletionTokens))
	}
	if r.Outcome == "failed" {
		m.turnFailures.WithLabelValues(r.Role, r.Phase).Inc()
	}
}
