package ens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
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

// maxCacheEntries bounds the cache; past it, expired entries are swept.
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

	mu       sync.Mutex
	entries  map[string]*cacheEntry
	inflight map[string]*flight

	hits, misses, collapsed, stale atomic.Uint64
}

type cacheEntry struct {
	agent   Agent // zero for a negative entry
	err     error // the not-found error of a negative entry
	fetched time.Time
	expires time.Time
}

type flight struct {
	done  chan struct{}
	agent Agent
	err   error
	// abandoned is set when the leader's own context ended the look-up.
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
	return &Cache{
		next:     next,
		names:    names,
		cfg:      cfg,
		log:      log,
		entries:  make(map[string]*cacheEntry),
		inflight: make(map[string]*flight),
	}
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
// name the form errors show.
func (c *Cache) resolve(ctx context.Context, name, key string) (Agent, error) {
	for {
		c.mu.Lock()
		if e, ok := c.entries[key]; ok && c.cfg.Now().Before(e.expires) {
			c.mu.Unlock()
			c.hits.Add(1)
			if e.err != nil {
				return Agent{}, e.err
			}
			return copyAgent(e.agent), nil
		}
		if f, ok := c.inflight[key]; ok {
			c.mu.Unlock()
			c.collapsed.Add(1)
			select {
			case <-f.done:
			case <-ctx.Done():
				return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, ctx.Err())
			}
			// The leader's context may have ended its look-up; ours is
			// still alive, so look again.
			if f.abandoned && ctx.Err() == nil {
				continue
			}
			if f.err != nil {
				return Agent{}, f.err
			}
			return copyAgent(f.agent), nil
		}
		f := &flight{done: make(chan struct{})}
		c.inflight[key] = f
		c.mu.Unlock()

		c.misses.Add(1)
		f.agent, f.err = c.lookup(ctx, key)
		f.abandoned = f.err != nil && ctx.Err() != nil
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		close(f.done)
		if f.err != nil {
			return Agent{}, f.err
		}
		return copyAgent(f.agent), nil
	}
}

// lookup asks the resolver behind and records the answer. On a failure that
// is not "not found", an identity fetched less than StaleMax ago is served,
// and kept for NegativeTTL before the chain is tried again.
func (c *Cache) lookup(ctx context.Context, key string) (Agent, error) {
	a, err := c.next.Resolve(ctx, key)
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.store(key, &cacheEntry{agent: copyAgent(a), fetched: now, expires: now.Add(c.cfg.TTL)})
		return a, nil
	case errors.Is(err, ErrNotFound):
		c.store(key, &cacheEntry{err: err, fetched: now, expires: now.Add(c.cfg.NegativeTTL)})
		return Agent{}, err
	}
	e, ok := c.entries[key]
	// The caller giving up is no reason to serve stale data; a call's own
	// deadline passing is.
	if !ok || e.err != nil || ctx.Err() != nil || now.Sub(e.fetched) > c.cfg.StaleMax {
		return Agent{}, err
	}
	c.stale.Add(1)
	// Ask the failing chain again only after NegativeTTL, so an outage does
	// not cost every turn a timed-out call.
	e.expires = now.Add(c.cfg.NegativeTTL)
	c.log.Warn("ens: chain unreachable, serving a cached identity",
		logKeyName, key, logKeyAge, now.Sub(e.fetched).Round(time.Second).String(), logKeyError, err)
	return copyAgent(e.agent), nil
}

// store records an entry; c.mu is held. A full cache first drops entries
// that can no longer be served.
func (c *Cache) store(key string, e *cacheEntry) {
	if len(c.entries) >= maxCacheEntries {
		now := c.cfg.Now()
		for k, old := range c.entries {
			if now.After(old.expires) && (old.err != nil || now.Sub(old.fetched) > c.cfg.StaleMax) {
				delete(c.entries, k)
			}
		}
	}
	c.entries[key] = e
}

// Forget drops a name's entry, so the next look-up goes to the chain.
func (c *Cache) Forget(name string) {
	n, err := c.names.Parse(name)
	if err != nil {
		return
	}
	c.mu.Lock()
	delete(c.entries, n.Canonical)
	c.mu.Unlock()
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
