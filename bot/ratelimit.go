package bot

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
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
// client address), one rate.Limiter per key. Its clock is injected (each
// call passes the time to the rate.Limiter); it starts nothing.
type limiter struct {
	limit requestLimit
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newLimiter(limit requestLimit, now func() time.Time) *limiter {
	return &limiter{limit: limit, now: now, buckets: map[string]*rate.Limiter{}}
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
		b = rate.NewLimiter(rate.Every(l.limit.Every), l.limit.Burst)
		l.buckets[key] = b
	}
	if tokens := b.TokensAt(now); tokens < 1 {
		return false, time.Duration(math.Ceil((1 - tokens) * float64(l.limit.Every)))
	}
	b.AllowN(now, 1)
	return true, 0
}

// forgetFull drops the buckets that are full again: a new key starts full.
func (l *limiter) forgetFull(now time.Time) {
	for key, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.limit.Burst) {
			delete(l.buckets, key)
		}
	}
}
