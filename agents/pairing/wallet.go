package pairing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"regexp"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/conclavehq/conclave/memory"
)

// The rules of linking a wallet to a Slack user (SPEC §5, §12):
//
//   - a link is for one user and works once, for WalletLinkTTL; reading it
//     changes nothing (link previews fetch pages): only a successful
//     verification spends it;
//   - the text a wallet signs is written by conclave and kept beside the
//     link, for as long as the link; a signature is checked against that
//     copy, never against text the browser sends. A link keeps one text,
//     for the address it was last asked for (a new address replaces it), so
//     whoever holds a link cannot make the store keep more than one;
//   - the signature must be the address's own: EIP-191 (personal_sign),
//     with a low s (a malleated signature is refused);
//   - of two valid verifications racing, one spends the link; a link whose
//     wallet could not be saved is given back.
//
// The transport (bot/) serves the page and renders the outcomes; the
// decisions, and the storage keys they use, are here.

// WalletLinkTTL is how long a /verify-wallet link works.
const WalletLinkTTL = 10 * time.Minute

// Wallet-link errors callers branch on.
var (
	// ErrLinkGone: the token is malformed, unknown, spent or expired.
	ErrLinkGone = errors.New("link expired or used")
	// ErrNoMessage: no text was kept for that address to sign.
	ErrNoMessage = errors.New("no message was prepared for this address: reload the page and try again")
	// ErrBadSignature: not a valid Ethereum signature.
	ErrBadSignature = errors.New("the signature is not a valid Ethereum signature")
	// ErrWrongKey: a valid signature, by another address.
	ErrWrongKey = errors.New("the signature was not made by that address")
)

// WalletStore is what wallet links need of the store: the links
// themselves and one-time values (memory's stores satisfy it).
type WalletStore interface {
	// LinkWallet links a verified address to a Slack user (idempotent).
	LinkWallet(ctx context.Context, userID, address string) error
	PutNonce(ctx context.Context, nonce string, value []byte, ttl time.Duration) error
	PeekNonce(ctx context.Context, nonce string) ([]byte, error)
	SpendNonce(ctx context.Context, nonce string) ([]byte, error)
}

// WalletLink is a pending verification: who asked, where, and until when.
type WalletLink struct {
	UserID   string    `json:"user"`
	UserName string    `json:"user_name,omitempty"`
	TeamID   string    `json:"team"`
	TeamName string    `json:"team_name,omitempty"`
	Channel  string    `json:"channel"` // where the confirmation is shown
	IssuedAt time.Time `json:"issued_at"`
	Expires  time.Time `json:"expires"`
}

// Wallets applies the wallet-link rules.
type Wallets struct {
	store WalletStore
	log   *slog.Logger
	now   func() time.Time
}

// NewWallets returns the wallet-link rules over a store; now defaults to
// time.Now, log to none.
func NewWallets(store WalletStore, log *slog.Logger, now func() time.Time) *Wallets {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Wallets{store: store, log: log, now: now}
}

// Keys of the one-time values a verification uses.
func linkKey(token string) string    { return "wallet:" + token }
func messageKey(token string) string { return "wallet-message:" + token }

// keptMessage is the text kept for a link to be signed, and by whom.
type keptMessage struct {
	Address string `json:"address"` // EIP-55
	Text    string `json:"text"`
}

// linkToken is a link token: 128 random bits in hex, also the EIP-4361
// nonce (which must be alphanumeric).
var linkToken = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Issue records a pending link for link's user, issued now (to the second)
// and working for WalletLinkTTL, and returns its token and the link as
// kept.
func (w *Wallets) Issue(ctx context.Context, link WalletLink) (string, WalletLink, error) {
	if link.UserID == "" {
		return "", link, errors.New("agents: wallet link: no user")
	}
	link.IssuedAt = w.now().UTC().Truncate(time.Second)
	link.Expires = link.IssuedAt.Add(WalletLinkTTL)
	value, err := json.Marshal(link)
	if err != nil {
		return "", link, fmt.Errorf("agents: wallet link: %w", err)
	}
	token := newSecretID()
	if err := w.store.PutNonce(ctx, linkKey(token), value, WalletLinkTTL); err != nil {
		return "", link, fmt.Errorf("agents: wallet link: %w", err)
	}
	return token, link, nil
}

// Link reads a pending link without spending it; ErrLinkGone when the
// token is malformed, unknown, spent or expired.
func (w *Wallets) Link(ctx context.Context, token string) (WalletLink, error) {
	if !linkToken.MatchString(token) {
		return WalletLink{}, ErrLinkGone
	}
	raw, err := w.store.PeekNonce(ctx, linkKey(token))
	if errors.Is(err, memory.ErrNotFound) {
		return WalletLink{}, ErrLinkGone
	}
	if err != nil {
		return WalletLink{}, err
	}
	var link WalletLink
	if err := json.Unmarshal(raw, &link); err != nil {
		return WalletLink{}, fmt.Errorf("agents: wallet link %s…: %w", token[:6], err)
	}
	if !w.now().Before(link.Expires) {
		return WalletLink{}, ErrLinkGone
	}
	return link, nil
}

// KeepMessage keeps the text addr is asked to sign, for as long as the
// link, in place of any text kept for the link before (another address's
// included: a link keeps one). Keeping it again is harmless (the same
// text), and a copy that outlives a spent link verifies nothing.
func (w *Wallets) KeepMessage(ctx context.Context, token string, link WalletLink, addr common.Address, msg string) error {
	ttl := link.Expires.Sub(w.now())
	value, err := json.Marshal(keptMessage{Address: addr.Hex(), Text: msg})
	if err != nil {
		return fmt.Errorf("agents: wallet message: %w", err)
	}
	return w.store.PutNonce(ctx, messageKey(token), value, max(ttl, time.Millisecond))
}

// keptFor reads the text kept for the link to be signed by addr;
// ErrNoMessage when none is, or it is another address's.
func (w *Wallets) keptFor(ctx context.Context, token string, addr common.Address) ([]byte, error) {
	raw, err := w.store.PeekNonce(ctx, messageKey(token))
	if errors.Is(err, memory.ErrNotFound) {
		return nil, ErrNoMessage
	}
	if err != nil {
		return nil, err
	}
	var kept keptMessage
	if err := json.Unmarshal(raw, &kept); err != nil || kept.Address != addr.Hex() {
		return nil, ErrNoMessage
	}
	return []byte(kept.Text), nil
}

// Verify checks that sig is addr's signature of the text kept for it and,
// when it is, spends the link and links addr to the link's user. Nothing
// changes on any error; errors wrap ErrNoMessage, ErrBadSignature,
// ErrWrongKey or ErrLinkGone, or are the store's.
func (w *Wallets) Verify(ctx context.Context, token string, link WalletLink, addr common.Address, sig string) error {
	msg, err := w.keptFor(ctx, token, addr)
	if err != nil {
		return err
	}
	signer, err := recoverSigner(msg, sig)
	if err != nil {
		return err
	}
	if signer != addr {
		w.log.Warn("wallet signature from another address refused", slog.String("user", link.UserID),
			slog.String("claimed", addr.Hex()), slog.String("signer", signer.Hex()))
		return ErrWrongKey
	}
	// Spending is the one step that decides: of two valid requests racing,
	// only one gets the link.
	if _, err := w.store.SpendNonce(ctx, linkKey(token)); err != nil {
		if errors.Is(err, memory.ErrNotFound) {
			return ErrLinkGone
		}
		return err
	}
	if err := w.store.LinkWallet(ctx, link.UserID, addr.Hex()); err != nil {
		w.giveBack(ctx, token, link)
		return err
	}
	if _, err := w.store.SpendNonce(ctx, messageKey(token)); err != nil && !errors.Is(err, memory.ErrNotFound) {
		w.log.Debug("wallet message copy not removed; it expires with the link", slog.Any("err", err))
	}
	return nil
}

// giveBack restores a spent link whose wallet could not be saved, so that
// the person can try again.
func (w *Wallets) giveBack(ctx context.Context, token string, link WalletLink) {
	raw, _ := json.Marshal(link) // plain data: cannot fail
	if ttl := link.Expires.Sub(w.now()); ttl > time.Millisecond {
		if err := w.store.PutNonce(ctx, linkKey(token), raw, ttl); err != nil {
			w.log.Warn("could not restore a wallet link after a failed save", slog.Any("err", err))
		}
	}
}

// recoverSigner returns the address whose key made an EIP-191
// (personal_sign) signature of msg. v may be 27/28 (what wallets send) or
// 0/1; a high s value (a malleated signature) is refused.
func recoverSigner(msg []byte, sigHex string) (common.Address, error) {
	sig, err := hexutil.Decode(strings.TrimSpace(sigHex))
	if err != nil || len(sig) != crypto.SignatureLength {
		return common.Address{}, ErrBadSignature
	}
	v := sig[crypto.RecoveryIDOffset]
	if v >= 27 {
		v -= 27
	}
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64])
	if !crypto.ValidateSignatureValues(v, r, s, true) {
		return common.Address{}, ErrBadSignature
	}
	sig[crypto.RecoveryIDOffset] = v
	pub, err := crypto.SigToPub(accounts.TextHash(msg), sig)
	if err != nil {
		return common.Address{}, ErrBadSignature
	}
	return crypto.PubkeyToAddress(*pub), nil
}
