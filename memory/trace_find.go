package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A turn's reference, as a ⚠️ notice shows it ("a9355e42-t3"), names its
// conversation by the first characters of its id only; these find the
// conversations those characters can stand for.

// TraceConversations lists, sorted, the conversations with traces kept
// whose id starts with idPrefix.
func (p *inTraces) TraceConversations(_ context.Context, idPrefix string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock()
	var out []string
	for id, tr := range p.traces {
		if strings.HasPrefix(id, idPrefix) && now.Before(tr.expires) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// TraceConversations lists, sorted, the conversations with traces kept
// whose id starts with idPrefix. It scans the trace keys (on every
// primary of a Cluster): an operator's look-up, not a turn's.
func (p *redisTraces) TraceConversations(ctx context.Context, idPrefix string) ([]string, error) {
	head := globEscaper.Replace(p.keys.prefix) + "{c??}:trace:"
	pattern := head + globEscaper.Replace(esc(idPrefix)) + "*"
	found := map[string]bool{}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			i := strings.Index(key, "}:trace:")
			if i < 0 {
				continue
			}
			found[unesc(key[i+len("}:trace:"):])] = true
		}
		return iter.Err()
	}
	var err error
	if cluster, ok := p.c.(*redis.ClusterClient); ok {
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, p.c)
	}
	if err != nil {
		return nil, fmt.Errorf("memory: find the conversation of %q: %w", idPrefix, err)
	}
	out := make([]string, 0, len(found))
	for id := range found {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// globEscaper escapes what SCAN MATCH's glob treats as special.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

// unesc undoes esc.
func unesc(s string) string { return keyUnescaper.Replace(s) }

var keyUnescaper = strings.NewReplacer("%3A", ":", "%7B", "{", "%7D", "}", "%25", "%")
