package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisUsage is the part of a Redis store that reads the daily usage
// counters; commits write them (commitScript, or usageScript on Cluster
// from the conversation's outbox).
type redisUsage struct{ *redisConn }

// usageKeys are the keys of one day's counters, in their own hash slot:
// the hash of counters and the marks of counts applied from an outbox.
type usageKeys struct{ base string }

func (k keySchema) usage(day string) usageKeys {
	return usageKeys{base: k.prefix + "{u:" + day + "}:"}
}

func (u usageKeys) counters() string               { return u.base + "usage" }
func (u usageKeys) applied(commitID string) string { return u.base + "applied:" + commitID }

// usageArgs appends w to a script's args as count_usage reads them.
func usageArgs(args []any, w usageWrites) []any {
	args = append(args, len(w.incr), len(w.names))
	if len(w.incr)+len(w.names) == 0 {
		return args
	}
	args = append(args, ms(UsageRetention))
	for _, in := range w.incr {
		args = append(args, in.field, in.by)
	}
	for _, n := range w.names {
		args = append(args, n[0], n[1])
	}
	return args
}

// countUsage applies usage parked in a conversation's outbox under
// commitID, at most once.
func (p *redisUsage) countUsage(ctx context.Context, day string, us []Usage, commitID string) error {
	w, err := usageWritesOf(us)
	if err != nil {
		return err
	}
	if len(w.incr)+len(w.names) == 0 {
		return nil
	}
	k := p.keys.usage(day)
	args := usageArgs([]any{p.convTTL()}, w)
	if err := usageScript.Run(ctx, p.c, []string{k.counters(), k.applied(commitID)}, args...).Err(); err != nil {
		return fmt.Errorf("count usage of %s: %w", day, err)
	}
	return nil
}

// Usage implements UsageLog: one pipeline reads every day asked for.
func (p *redisUsage) Usage(ctx context.Context, from, to time.Time) ([]UsageCount, error) {
	days, err := usageDays(from, to)
	if err != nil {
		return nil, usageErr(err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(days))
	_, err = p.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, d := range days {
			cmds[i] = pl.HGetAll(ctx, p.keys.usage(d).counters())
		}
		return nil
	})
	if err != nil {
		return nil, usageErr(err)
	}
	var out []UsageCount
	for i, d := range days {
		out = append(out, usageCounts(d, cmds[i].Val())...)
	}
	return out, nil
}

// Spent implements UsageLog, in one round trip.
func (p *redisUsage) Spent(ctx context.Context, person, channel string) (Spent, error) {
	q := &SpentQuery{Channel: channel, People: []string{person}}
	fields := spentFields(q)
	got, err := spentRead(p.c.HMGet(ctx, p.spentKey(), fields...), fields)
	if err != nil {
		return Spent{}, usageErr(err)
	}
	return spentFound(q, func(f string) string { return got[f] })[person], nil
}

// spentKey is the hash that holds today's budget totals.
func (p *redisUsage) spentKey() string { return p.keys.usage(UsageDay(p.opts.Now())).counters() }

// spentRead reads the answer of an HMGET of fields: field → value, a
// missing field left out.
func spentRead(cmd *redis.SliceCmd, fields []string) (map[string]string, error) {
	vals, err := cmd.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	got := map[string]string{}
	for i, v := range vals {
		if s, ok := v.(string); ok && i < len(fields) {
			got[fields[i]] = s
		}
	}
	return got, nil
}
