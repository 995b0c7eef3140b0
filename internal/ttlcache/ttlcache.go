// Package ttlcache is the one cache whose entries expire: a bounded map of
// values, each with the time it was fetched and the time it expires. The
// caller passes the time of each call (its clock is injected), and decides
// which expired entries are still worth keeping. It imports nothing of
// conclave.
package ttlcache

import (
	"sync"
	"time"
)

// Entry is one cached value.
type Entry[V any] struct {
	Value   V
	Fetched time.Time // when the value was fetched
	Expires time.Time // when it stops being fresh
}

// Fresh tells whether e has not expired at now.
func (e Entry[V]) Fresh(now time.Time) bool { return now.Before(e.Expires) }

// Cache maps keys to entries, safe for concurrent use. When it is full, a
// Put first drops the entries keep refuses; if that frees nothing, it drops
// them all.
type Cache[V any] struct {
	max  int
	keep func(e Entry[V], now time.Time) bool

	mu sync.Mutex
	m  map[string]Entry[V]
}

// New returns a cache of at most max entries (the one being put aside);
// keep says which entries a full cache keeps: nil keeps the fresh ones.
func New[V any](max int, keep func(e Entry[V], now time.Time) bool) *Cache[V] {
	if keep == nil {
		keep = Entry[V].Fresh
	}
	return &Cache[V]{max: max, keep: keep, m: map[string]Entry[V]{}}
}

// Fresh returns key's value if it has not expired at now.
func (c *Cache[V]) Fresh(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !e.Fresh(now) {
		var zero V
		return zero, false
	}
	return e.Value, true
}

// Get returns key's entry, expired or not.
func (c *Cache[V]) Get(key string) (Entry[V], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return e, ok
}

// Put stores key's entry; now is the time entries are judged at when the
// cache is full.
func (c *Cache[V]) Put(key string, e Entry[V], now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		for k, old := range c.m {
			if !c.keep(old, now) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[key] = e
}

// Delete drops key's entry.
func (c *Cache[V]) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// Len is the number of entries, expired ones included.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
