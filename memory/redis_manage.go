package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisManager is the part of a Redis store that answers Manager: it
// describes a namespace's sessions and forgets one with the traces of
// the conversations its entries came from.
type redisManager struct{ *redisConn }

// SessionInfos implements Manager: the namespace's index, then its
// sessions' entries in one pipeline (one hash slot: a namespace's keys
// share its hash tag).
func (r *redisManager) SessionInfos(ctx context.Context, namespace, prefix string) ([]SessionInfo, error) {
	sk := r.keys.sessions(namespace)
	keys, err := r.c.SMembers(ctx, sk.index()).Result()
	if err != nil {
		return nil, fmt.Errorf("memory: sessions of %s: %w", namespace, err)
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return !strings.HasPrefix(k, prefix) })
	slices.Sort(keys)
	lists := make([]*redis.StringSliceCmd, len(keys))
	_, err = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			lists[i] = p.LRange(ctx, sk.list(k), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("memory: sessions of %s: %w", namespace, err)
	}
	out := make([]SessionInfo, 0, len(keys))
	for i, k := range keys {
		entries, err := decodeEntries(lists[i].Val())
		if err != nil {
			return nil, fmt.Errorf("memory: session %q of %s: %w", k, namespace, err)
		}
		out = append(out, sessionInfo(k, entries))
	}
	return out, nil
}

// forgetScript: KEYS list, index, recent set; ARGV session key. Returns
// the session's entries, removed with the key's index entries in one
// step, so that an append cannot slip between the read and the removal.
var forgetScript = redis.NewScript(`
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[1])
return entries
`)

// ForgetSession implements Manager. The traces go first, so that a
// failure leaves the session to forget again; then the session, in one
// script in its namespace's hash slot; then the traces of conversations
// that appended to it meanwhile. Each conversation's traces are in its
// own hash slot.
func (r *redisManager) ForgetSession(ctx context.Context, namespace, key string) (Forgotten, error) {
	if key == "" {
		return Forgotten{}, errNoSessionKey
	}
	sk := r.keys.sessions(namespace)
	var list *redis.StringSliceCmd
	var known *redis.BoolCmd
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		list = p.LRange(ctx, sk.list(key), 0, -1)
		known = p.SIsMember(ctx, sk.index(), key)
		return nil
	})
	if err != nil {
		return Forgotten{}, fmt.Errorf("memory: forget session %q of %s: %w", key, namespace, err)
	}
	if !known.Val() && len(list.Val()) == 0 {
		return Forgotten{}, fmt.Errorf("memory: session %q of %s: %w", key, namespace, ErrNotFound)
	}
	entries, err := decodeEntries(list.Val())
	if err != nil {
		return Forgotten{}, fmt.Errorf("memory: forget session %q of %s: %w", key, namespace, err)
	}
	convs := sourceConversations(entries)
	if err := r.forgetTraces(ctx, convs); err != nil {
		return Forgotten{}, fmt.Errorf("memory: forget session %q of %s: nothing was removed: %w", key, namespace, err)
	}
	bodies, err := forgetScript.Run(ctx, r.c, []string{sk.list(key), sk.index(), sk.recent()}, key).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Forgotten{}, fmt.Errorf("memory: forget session %q of %s: its conversations' traces are removed, the session is not: %w", key, namespace, err)
	}
	if entries, err = decodeEntries(bodies); err != nil {
		return Forgotten{}, fmt.Errorf("memory: forget session %q of %s: %w", key, namespace, err)
	}
	f := Forgotten{Entries: len(entries), Conversations: sourceConversations(entries)}
	late := slices.DeleteFunc(slices.Clone(f.Conversations), func(id string) bool { return slices.Contains(convs, id) })
	if err := r.forgetTraces(ctx, late); err != nil {
		return f, fmt.Errorf("memory: forget session %q of %s: the session is removed, the traces of %s are not: %w", key, namespace, strings.Join(late, ", "), err)
	}
	f.Conversations = slices.Compact(slices.Sorted(slices.Values(append(convs, late...))))
	return f, nil
}

// forgetTraces removes the turn traces of conversations and the feedback
// on them.
func (r *redisManager) forgetTraces(ctx context.Context, convs []string) error {
	if len(convs) == 0 {
		return nil
	}
	lists := make([]any, 0, len(convs))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range convs {
			tk := r.keys.traces(id, "", "")
			p.Del(ctx, tk.list, tk.bytes, tk.feedback)
			lists = append(lists, tk.list)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return traceForgetScript.Run(ctx, r.c, r.keys.traceBound().all(), lists...).Err()
}

// decodeEntries decodes a session list's bodies.
func decodeEntries(bodies []string) ([]SessionEntry, error) {
	out := make([]SessionEntry, 0, len(bodies))
	for _, body := range bodies {
		var e SessionEntry
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
