package bot

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// ttlCache is a small map whose entries expire; when full, expired entries
// are dropped, and if none were, everything is.
type ttlCache[V any] struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	m   map[string]cacheEntry[V]
}

type cacheEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](ttl time.Duration, max int) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, max: max, m: map[string]cacheEntry[V]{}}
}

func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(key string, v V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[key] = cacheEntry[V]{v: v, expires: now.Add(c.ttl)}
}

// lookup resolves names for normalizeText with the caches behind it.
func (b *Bot) lookup(ctx context.Context) nameLookup {
	return func(kind byte, id string) (string, bool) {
		if kind == '@' {
			return b.userName(ctx, id)
		}
		info, err := b.channelInfo(ctx, id)
		if err != nil || info.name == "" {
			return "", false
		}
		return info.name, true
	}
}

// userName is what a person is called in Slack: display name, else real
// name, else user name. Names are cached for an hour; failures are not.
func (b *Bot) userName(ctx context.Context, id string) (string, bool) {
	if id == "" {
		return "", false
	}
	if name, ok := b.users.get(id, b.now()); ok {
		return name, true
	}
	var u *slack.User
	err := b.call(ctx, "users.info", true, func(ctx context.Context) (err error) {
		u, err = b.api.GetUserInfoContext(ctx, id)
		return err
	})
	if err != nil {
		b.log.Debug("user name not found", slog.String("user", id), slog.Any(logError, err))
		return "", false
	}
	name := firstNonEmpty(u.Profile.DisplayName, u.RealName, u.Profile.RealName, u.Name)
	if name == "" {
		return "", false
	}
	b.users.put(id, name, b.now())
	return name, true
}

// channelInfo is what conclave reads of a channel.
type channelInfo struct {
	name    string
	purpose string // as Slack stores it (wire format)
}

// channelInfo fetches a channel's name and purpose, cached for at most five
// minutes.
func (b *Bot) channelInfo(ctx context.Context, id string) (channelInfo, error) {
	if info, ok := b.channels.get(id, b.now()); ok {
		return info, nil
	}
	var ch *slack.Channel
	err := b.call(ctx, "conversations.info", true, func(ctx context.Context) (err error) {
		ch, err = b.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: id})
		return err
	})
	if err != nil {
		return channelInfo{}, err
	}
	info := channelInfo{name: ch.Name, purpose: ch.Purpose.Value}
	b.channels.put(id, info, b.now())
	return info, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
