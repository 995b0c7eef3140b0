package pairing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/memory"
)

// failingLinks is a store whose LinkWallet fails.
type failingLinks struct{ *memory.InProcess }

func (failingLinks) LinkWallet(context.Context, string, string) error {
	return errors.New("store down")
}

// signText signs msg with EIP-191 (personal_sign) as a wallet does, v 27/28.
func signText(t *testing.T, msg string) (common.Address, string) {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := crypto.Sign(accounts.TextHash([]byte(msg)), key)
	if err != nil {
		t.Fatal(err)
	}
	sig[crypto.RecoveryIDOffset] += 27
	return crypto.PubkeyToAddress(key.PublicKey), fmt.Sprintf("0x%x", sig)
}

// TestWalletLinkRules drives a link from issue to verification: what is
// kept, what spends it, and what changes nothing.
func TestWalletLinkRules(t *testing.T) {
	ctx := context.Background()
	const msg = "sign me"
	addr, sig := signText(t, msg)
	_, otherSig := signText(t, msg)
	tests := []struct {
		name    string
		keep    bool   // keep msg for addr before verifying
		sig     string // default: addr's signature of msg
		age     time.Duration
		failing bool
		wantErr error
		linked  bool // addr linked to U1 afterwards
		spent   bool // the link no longer works afterwards
	}{
		{name: "verified", keep: true, linked: true, spent: true},
		{name: "no message kept", wantErr: ErrNoMessage},
		{name: "not a signature", keep: true, sig: "0x1234", wantErr: ErrBadSignature},
		{name: "another key", keep: true, sig: otherSig, wantErr: ErrWrongKey},
		{name: "store fails: the link is given back", keep: true, failing: true, wantErr: errors.New("store down")},
		{name: "expired", keep: true, age: WalletLinkTTL, wantErr: ErrLinkGone, spent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testclock.New(time.Date(2025, 3, 14, 9, 26, 53, 500, time.UTC))
			mem := memory.NewInProcess(memory.Options{Now: clock.Now})
			var store WalletStore = mem
			if tt.failing {
				store = failingLinks{mem}
			}
			w := NewWallets(store, nil, clock.Now)
			token, link, err := w.Issue(ctx, WalletLink{UserID: "U1", Channel: "C1"})
			if err != nil {
				t.Fatal(err)
			}
			if !link.IssuedAt.Equal(clock.Now().Truncate(time.Second)) || link.Expires.Sub(link.IssuedAt) != WalletLinkTTL {
				t.Errorf("link issued %v, expires %v", link.IssuedAt, link.Expires)
			}
			if tt.keep {
				if err := w.KeepMessage(ctx, token, link, addr, msg); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(tt.age)
			sig := sig
			if tt.sig != "" {
				sig = tt.sig
			}
			if got, err := w.Link(ctx, token); err == nil {
				if got.UserID != "U1" || got.Channel != "C1" {
					t.Errorf("link read back as %+v", got)
				}
				err = w.Verify(ctx, token, got, addr, sig)
				if (err == nil) != (tt.wantErr == nil) || err != nil && !errors.Is(err, tt.wantErr) && err.Error() != tt.wantErr.Error() {
					t.Fatalf("Verify: %v, want %v", err, tt.wantErr)
				}
			} else if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Link: %v, want %v", err, tt.wantErr)
			}
			wallets, err := mem.Wallets(ctx, "U1")
			if err != nil {
				t.Fatal(err)
			}
			if linked := len(wallets) == 1 && common.HexToAddress(wallets[0]) == addr; linked != tt.linked || len(wallets) > 1 {
				t.Errorf("wallets of U1 = %v, want linked %v", wallets, tt.linked)
			}
			if _, err := w.Link(ctx, token); errors.Is(err, ErrLinkGone) != tt.spent {
				t.Errorf("link after: %v, want spent %v", err, tt.spent)
			}
		})
	}
}

// TestWalletLinkTokens: a malformed or unknown token is a gone link.
func TestWalletLinkTokens(t *testing.T) {
	w := NewWallets(memory.NewInProcess(memory.Options{}), nil, nil)
	for _, token := range []string{"", "../x", "0123456789abcdef0123456789abcdeg", "0123456789abcdef0123456789abcdef"} {
		if _, err := w.Link(context.Background(), token); !errors.Is(err, ErrLinkGone) {
			t.Errorf("Link(%q) = %v, want ErrLinkGone", token, err)
		}
	}
	if _, _, err := w.Issue(context.Background(), WalletLink{}); err == nil {
		t.Error("a link for no user was issued")
	}
}

// Of two valid verifications racing, one spends the link.
func TestWalletLinkSpentOnce(t *testing.T) {
	ctx := context.Background()
	w := NewWallets(memory.NewInProcess(memory.Options{}), nil, nil)
	addr, sig := signText(t, "m")
	token, link, err := w.Issue(ctx, WalletLink{UserID: "U1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.KeepMessage(ctx, token, link, addr, "m"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = w.Verify(ctx, token, link, addr, sig) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrLinkGone) && !errors.Is(err, ErrNoMessage):
			t.Errorf("a losing verification failed with %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d verifications succeeded, want 1", ok)
	}
}
