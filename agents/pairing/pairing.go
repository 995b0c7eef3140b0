// Package pairing holds the rules around the engine that do not depend on
// it: pairing Slack users with human agents, linking wallets to Slack
// users, and who may add and remove a channel's agents.
package pairing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// The rules of pairing a Slack user with a human agent (SPEC §11, §12.2):
//
//   - only the agent's current owner may pair it: a caller one of whose
//     verified wallets is the owner read fresh from the chain;
//   - only people are paired, never bots;
//   - only human agents are paired;
//   - pairing oneself takes effect at once;
//   - pairing anyone else is an offer, kept 24 hours, that takes effect only
//     when that user accepts it; the owner must still own the agent then;
//   - a pairing is one to one: the user's earlier agent and the agent's
//     earlier user are let go when it takes effect (never before).
//
// The transport (bot/) parses commands and button presses and renders the
// outcomes; the decisions are here.

// OfferTTL is how long an offer to pair can be accepted.
const OfferTTL = 24 * time.Hour

// Pairing errors callers branch on.
var (
	// ErrNotPerson: only people are paired with human agents, not bots.
	ErrNotPerson = errors.New("not a person")
	// ErrNotHuman: only human agents are paired with Slack users.
	ErrNotHuman = errors.New("not a human agent")
	// ErrNotOwner: none of the caller's verified wallets owns the agent.
	ErrNotOwner = errors.New("not the agent's owner")
	// ErrNoWallet: the caller has no verified wallet at all.
	ErrNoWallet = errors.New("no verified wallet")
	// ErrOfferGone: the offer expired, was answered already, or never was.
	ErrOfferGone = errors.New("the offer has expired or was already answered")
	// ErrNotOffered: someone other than the offered user answered.
	ErrNotOffered = errors.New("the offer is for someone else")
	// ErrOwnerUnknown: the owner could not be read (the chain, the
	// gateway); it wraps the resolver's error.
	ErrOwnerUnknown = errors.New("the owner could not be read")
)

// Offer is an owner's offer to pair a Slack user with a human agent.
type Offer struct {
	ID        string    `json:"id"`
	User      string    `json:"user"`       // who is offered the agent
	Agent     string    `json:"agent"`      // the human agent's canonical ENS name
	OfferedBy string    `json:"offered_by"` // the owner who made the offer
	Team      string    `json:"team"`
	Channel   string    `json:"channel"` // where the offer was made (announcements)
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
}

// Replaced names the pairings a change lets go: the user's earlier agent
// and the agent's earlier user (empty when none, or when it is the same).
type Replaced struct {
	Agent string // the agent the user was paired with
	User  string // the user the agent was paired with
}

// Kind says what a pairing request did.
type Kind int

// Outcomes of a pairing request.
const (
	PairedNow     Kind = iota // the caller paired themself
	Offered                   // an offer awaits the user's answer
	AlreadyPaired             // those two are paired already; nothing changed
)

// Outcome is what a pairing request did.
type Outcome struct {
	Kind Kind
	// Offer is the offer made (Offered).
	Offer Offer
	// Replaced is what the pairing let go (PairedNow) or will let go if
	// the offer is accepted (Offered).
	Replaced Replaced
}

// Request is a caller asking to pair User with Agent.
type Request struct {
	Caller  string // the Slack user asking
	User    string // the Slack user to pair
	UserBot bool   // User is a bot (as the transport's directory says)
	Team    string
	Channel string
	Agent   ens.Agent
}

// Store is what pairing needs of the store (memory's stores
// satisfy it).
type Store interface {
	PairHuman(ctx context.Context, userID, ens string) (prevAgent, prevUser string, err error)
	HumanAgent(ctx context.Context, userID string) (string, error)
	HumanUser(ctx context.Context, ens string) (string, error)
	Wallets(ctx context.Context, userID string) ([]string, error)
	PutNonce(ctx context.Context, nonce string, value []byte, ttl time.Duration) error
	PeekNonce(ctx context.Context, nonce string) ([]byte, error)
	SpendNonce(ctx context.Context, nonce string) ([]byte, error)
}

// Identities reads agents and their owners, fresh (the ens
// Directory).
type Identities interface {
	Resolve(ctx context.Context, name string) (ens.Agent, error)
	Owner(ctx context.Context, a ens.Agent) (string, error)
}

// Pairing applies the pairing rules.
type Pairing struct {
	store Store
	ids   Identities
	now   func() time.Time
}

// New returns the pairing rules over a store and the identities;
// now defaults to time.Now.
func New(store Store, ids Identities, now func() time.Time) *Pairing {
	if now == nil {
		now = time.Now
	}
	return &Pairing{store: store, ids: ids, now: now}
}

// offerKey is the nonce an offer is kept under.
func offerKey(id string) string { return "pairing-offer:" + id }

// Request applies a pairing request: the caller pairs themself at once, or
// offers the agent to another user. Errors wrap ErrNotPerson, ErrNotHuman,
// ErrNoWallet, ErrNotOwner or ErrOwnerUnknown, or are the store's.
func (p *Pairing) Request(ctx context.Context, r Request) (Outcome, error) {
	if r.UserBot {
		return Outcome{}, ErrNotPerson
	}
	if r.Agent.Role != ens.RoleHuman {
		return Outcome{}, ErrNotHuman
	}
	if err := p.checkOwner(ctx, r.Caller, r.Agent); err != nil {
		return Outcome{}, err
	}
	if r.User == r.Caller {
		prevAgent, prevUser, err := p.store.PairHuman(ctx, r.User, r.Agent.EnsDomain)
		if err != nil {
			return Outcome{}, fmt.Errorf("agents: pair %s with %s: %w", r.User, r.Agent.EnsDomain, err)
		}
		if prevAgent == r.Agent.EnsDomain && prevUser == r.User {
			return Outcome{Kind: AlreadyPaired}, nil
		}
		return Outcome{Kind: PairedNow, Replaced: replaced(r.User, r.Agent.EnsDomain, prevAgent, prevUser)}, nil
	}
	curAgent, err := p.store.HumanAgent(ctx, r.User)
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return Outcome{}, fmt.Errorf("agents: pairing of %s: %w", r.User, err)
	}
	curUser, err := p.store.HumanUser(ctx, r.Agent.EnsDomain)
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return Outcome{}, fmt.Errorf("agents: pairing of %s: %w", r.Agent.EnsDomain, err)
	}
	if curAgent == r.Agent.EnsDomain && curUser == r.User {
		return Outcome{Kind: AlreadyPaired}, nil
	}
	now := p.now()
	offer := Offer{
		ID: newSecretID(), User: r.User, Agent: r.Agent.EnsDomain, OfferedBy: r.Caller,
		Team: r.Team, Channel: r.Channel, Created: now, Expires: now.Add(OfferTTL),
	}
	raw, _ := json.Marshal(offer) // plain data: cannot fail
	if err := p.store.PutNonce(ctx, offerKey(offer.ID), raw, OfferTTL); err != nil {
		return Outcome{}, fmt.Errorf("agents: save the pairing offer: %w", err)
	}
	return Outcome{Kind: Offered, Offer: offer, Replaced: replaced(r.User, r.Agent.EnsDomain, curAgent, curUser)}, nil
}

// replaced keeps of the earlier pairings those the new one lets go.
func replaced(user, agent, prevAgent, prevUser string) Replaced {
	var r Replaced
	if prevAgent != "" && prevAgent != agent {
		r.Agent = prevAgent
	}
	if prevUser != "" && prevUser != user {
		r.User = prevUser
	}
	return r
}

// checkOwner reads the agent's owner fresh and the caller's wallets.
func (p *Pairing) checkOwner(ctx context.Context, caller string, a ens.Agent) error {
	owner, err := p.ids.Owner(ctx, a)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOwnerUnknown, err)
	}
	wallets, err := p.store.Wallets(ctx, caller)
	if err != nil {
		return fmt.Errorf("agents: wallets of %s: %w", caller, err)
	}
	if len(wallets) == 0 {
		return ErrNoWallet
	}
	if !ownsAgent(wallets, owner) {
		return ErrNotOwner
	}
	return nil
}

// ownsAgent reports whether one of the wallets is the owner.
func ownsAgent(wallets []string, owner string) bool {
	if !common.IsHexAddress(owner) {
		return false
	}
	o := common.HexToAddress(owner)
	if o == (common.Address{}) {
		return false
	}
	for _, w := range wallets {
		if common.IsHexAddress(w) && common.HexToAddress(w) == o {
			return true
		}
	}
	return false
}

// offer reads an offer for its user without spending it.
func (p *Pairing) offer(ctx context.Context, id, user string) (Offer, error) {
	raw, err := p.store.PeekNonce(ctx, offerKey(id))
	if errors.Is(err, memory.ErrNotFound) {
		return Offer{}, ErrOfferGone
	}
	if err != nil {
		return Offer{}, fmt.Errorf("agents: read the pairing offer: %w", err)
	}
	var o Offer
	if err := json.Unmarshal(raw, &o); err != nil {
		return Offer{}, fmt.Errorf("agents: pairing offer %s: %w", id, err)
	}
	if o.User != user {
		return o, ErrNotOffered
	}
	if !p.now().Before(o.Expires) {
		_, _ = p.store.SpendNonce(ctx, offerKey(id))
		return o, ErrOfferGone
	}
	return o, nil
}

// spend takes the offer so that it is answered once.
func (p *Pairing) spend(ctx context.Context, id string) error {
	_, err := p.store.SpendNonce(ctx, offerKey(id))
	if errors.Is(err, memory.ErrNotFound) {
		return ErrOfferGone
	}
	return err
}

// Accept pairs the offered user with the agent, when user is the one it
// was offered to, the offer stands, and its maker still owns the agent.
// It returns the offer and what the pairing let go. Errors wrap
// ErrOfferGone, ErrNotOffered, ErrNotOwner, ErrNoWallet or
// ErrOwnerUnknown; an offer whose maker no longer owns the agent is spent.
func (p *Pairing) Accept(ctx context.Context, id, user string) (Offer, Replaced, error) {
	o, err := p.offer(ctx, id, user)
	if err != nil {
		return o, Replaced{}, err
	}
	a, err := p.ids.Resolve(ctx, o.Agent)
	if err != nil {
		return o, Replaced{}, fmt.Errorf("%w: %w", ErrOwnerUnknown, err)
	}
	if err := p.checkOwner(ctx, o.OfferedBy, a); err != nil {
		if errors.Is(err, ErrNotOwner) || errors.Is(err, ErrNoWallet) {
			_ = p.spend(ctx, id)
		}
		return o, Replaced{}, err
	}
	if err := p.spend(ctx, id); err != nil {
		return o, Replaced{}, err
	}
	prevAgent, prevUser, err := p.store.PairHuman(ctx, o.User, o.Agent)
	if err != nil {
		return o, Replaced{}, fmt.Errorf("agents: pair %s with %s: %w", o.User, o.Agent, err)
	}
	return o, replaced(o.User, o.Agent, prevAgent, prevUser), nil
}

// Decline drops an offer for the user it was made to. Errors wrap
// ErrOfferGone or ErrNotOffered.
func (p *Pairing) Decline(ctx context.Context, id, user string) (Offer, error) {
	o, err := p.offer(ctx, id, user)
	if err != nil {
		return o, err
	}
	return o, p.spend(ctx, id)
}

// Withdraw drops an offer that could not be delivered.
func (p *Pairing) Withdraw(ctx context.Context, id string) error {
	if err := p.spend(ctx, id); err != nil && !errors.Is(err, ErrOfferGone) {
		return err
	}
	return nil
}

// newSecretID is 128 random bits in hex, not guessable: an offer's id
// (carried by its buttons) and a wallet link's token (also the EIP-4361
// nonce, which must be alphanumeric).
func newSecretID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
