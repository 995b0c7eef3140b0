package bot

import (
	"math"
	"sync"
	"time"
)

// requestLimit is a token bucket's shape: Burst requests at once, then one
// every Every.
type requestLimit struct {
	Burst int
	Every time.Duration
}

// maxBuckets bounds the keys a limiter remembers, so that requests under
// ever new keys (made-up link tokens) cannot grow it without end.
const maxBuckets = 10000

// limiter applies one requestLimit to each of many keys (a link token, a
// client address). Its clock is injected; it starts nothing.
type limiter struct {
	limit requestLimit
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

// bucket is one key's tokens as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(limit requestLimit, now func() time.Time) *limiter {
	return &limiter{limit: limit, now: now, buckets: map[string]*bucket{}}
}

// allow takes one token of key's bucket. When there is none it returns
// false and how long until there is. A key it has no room for is refused
// too (after forgetting the buckets that are full again, which are no
// different from new ones).
func (l *limiter) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.forgetFull(now)
		}
		if len(l.buckets) >= maxBuckets {
			return false, l.limit.Every
		}
		b = &bucket{tokens: float64(l.limit.Burst), at: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	if b.tokens < 1 {
		wait := time.Duration(math.Ceil((1 - b.tokens) * float64(l.limit.Every)))
		return false, wait
	}
	b.tokens--
	return true, 0
}

// refill adds the tokens earned since b was last seen, up to the burst.
func (l *limiter) refill(b *bucket, now time.Time) {
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens = min(float64(l.limit.Burst), b.tokens+float64(elapsed)/float64(l.limit.Every))
		b.at = now
	}
}

func (l *limiter) forgetFull(now time.Time) {
	for key, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= float64(l.limit.Burst) {
			delete(l.buckets, key)
		}
	}
}
