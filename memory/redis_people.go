package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisConn is what every part of a Redis store uses: the client, the key
// schema and the options.
type redisConn struct {
	c    redis.UniversalClient
	keys keySchema
	opts Options
}

func (r *redisConn) convTTL() string { return ms(r.opts.ConversationTTL) }

// redisPeople is the part of a Redis store outside any conversation: the
// channels' agents, the pairings of people with human agents, the wallets
// people linked and the wallet-link nonces.
type redisPeople struct{ *redisConn }

// ChannelAgents implements Store.
func (p *redisPeople) ChannelAgents(ctx context.Context, channel string) ([]string, error) {
	agents, err := p.c.LRange(ctx, p.keys.channel(channel), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("memory: agents of channel %s: %w", channel, err)
	}
	return agents, nil
}

// AddChannelAgent implements Store.
func (p *redisPeople) AddChannelAgent(ctx context.Context, channel, ens string) (bool, error) {
	n, err := addAgentScript.Run(ctx, p.c, []string{p.keys.channel(channel)}, ens).Int()
	if err != nil {
		return false, fmt.Errorf("memory: add %s to channel %s: %w", ens, channel, err)
	}
	return n == 1, nil
}

// RemoveChannelAgent implements Store.
func (p *redisPeople) RemoveChannelAgent(ctx context.Context, channel, ens string) (bool, error) {
	n, err := p.c.LRem(ctx, p.keys.channel(channel), 0, ens).Result()
	if err != nil {
		return false, fmt.Errorf("memory: remove %s from channel %s: %w", ens, channel, err)
	}
	return n > 0, nil
}

// PairHuman implements Store.
func (p *redisPeople) PairHuman(ctx context.Context, userID, ens string) (string, string, error) {
	if userID == "" || ens == "" {
		return "", "", errors.New("memory: pair human: user and agent are required")
	}
	res, err := pairScript.Run(ctx, p.c, []string{p.keys.pairByUser(), p.keys.pairByAgent()}, userID, ens).StringSlice()
	if err != nil {
		return "", "", fmt.Errorf("memory: pair %s with %s: %w", userID, ens, err)
	}
	if len(res) != 2 {
		return "", "", fmt.Errorf("memory: pair %s with %s: unexpected reply %q", userID, ens, res)
	}
	return res[0], res[1], nil
}

func (p *redisPeople) hget(ctx context.Context, key, field, what string) (string, error) {
	v, err := p.c.HGet(ctx, key, field).Result()
	if errors.Is(err, redis.Nil) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("memory: %s %s: %w", what, field, err)
	}
	return v, nil
}

// HumanAgent implements Store.
func (p *redisPeople) HumanAgent(ctx context.Context, userID string) (string, error) {
	return p.hget(ctx, p.keys.pairByUser(), userID, "human agent of")
}

// HumanUser implements Store.
func (p *redisPeople) HumanUser(ctx context.Context, ens string) (string, error) {
	return p.hget(ctx, p.keys.pairByAgent(), ens, "user of human agent")
}

// LinkWallet implements Store.
func (p *redisPeople) LinkWallet(ctx context.Context, userID, address string) error {
	if userID == "" || address == "" {
		return errors.New("memory: link wallet: user and address are required")
	}
	if err := p.c.SAdd(ctx, p.keys.wallets(userID), address).Err(); err != nil {
		return fmt.Errorf("memory: link wallet of %s: %w", userID, err)
	}
	return nil
}

// Wallets implements Store.
func (p *redisPeople) Wallets(ctx context.Context, userID string) ([]string, error) {
	addrs, err := p.c.SMembers(ctx, p.keys.wallets(userID)).Result()
	if err != nil {
		return nil, fmt.Errorf("memory: wallets of %s: %w", userID, err)
	}
	slices.Sort(addrs)
	return addrs, nil
}

// PutNonce implements Store.
func (p *redisPeople) PutNonce(ctx context.Context, nonce string, value []byte, ttl time.Duration) error {
	err := checkTTL(ttl)
	if err == nil {
		err = p.c.Set(ctx, p.keys.nonce(nonce), value, ttl).Err()
	}
	if err != nil {
		return fmt.Errorf("memory: put nonce: %w", err)
	}
	return nil
}

func (p *redisPeople) nonce(cmd *redis.StringCmd) ([]byte, error) {
	v, err := cmd.Bytes()
	if errors.Is(err, redis.Nil) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("memory: nonce: %w", err)
	}
	return v, nil
}

// PeekNonce implements Store.
func (p *redisPeople) PeekNonce(ctx context.Context, nonce string) ([]byte, error) {
	return p.nonce(p.c.Get(ctx, p.keys.nonce(nonce)))
}

// SpendNonce implements Store.
func (p *redisPeople) SpendNonce(ctx context.Context, nonce string) ([]byte, error) {
	return p.nonce(p.c.GetDel(ctx, p.keys.nonce(nonce)))
}
