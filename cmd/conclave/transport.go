package main

import (
	"net/http"
	"time"
)

// webClient is the HTTP client for the model endpoints and Slack's Web
// API. It keeps idle connections for the turns that run at once: the
// standard transport keeps two per host, so with more turns in flight most
// calls would open a new connection (and, against a real endpoint, a new
// TLS session), which the benchmark showed as a sixth of conclave's CPU.
func webClient(maxParallel int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(16, 2*maxParallel)
	t.MaxIdleConns = max(t.MaxIdleConns, 4*t.MaxIdleConnsPerHost)
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: t}
}
