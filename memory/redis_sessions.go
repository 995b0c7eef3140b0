package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// redisSessions is the part of a Redis store that keeps the experts'
// sessions: lists of entries per namespace and business key, appended to
// by commits and read by turns.
type redisSessions struct{ *redisConn }

// appendSession appends a to its session; with a commit id, an append
// already applied for that commit is skipped.
func (r *redisSessions) appendSession(ctx context.Context, a SessionAppend, commitID string) error {
	if len(a.Entries) == 0 {
		return nil
	}
	sk := r.keys.sessions(a.Namespace)
	keys := []string{sk.list(a.Key), sk.index(), sk.recent()}
	if commitID != "" {
		keys = append(keys, sk.applied(commitID))
	}
	args := make([]any, 0, 3+len(a.Entries))
	args, err := appendEntries(append(args, a.Key, r.opts.MaxSessionMessages, r.convTTL()), a.Entries)
	if err != nil {
		return err
	}
	if err := appendScript.Run(ctx, r.c, keys, args...).Err(); err != nil {
		return fmt.Errorf("append to session %q of %s: %w", a.Key, a.Namespace, err)
	}
	return nil
}

// appendEntries appends the JSON of each entry to a script's args.
func appendEntries(args []any, entries []SessionEntry) ([]any, error) {
	for _, e := range entries {
		body, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode session entry: %w", err)
		}
		args = append(args, body)
	}
	return args, nil
}

// AppendSession implements Store.
func (r *redisSessions) AppendSession(ctx context.Context, a SessionAppend) error {
	err := checkSessionAppends([]SessionAppend{a})
	if err == nil {
		err = r.appendSession(ctx, stamped([]SessionAppend{a}, r.opts.Now())[0], "")
	}
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	return nil
}

// ReadSession implements Store.
func (r *redisSessions) ReadSession(ctx context.Context, namespace, key string, n int) ([]SessionEntry, error) {
	from := int64(0)
	if n > 0 {
		from = -int64(n)
	}
	bodies, err := r.c.LRange(ctx, r.keys.sessions(namespace).list(key), from, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("memory: read session %q of %s: %w", key, namespace, err)
	}
	out, err := decodeEntries(bodies)
	if err != nil {
		return nil, fmt.Errorf("memory: read session %q of %s: %w", key, namespace, err)
	}
	return out, nil
}

// Sessions implements Store.
func (r *redisSessions) Sessions(ctx context.Context, namespace string) ([]string, error) {
	keys, err := r.c.SMembers(ctx, r.keys.sessions(namespace).index()).Result()
	if err != nil {
		return nil, fmt.Errorf("memory: sessions of %s: %w", namespace, err)
	}
	slices.Sort(keys)
	return keys, nil
}

// RecentSessions implements Store.
func (r *redisSessions) RecentSessions(ctx context.Context, namespace string, n int) ([]string, error) {
	sk := r.keys.sessions(namespace)
	stop := int64(n) - 1
	if n <= 0 {
		stop = -1
	}
	var recent *redis.StringSliceCmd
	var ranked, all *redis.IntCmd
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		recent = p.ZRevRange(ctx, sk.recent(), 0, stop)
		ranked = p.ZCard(ctx, sk.recent())
		all = p.SCard(ctx, sk.index())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("memory: recent sessions of %s: %w", namespace, err)
	}
	keys := recent.Val()
	if ranked.Val() >= all.Val() || n > 0 && len(keys) >= n {
		return keys, nil
	}
	// Keys appended to before the recent set existed follow, sorted.
	rest, err := r.c.SMembers(ctx, sk.index()).Result()
	if err != nil {
		return nil, fmt.Errorf("memory: recent sessions of %s: %w", namespace, err)
	}
	slices.Sort(rest)
	have := make(map[string]bool, len(keys))
	for _, k := range keys {
		have[k] = true
	}
	for _, k := range rest {
		if n > 0 && len(keys) >= n {
			break
		}
		if !have[k] {
			keys = append(keys, k)
		}
	}
	return keys, nil
}
