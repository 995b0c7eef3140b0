package memory

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// inSessions is the part of the in-process store that keeps the experts'
// sessions. It is guarded by the store's mutex, which a commit holds while
// it appends to them.
type inSessions struct {
	mu          *sync.Mutex // the store's
	maxMessages int
	clock       func() time.Time                     // stamps entries stored without a time
	sessions    map[string]map[string][]SessionEntry // namespace → key → entries
	used        map[string]map[string]uint64         // namespace → key → useSeq at its last append
	useSeq      uint64
}

func (p *inSessions) appendSession(a SessionAppend) {
	if len(a.Entries) == 0 {
		return
	}
	a = stamped([]SessionAppend{a}, p.clock())[0]
	ns := p.sessions[a.Namespace]
	if ns == nil {
		ns = map[string][]SessionEntry{}
		p.sessions[a.Namespace] = ns
	}
	entries := append(ns[a.Key], a.Entries...)
	if over := len(entries) - p.maxMessages; over > 0 {
		// Reslice rather than copy: the next append that outgrows the
		// array copies only the kept entries, so the bound costs nothing
		// per append.
		entries = entries[over:]
	}
	ns[a.Key] = entries
	if p.used[a.Namespace] == nil {
		p.used[a.Namespace] = map[string]uint64{}
	}
	p.useSeq++
	p.used[a.Namespace][a.Key] = p.useSeq
}

// AppendSession implements Store.
func (p *inSessions) AppendSession(_ context.Context, a SessionAppend) error {
	if err := checkSessionAppends([]SessionAppend{a}); err != nil {
		return fmt.Errorf("memory: append session: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.appendSession(a)
	return nil
}

// ReadSession implements Store.
func (p *inSessions) ReadSession(_ context.Context, namespace, key string, n int) ([]SessionEntry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	entries := p.sessions[namespace][key]
	if n > 0 && len(entries) > n {
		entries = entries[len(entries)-n:]
	}
	return slices.Clone(entries), nil
}

// Sessions implements Store.
func (p *inSessions) Sessions(_ context.Context, namespace string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.sessions[namespace])), nil
}

// RecentSessions implements Store.
func (p *inSessions) RecentSessions(_ context.Context, namespace string, n int) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	used := p.used[namespace]
	keys := slices.SortedFunc(maps.Keys(p.sessions[namespace]), func(a, b string) int {
		return cmp.Compare(used[b], used[a])
	})
	if n > 0 && len(keys) > n {
		keys = keys[:n]
	}
	return keys, nil
}
