package bot

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/slack-go/slack"
	"golang.org/x/sync/singleflight"

	"github.com/conclavehq/conclave/internal/ttlcache"
)

// ttlCache is the one TTL cache (internal/ttlcache; when full, expired
// entries are dropped, and if none were, everything is) with its look-ups
// collapsed per key.
type ttlCache[V any] struct {
	ttl     time.Duration
	entries *ttlcache.Cache[V]
	flights singleflight.Group // look-ups under way, shared by whoever asks meanwhile
}

func newTTLCache[V any](ttl time.Duration, max int) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, entries: ttlcache.New[V](max, nil)}
}

// load returns the cached value of key, or fetches it: one fetch for all
// who ask while it runs (events of several threads are recorded at once,
// and often name the same people). A value fetched without error is
// cached; errors are not. A caller whose ctx ends stops waiting; the fetch
// goes on for the others.
func (c *ttlCache[V]) load(ctx context.Context, key string, now func() time.Time, fetch func() (V, error)) (V, error) {
	if v, ok := c.entries.Fresh(key, now()); ok {
		return v, nil
	}
	ch := c.flights.DoChan(key, func() (any, error) {
		// A fetch that ended as this one began has stored its value.
		if v, ok := c.entries.Fresh(key, now()); ok {
			return v, nil
		}
		v, err := fetch()
		if err == nil {
			at := now()
			c.entries.Put(key, ttlcache.Entry[V]{Value: v, Fetched: at, Expires: at.Add(c.ttl)}, at)
		}
		return v, err
	})
	select {
	case r := <-ch:
		return r.Val.(V), r.Err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// directory names the users and channels of the workspace, from
// users.info and conversations.info, with caches: names for an hour,
// channels (name and purpose) for five minutes.
type directory struct {
	*client
	now      func() time.Time
	users    *ttlCache[string]
	channels *ttlCache[channelInfo]
}

func newDirectory(c *client) *directory {
	return &directory{
		client:   c,
		now:      time.Now,
		users:    newTTLCache[string](time.Hour, 10000),
		channels: newTTLCache[channelInfo](5*time.Minute, 2000),
	}
}

// lookup resolves names for normalizeText with the caches behind it.
func (d *directory) lookup(ctx context.Context) nameLookup {
	return func(kind byte, id string) (string, bool) {
		if kind == '@' {
			return d.userName(ctx, id)
		}
		info, err := d.channelInfo(ctx, id)
		if err != nil || info.name == "" {
			return "", false
		}
		return info.name, true
	}
}

// userName is what a person is called in Slack: display name, else real
// name, else user name. Names are cached for an hour; failures are not.
func (d *directory) userName(ctx context.Context, id string) (string, bool) {
	if id == "" {
		return "", false
	}
	name, err := d.users.load(ctx, id, d.now, func() (string, error) {
		var u *slack.User
		err := d.call(ctx, "users.info", true, func(ctx context.Context) (err error) {
			u, err = d.api.GetUserInfoContext(ctx, id)
			return err
		})
		if err != nil {
			d.log.Debug("user name not found", slog.String("user", id), slog.Any(logError, err))
			return "", err
		}
		name := firstNonEmpty(u.Profile.DisplayName, u.RealName, u.Profile.RealName, u.Name)
		if name == "" {
			return "", errNoName
		}
		return name, nil
	})
	return name, err == nil
}

// errNoName: Slack knows the user but gives it no name.
var errNoName = errors.New("bot: the user has no name")

// channelInfo is what conclave reads of a channel.
type channelInfo struct {
	name    string
	purpose string // as Slack stores it (wire format)
}

// channelInfo fetches a channel's name and purpose, cached for at most five
// minutes.
func (d *directory) channelInfo(ctx context.Context, id string) (channelInfo, error) {
	return d.channels.load(ctx, id, d.now, func() (channelInfo, error) {
		var ch *slack.Channel
		err := d.call(ctx, "conversations.info", true, func(ctx context.Context) (err error) {
			ch, err = d.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: id})
			return err
		})
		if err != nil {
			return channelInfo{}, err
		}
		return channelInfo{name: ch.Name, purpose: ch.Purpose.Value}, nil
	})
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
