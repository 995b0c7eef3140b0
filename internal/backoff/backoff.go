// Package backoff is conclave's one retry policy: exponential waits with
// jitter, a server's Retry-After taking precedence. The LLM client and the
// Slack outbox use it with their own bounds.
package backoff

import (
	"context"
	"time"
)

// Policy is a base wait, doubling at each retry up to a cap.
type Policy struct {
	Base time.Duration // the wait before the first retry (before jitter)
	Cap  time.Duration // no wait grows past it (before jitter)
}

// Wait is the wait before retry n (1-based): b = Base·2^(n-1), capped at
// Cap, then drawn from [b/2, b] by jitter (a number in [0, 1]: "equal
// jitter"), so that callers that failed together do not retry together.
// A positive retryAfter (what the server asked for) replaces it.
func (p Policy) Wait(n int, jitter float64, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	b := p.Cap
	if n >= 1 && n <= 32 && p.Base > 0 {
		if d := p.Base << (n - 1); d > 0 && d < p.Cap {
			b = d
		}
	}
	jitter = min(max(jitter, 0), 1)
	return b/2 + time.Duration(jitter*float64(b/2))
}

// Sleep waits d, or until ctx ends, returning ctx's error then. It is the
// one wait between retries.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
