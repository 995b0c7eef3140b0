package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// inPeople is the part of the in-process store outside any conversation:
// the channels' agents, the pairings of people with human agents, the
// wallets people linked and the wallet-link nonces. InProcess embeds it;
// it is guarded by the store's mutex, which recording holds while it reads
// the channel's agents and the author's pairing.
type inPeople struct {
	mu        *sync.Mutex         // the store's
	clock     func() time.Time    // the store's clock; called with mu held
	channels  map[string][]string // channel → agents (ENS names)
	userAgent map[string]string   // user → paired human agent
	agentUser map[string]string   // human agent → paired user
	wallets   map[string]map[string]bool
	nonces    map[string]inNonce
}

// ChannelAgents implements Store.
func (p *inPeople) ChannelAgents(_ context.Context, channel string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.channels[channel]), nil
}

// AddChannelAgent implements Store.
func (p *inPeople) AddChannelAgent(_ context.Context, channel, ens string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Contains(p.channels[channel], ens) {
		return false, nil
	}
	p.channels[channel] = append(p.channels[channel], ens)
	return true, nil
}

// RemoveChannelAgent implements Store.
func (p *inPeople) RemoveChannelAgent(_ context.Context, channel, ens string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	agents := p.channels[channel]
	i := slices.Index(agents, ens)
	if i < 0 {
		return false, nil
	}
	agents = slices.Delete(slices.Clone(agents), i, i+1)
	if len(agents) == 0 {
		delete(p.channels, channel)
	} else {
		p.channels[channel] = agents
	}
	return true, nil
}

// PairHuman implements Store.
func (p *inPeople) PairHuman(_ context.Context, userID, ens string) (string, string, error) {
	if userID == "" || ens == "" {
		return "", "", errors.New("memory: pair human: user and agent are required")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prevAgent, prevUser := p.userAgent[userID], p.agentUser[ens]
	delete(p.agentUser, prevAgent)
	delete(p.userAgent, prevUser)
	p.userAgent[userID] = ens
	p.agentUser[ens] = userID
	return prevAgent, prevUser, nil
}

// paired reads one side of the pairings (userAgent or agentUser).
func (p *inPeople) paired(side map[string]string, key, what string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := side[key]
	if !ok {
		return "", fmt.Errorf("memory: %s %s: %w", what, key, ErrNotFound)
	}
	return v, nil
}

// HumanAgent implements Store.
func (p *inPeople) HumanAgent(_ context.Context, userID string) (string, error) {
	return p.paired(p.userAgent, userID, "human agent of")
}

// HumanUser implements Store.
func (p *inPeople) HumanUser(_ context.Context, ens string) (string, error) {
	return p.paired(p.agentUser, ens, "user of human agent")
}

// LinkWallet implements Store.
func (p *inPeople) LinkWallet(_ context.Context, userID, address string) error {
	if userID == "" || address == "" {
		return errors.New("memory: link wallet: user and address are required")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wallets[userID] == nil {
		p.wallets[userID] = map[string]bool{}
	}
	p.wallets[userID][address] = true
	return nil
}

// Wallets implements Store.
func (p *inPeople) Wallets(_ context.Context, userID string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.wallets[userID])), nil
}

// PutNonce implements Store.
func (p *inPeople) PutNonce(_ context.Context, nonce string, value []byte, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return fmt.Errorf("memory: put nonce: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nonces[nonce] = inNonce{value: slices.Clone(value), expires: p.clock().Add(ttl)}
	return nil
}

func (p *inPeople) nonce(nonce string, spend bool) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.nonces[nonce]
	if !ok || !p.clock().Before(n.expires) {
		delete(p.nonces, nonce)
		return nil, fmt.Errorf("memory: nonce: %w", ErrNotFound)
	}
	if spend {
		delete(p.nonces, nonce)
	}
	return slices.Clone(n.value), nil
}

// PeekNonce implements Store.
func (p *inPeople) PeekNonce(_ context.Context, nonce string) ([]byte, error) {
	return p.nonce(nonce, false)
}

// SpendNonce implements Store.
func (p *inPeople) SpendNonce(_ context.Context, nonce string) ([]byte, error) {
	return p.nonce(nonce, true)
}

// inNonce is a stored wallet-link nonce.
type inNonce struct {
	value   []byte
	expires time.Time
}
