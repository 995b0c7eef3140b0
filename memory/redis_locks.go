package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLocks is the part of a Redis store that holds the conversations'
// locks: one key per conversation, in its hash slot. The store's load and
// commit scripts also take and release that key, atomically with the
// rest of what they do.
type redisLocks struct{ *redisConn }

// AcquireLock implements Store.
func (r *redisLocks) AcquireLock(ctx context.Context, convID string, ttl time.Duration) (Lock, error) {
	if err := checkAcquire(convID, ttl); err != nil {
		return Lock{}, err
	}
	l := Lock{ConversationID: convID, Token: newToken()}
	err := r.c.SetArgs(ctx, r.keys.conv(convID).lock, l.Token, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	if errors.Is(err, redis.Nil) {
		err = ErrLocked
	}
	if err != nil {
		return Lock{}, fmt.Errorf("memory: acquire lock %s: %w", convID, err)
	}
	return l, nil
}

// RenewLock implements Store.
func (r *redisLocks) RenewLock(ctx context.Context, l Lock, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return fmt.Errorf("memory: renew lock %s: %w", l.ConversationID, err)
	}
	n, err := renewScript.Run(ctx, r.c, []string{r.keys.conv(l.ConversationID).lock}, l.Token, ms(ttl)).Int()
	if err == nil && n == 0 {
		err = ErrLockLost
	}
	if err != nil {
		return fmt.Errorf("memory: renew lock %s: %w", l.ConversationID, err)
	}
	return nil
}

// CheckLock implements Store.
func (r *redisLocks) CheckLock(ctx context.Context, l Lock) error {
	token, err := r.c.Get(ctx, r.keys.conv(l.ConversationID).lock).Result()
	if errors.Is(err, redis.Nil) || (err == nil && token != l.Token) {
		err = ErrLockLost
	}
	if err != nil {
		return fmt.Errorf("memory: check lock %s: %w", l.ConversationID, err)
	}
	return nil
}

// ReleaseLock implements Store.
func (r *redisLocks) ReleaseLock(ctx context.Context, l Lock) (bool, error) {
	pending, err := r.release(ctx, l)
	if err != nil {
		return false, fmt.Errorf("memory: release lock %s: %w", l.ConversationID, err)
	}
	return pending, nil
}

// release drops l when it is still held and reports whether the
// conversation is pending.
func (r *redisLocks) release(ctx context.Context, l Lock) (bool, error) {
	k := r.keys.conv(l.ConversationID)
	n, err := releaseScript.Run(ctx, r.c, []string{k.lock, k.due}, l.Token, l.ConversationID).Int()
	return n == 1, err
}
