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

// redisTraces is the part of a Redis store that reads turn traces and
// records feedback; commits add the traces (commitScript), in the
// conversation's hash slot.
type redisTraces struct{ *redisConn }

// traceKeys are the keys of one conversation's traces, in its hash slot:
// the list of entries (traceEntry), their total size, the feedback hash
// (turn + NUL + user → Feedback) and the thread's reference to the
// conversation.
type traceKeys struct{ list, bytes, feedback, ref string }

func (k keySchema) traces(convID, channel, threadTS string) traceKeys {
	base, e := k.shards[shardOf(convID)].base, esc(convID)
	return traceKeys{
		list: base + "trace:" + e, bytes: base + "tracebytes:" + e, feedback: base + "feedback:" + e,
		ref: k.traceRef(shardOf(convID), channel, threadTS),
	}
}

// traceBoundKeys are the keys of the bound over all traces, one hash slot
// (see luaTraceBound): the index by last trace, the sizes and their sum.
type traceBoundKeys struct{ index, sizes, sum string }

func (k keySchema) traceBound() traceBoundKeys {
	base := k.prefix + "{traces}:"
	return traceBoundKeys{index: base + "index", sizes: base + "sizes", sum: base + "sum"}
}

func (k traceBoundKeys) all() []string { return []string{k.index, k.sizes, k.sum} }

// traceBytesKey is the size key of the trace list key list (as the bound's
// index names conversations).
func traceBytesKey(list string) (string, bool) {
	i := strings.Index(list, "}:")
	if i < 0 || !strings.HasPrefix(list[i+2:], "trace:") {
		return "", false
	}
	return list[:i+2] + "tracebytes:" + strings.TrimPrefix(list[i+2:], "trace:"), true
}

// traceRef leads from a thread to its conversation's traces; it lives in
// the conversation's shard, which the thread alone does not tell, so a
// reader asks every shard.
func (k keySchema) traceRef(shard int, channel, threadTS string) string {
	return k.shards[shard].base + "tref:" + esc(channel) + ":" + esc(threadTS)
}

// Traces implements Store, in one round trip.
func (p *redisTraces) Traces(ctx context.Context, convID string) (Traces, error) {
	k := p.keys.traces(convID, "", "")
	var list *redis.StringSliceCmd
	var fb *redis.MapStringStringCmd
	_, err := p.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		list = pl.LRange(ctx, k.list, 0, -1)
		fb = pl.HGetAll(ctx, k.feedback)
		return nil
	})
	if err != nil {
		return Traces{}, fmt.Errorf("memory: traces of %s: %w", convID, err)
	}
	var out Traces
	for _, e := range list.Val() {
		t, err := readTraceEntry([]byte(e))
		if err != nil {
			return Traces{}, fmt.Errorf("memory: traces of %s: %w", convID, err)
		}
		out.Turns = append(out.Turns, t)
	}
	for _, v := range fb.Val() {
		var f Feedback
		if err := json.Unmarshal([]byte(v), &f); err != nil {
			return Traces{}, fmt.Errorf("memory: feedback of %s: %w", convID, err)
		}
		out.Feedback = append(out.Feedback, f)
	}
	slices.SortFunc(out.Feedback, compareFeedback)
	return out, nil
}

// TraceRef implements Store: one pipeline asks every shard.
func (p *redisTraces) TraceRef(ctx context.Context, channel, threadTS string) (string, error) {
	cmds := make([]*redis.StringCmd, dueShards)
	_, err := p.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i := range dueShards {
			cmds[i] = pl.Get(ctx, p.keys.traceRef(i, channel, threadTS))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("memory: traces of %s/%s: %w", channel, threadTS, err)
	}
	for _, c := range cmds {
		if id := c.Val(); id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("memory: traces of %s/%s: %w", channel, threadTS, ErrNotFound)
}

// RecordFeedback implements Store.
func (p *redisTraces) RecordFeedback(ctx context.Context, convID string, f Feedback) error {
	if err := checkFeedback(convID, f); err != nil {
		return fmt.Errorf("memory: record feedback: %w", err)
	}
	body, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("memory: record feedback: %w", err)
	}
	k := p.keys.traces(convID, "", "")
	_, err = p.c.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		pl.HSet(ctx, k.feedback, f.TurnID+"\x00"+f.User, body)
		pl.PExpire(ctx, k.feedback, p.opts.TraceRetention)
		return nil
	})
	if err != nil {
		return fmt.Errorf("memory: record feedback on %s: %w", convID, err)
	}
	return nil
}
