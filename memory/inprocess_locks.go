package memory

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// inLocks is the part of the in-process store that holds the
// conversations' locks. It is guarded by the store's mutex, which a load
// and a commit hold while they check the lock.
type inLocks struct {
	mu    *sync.Mutex      // the store's
	clock func() time.Time // the store's; called with mu held
	locks map[string]inLock
}

type inLock struct {
	token   string
	expires time.Time
}

func newInLocks(mu *sync.Mutex, clock func() time.Time) inLocks {
	return inLocks{mu: mu, clock: clock, locks: map[string]inLock{}}
}

// held reports whether l is held at now; callers hold mu.
func (p *inLocks) held(l Lock, now time.Time) bool {
	rec, ok := p.locks[l.ConversationID]
	return ok && rec.token == l.Token && now.Before(rec.expires)
}

// lease is when the lock on a conversation expires (zero when there is
// none); callers hold mu.
func (p *inLocks) lease(convID string) time.Time { return p.locks[convID].expires }

// unlock drops l when its token still holds the lock; callers hold mu.
func (p *inLocks) unlock(l Lock) {
	if rec, ok := p.locks[l.ConversationID]; ok && rec.token == l.Token {
		delete(p.locks, l.ConversationID)
	}
}

// sweepLocks drops the locks that expired; callers hold mu.
func (p *inLocks) sweepLocks(now time.Time) {
	for id, l := range p.locks {
		if !now.Before(l.expires) {
			delete(p.locks, id)
		}
	}
}

// AcquireLock implements Store.
func (p *inLocks) AcquireLock(_ context.Context, convID string, ttl time.Duration) (Lock, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acquire(convID, ttl, p.clock())
}

// acquire takes the lock on a conversation; callers hold mu.
func (p *inLocks) acquire(convID string, ttl time.Duration, now time.Time) (Lock, error) {
	if err := checkAcquire(convID, ttl); err != nil {
		return Lock{}, err
	}
	if rec, ok := p.locks[convID]; ok && now.Before(rec.expires) {
		return Lock{}, fmt.Errorf("memory: acquire lock %s: %w", convID, ErrLocked)
	}
	l := Lock{ConversationID: convID, Token: newToken()}
	p.locks[convID] = inLock{token: l.Token, expires: now.Add(ttl)}
	return l, nil
}

// RenewLock implements Store.
func (p *inLocks) RenewLock(_ context.Context, l Lock, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return fmt.Errorf("memory: renew lock %s: %w", l.ConversationID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock()
	if !p.held(l, now) {
		return fmt.Errorf("memory: renew lock %s: %w", l.ConversationID, ErrLockLost)
	}
	p.locks[l.ConversationID] = inLock{token: l.Token, expires: now.Add(ttl)}
	return nil
}

// CheckLock implements Store.
func (p *inLocks) CheckLock(_ context.Context, l Lock) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held(l, p.clock()) {
		return fmt.Errorf("memory: check lock %s: %w", l.ConversationID, ErrLockLost)
	}
	return nil
}
