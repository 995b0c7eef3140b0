package bot

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the transport's Prometheus series.
type metrics struct {
	envelopes    *prometheus.CounterVec // by envelope type
	skipped      *prometheus.CounterVec // events not for the engine, by reason
	handleErrors prometheus.Counter     // events left unacknowledged
	apiErrors    *prometheus.CounterVec // failed Web API calls, by method
	rateLimited  *prometheus.CounterVec // 429s waited out, by method
	reconnects   prometheus.Counter     // Socket Mode connections lost
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		envelopes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_slack_envelopes_total", Help: "Socket Mode envelopes received, by type.",
		}, []string{"type"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_slack_events_skipped_total", Help: "Events acknowledged without reaching the engine, by reason.",
		}, []string{"reason"}),
		handleErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "conclave_slack_events_unrecorded_total", Help: "Events the engine could not record, left for Slack to deliver again.",
		}),
		apiErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_slack_api_errors_total", Help: "Slack Web API calls that failed, by method.",
		}, []string{"method"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_slack_rate_limited_total", Help: "Slack rate limits (HTTP 429) waited out, by method.",
		}, []string{"method"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "conclave_slack_disconnects_total", Help: "Socket Mode connections lost (each is reopened).",
		}),
	}
	if reg == nil {
		return m
	}
	m.envelopes = register(reg, m.envelopes)
	m.skipped = register(reg, m.skipped)
	m.handleErrors = register(reg, m.handleErrors)
	m.apiErrors = register(reg, m.apiErrors)
	m.rateLimited = register(reg, m.rateLimited)
	m.reconnects = register(reg, m.reconnects)
	return m
}

// register registers c, or returns the collector already registered under
// its name (two Bots in one process share the series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
