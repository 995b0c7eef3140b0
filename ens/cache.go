package ens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/conclavehq/conclave/internal/ttlcache"
)

// Cache defaults.
const (
	DefaultCacheTTL    = 10 * time.Minute
	DefaultNegativeTTL = time.Minute
	DefaultStaleMax    = 24 * time.Hour
	DefaultRPCTimeout  = 5 * time.Second

	// DefaultResolveTimeout is the deadline of one whole resolution: every
	// RPC call, gateway request and redirect of it together.
	DefaultResolveTimeout = 10 * time.Second
)

// maxCacheEntries bounds the cache; past it, the entries that can no
// longer be served are swept, and if none could be, all are.
const maxCacheEntries = 10000

// CacheConfig tunes a Cache. Zero durations take the defaults.
type CacheConfig struct {
	TTL         time.Duration // how long a resolved identity is fresh
	NegativeTTL time.Duration // how long "not found" is remembered
	StaleMax    time.Duration // how old an identity may be and still be served when the chain fails
	Logger      *slog.Logger
	Now         func() time.Time // the clock; time.Now when nil
}

// CacheStats counts what the cache did since it was built.
type CacheStats struct {
	Hits      uint64 // answered from a fresh entry (found or not found)
	Misses    uint64 // passed to the resolver behind
	Collapsed uint64 // waited for a look-up of the same name already under way
	Stale     uint64 // served an expired identity because the look-up failed
}

// Cache is a Resolver in front of another: it remembers identities and
// "not found" answers, runs one look-up per name at a time, and serves an
// expired identity (logged) when a fresh look-up fails for any reason other
// than "not found".
type Cache struct {
	next  Resolver
	names Names
	cfg   CacheConfig
	log   *slog.Logger

	entries *ttlcache.Cache[cached]
	flights singleflight.Group // look-ups under way, by canonical name

	hits, misses, collapsed, stale atomic.Uint64
}

// cached is what the cache keeps of a name (in the one TTL cache,
// internal/ttlcache).
type cached struct {
	agent Agent // zero for a negative entry
	err   error // the not-found error of a negative entry
}

// flight is what one look-up hands every caller that waited for it.
type flight struct {
	agent Agent
	// abandoned is set when the context of the caller that ran the
	// look-up ended it.
	abandoned bool
}

// NewCache wraps next. Names are keyed by their canonical form, so every
// form of a name shares one entry.
func NewCache(next Resolver, names Names, cfg CacheConfig) *Cache {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultCacheTTL
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = DefaultNegativeTTL
	}
	if cfg.StaleMax <= 0 {
		cfg.StaleMax = DefaultStaleMax
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cache{next: next, names: names, cfg: cfg, log: log}
	// A full cache drops the entries that can no longer be served: expired
	// and negative, or older than StaleMax.
	c.entries = ttlcache.New(maxCacheEntries, func(e ttlcache.Entry[cached], now time.Time) bool {
		return !now.After(e.Expires) || e.Value.err == nil && now.Sub(e.Fetched) <= c.cfg.StaleMax
	})
	return c
}

// Resolve answers from the cache when it can, else asks the resolver
// behind (once for all concurrent callers of a name). Errors are those of
// the resolver behind, or ErrInvalidName.
func (c *Cache) Resolve(ctx context.Context, name string) (Agent, error) {
	n, err := c.names.Parse(name)
	if err != nil {
		return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, err)
	}
	return c.resolve(ctx, name, n.Canonical)
}

// resolve is Resolve for a name already parsed: key is its canonical form,
// name the form errors show. The look-up runs under the context of the
// caller that started it; a caller whose context ends stops waiting.
func (c *Cache) resolve(ctx context.Context, name, key string) (Agent, error) {
	for {
		if a, ok, err := c.fresh(key); ok {
			return a, err
		}
		led := false // set by the look-up, so read only once it is over
		ch := c.flights.DoChan(key, func() (any, error) {
			led = true
			// A look-up that ended as this one began has stored its answer.
			if a, ok, err := c.fresh(key); ok {
				return flight{agent: a}, err
			}
			c.misses.Add(1)
			a, err := c.lookup(ctx, key)
			return flight{agent: a, abandoned: err != nil && ctx.Err() != nil}, err
		})
		var r singleflight.Result
		select {
		case r = <-ch:
		case <-ctx.Done():
			return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, ctx.Err())
		}
		f := r.Val.(flight)
		if !led {
			c.collapsed.Add(1)
			// The leader's context ended its look-up; ours is still
			// alive, so look again.
			if f.abandoned && ctx.Err() == nil {
				continue
			}
		}
		if r.Err != nil {
			return Agent{}, r.Err
		}
		return copyAgent(f.agent), nil
	}
}

// fresh answers from an entry that has not expired (a hit), if there is
// one: ok says whether there is, err is a negative entry's.
func (c *Cache) fresh(key string) (a Agent, ok bool, err error) {
	e, ok := c.entries.Fresh(key, c.cfg.Now())
	if !ok {
		return Agent{}, false, nil
	}
	c.hits.Add(1)
	if e.err != nil {
		return Agent{}, true, e.err
	}
	return copyAgent(e.agent), true, nil
}

// lookup asks the resolver behind and records the answer. On a failure that
// is not "not found", an identity fetched less than StaleMax ago is served,
// and kept for NegativeTTL before the chain is tried again.
func (c *Cache) lookup(ctx context.Context, key string) (Agent, error) {
	a, err := c.next.Resolve(ctx, key)
	now := c.cfg.Now()
	switch {
	case err == nil:
		c.entries.Put(key, ttlcache.Entry[cached]{Value: cached{agent: copyAgent(a)}, Fetched: now, Expires: now.Add(c.cfg.TTL)}, now)
		return a, nil
	case errors.Is(err, ErrNotFound):
		c.entries.Put(key, ttlcache.Entry[cached]{Value: cached{err: err}, Fetched: now, Expires: now.Add(c.cfg.NegativeTTL)}, now)
		return Agent{}, err
	}
	// One look-up of a key runs at a time (the flights), so nothing else
	// writes its entry between this read and the Put below.
	e, ok := c.entries.Get(key)
	// The caller giving up is no reason to serve stale data; a call's own
	// deadline passing is.
	if !ok || e.Value.err != nil || ctx.Err() != nil || now.Sub(e.Fetched) > c.cfg.StaleMax {
		return Agent{}, err
	}
	c.stale.Add(1)
	// Ask the failing chain again only after NegativeTTL, so an outage does
	// not cost every turn a timed-out call.
	e.Expires = now.Add(c.cfg.NegativeTTL)
	c.entries.Put(key, e, now)
	c.log.Warn("ens: chain unreachable, serving a cached identity",
		logKeyName, key, logKeyAge, now.Sub(e.Fetched).Round(time.Second).String(), logKeyError, err)
	return copyAgent(e.Value.agent), nil
}

// Forget drops a name's entry, so the next look-up goes to the chain.
func (c *Cache) Forget(name string) {
	n, err := c.names.Parse(name)
	if err != nil {
		return
	}
	c.entries.Delete(n.Canonical)
}

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	return CacheStats{
		Hits:      c.hits.Load(),
		Misses:    c.misses.Load(),
		Collapsed: c.collapsed.Load(),
		Stale:     c.stale.Load(),
	}
}
