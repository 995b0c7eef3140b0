package pairing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/memory"
)

const (
	pairOwner = "0x3325a78425F17a7E487Eb5666b2bFd93aBb06c70"
	pairHugo  = "hugo.acme.137.protocol6022.eth"
	pairIris  = "iris.acme.137.protocol6022.eth"
)

// pairIDs knows two humans owned by pairOwner and an expert.
type pairIDs struct{ owner string }

func (p *pairIDs) Resolve(_ context.Context, name string) (ens.Agent, error) {
	if name == pairHugo || name == pairIris {
		return ens.Agent{Name: name, EnsDomain: name, Role: ens.RoleHuman}, nil
	}
	return ens.Agent{}, ens.ErrNotFound
}

func (p *pairIDs) Owner(context.Context, ens.Agent) (string, error) { return p.owner, nil }

// TestPairingRules drives the rules with the in-process store: who may
// pair, what is immediate, what is an offer, and what each lets go.
func TestPairingRules(t *testing.T) {
	hugo := ens.Agent{Name: "Hugo", EnsDomain: pairHugo, Role: ens.RoleHuman}
	tests := []struct {
		name      string
		wallets   []string
		before    [][2]string
		req       Request
		wantErr   error
		wantKind  Kind
		wantRepl  Replaced
		wantPairs map[string]string // user → agent right after the request
	}{
		{name: "a bot", wallets: []string{pairOwner},
			req:     Request{Caller: "U1", User: "B1", UserBot: true, Agent: hugo},
			wantErr: ErrNotPerson},
		{name: "not a human", wallets: []string{pairOwner},
			req:     Request{Caller: "U1", User: "U1", Agent: ens.Agent{EnsDomain: "x.eth", Role: ens.RoleExpert}},
			wantErr: ErrNotHuman},
		{name: "no wallet", req: Request{Caller: "U1", User: "U1", Agent: hugo}, wantErr: ErrNoWallet},
		{name: "another wallet", wallets: []string{"0x00000000000000000000000000000000000000aa"},
			req: Request{Caller: "U1", User: "U1", Agent: hugo}, wantErr: ErrNotOwner},
		{name: "oneself, at once", wallets: []string{pairOwner}, before: [][2]string{{"U2", pairHugo}},
			req: Request{Caller: "U1", User: "U1", Agent: hugo}, wantKind: PairedNow, wantRepl: Replaced{User: "U2"},
			wantPairs: map[string]string{"U1": pairHugo, "U2": ""}},
		{name: "oneself again", wallets: []string{pairOwner}, before: [][2]string{{"U1", pairHugo}},
			req: Request{Caller: "U1", User: "U1", Agent: hugo}, wantKind: AlreadyPaired,
			wantPairs: map[string]string{"U1": pairHugo}},
		{name: "someone else: an offer, nothing replaced yet", wallets: []string{pairOwner},
			before: [][2]string{{"U2", pairHugo}, {"U3", pairIris}},
			req:    Request{Caller: "U1", User: "U3", Agent: hugo}, wantKind: Offered,
			wantRepl: Replaced{Agent: pairIris, User: "U2"}, wantPairs: map[string]string{"U2": pairHugo, "U3": pairIris}},
		{name: "someone already paired with it", wallets: []string{pairOwner}, before: [][2]string{{"U3", pairHugo}},
			req: Request{Caller: "U1", User: "U3", Agent: hugo}, wantKind: AlreadyPaired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store := memory.NewInProcess(memory.Options{})
			for _, w := range tt.wallets {
				if err := store.LinkWallet(ctx, "U1", w); err != nil {
					t.Fatal(err)
				}
			}
			for _, b := range tt.before {
				if _, _, err := store.PairHuman(ctx, b[0], b[1]); err != nil {
					t.Fatal(err)
				}
			}
			out, err := New(store, &pairIDs{owner: pairOwner}, nil).Request(ctx, tt.req)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if out.Kind != tt.wantKind || out.Replaced != tt.wantRepl {
				t.Errorf("outcome %+v, want kind %d, replaced %+v", out, tt.wantKind, tt.wantRepl)
			}
			if out.Kind == Offered && (len(out.Offer.ID) != 32 || out.Offer.Expires.Sub(out.Offer.Created) != OfferTTL) {
				t.Errorf("offer %+v", out.Offer)
			}
			for u, want := range tt.wantPairs {
				got, err := store.HumanAgent(ctx, u)
				if err != nil && !errors.Is(err, memory.ErrNotFound) || got != want {
					t.Errorf("%s paired with %q (%v), want %q", u, got, err, want)
				}
			}
		})
	}
}

// An offer is answered once, by its user, before it expires, while its
// maker still owns the agent.
func TestPairingOfferAnswers(t *testing.T) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	hugo := ens.Agent{Name: "Hugo", EnsDomain: pairHugo, Role: ens.RoleHuman}
	newOffer := func(t *testing.T, ids *pairIDs) (*Pairing, *memory.InProcess, string) {
		store := memory.NewInProcess(memory.Options{})
		if err := store.LinkWallet(ctx, "U1", pairOwner); err != nil {
			t.Fatal(err)
		}
		p := New(store, ids, clock.Now)
		out, err := p.Request(ctx, Request{Caller: "U1", User: "U3", Agent: hugo})
		if err != nil || out.Kind != Offered {
			t.Fatalf("offer: %+v, %v", out, err)
		}
		return p, store, out.Offer.ID
	}
	t.Run("by someone else, then by its user, then again", func(t *testing.T) {
		p, store, id := newOffer(t, &pairIDs{owner: pairOwner})
		if _, _, err := p.Accept(ctx, id, "U2"); !errors.Is(err, ErrNotOffered) {
			t.Errorf("accept by U2: %v", err)
		}
		if _, err := p.Decline(ctx, id, "U2"); !errors.Is(err, ErrNotOffered) {
			t.Errorf("decline by U2: %v", err)
		}
		if o, _, err := p.Accept(ctx, id, "U3"); err != nil || o.OfferedBy != "U1" {
			t.Fatalf("accept: %+v %v", o, err)
		}
		if got, _ := store.HumanAgent(ctx, "U3"); got != pairHugo {
			t.Errorf("U3 paired with %q", got)
		}
		if _, _, err := p.Accept(ctx, id, "U3"); !errors.Is(err, ErrOfferGone) {
			t.Errorf("second accept: %v", err)
		}
	})
	t.Run("expired", func(t *testing.T) {
		p, _, id := newOffer(t, &pairIDs{owner: pairOwner})
		clock.Advance(OfferTTL)
		if _, _, err := p.Accept(ctx, id, "U3"); !errors.Is(err, ErrOfferGone) {
			t.Errorf("accept after 24 h: %v", err)
		}
	})
	t.Run("the owner sold the agent", func(t *testing.T) {
		ids := &pairIDs{owner: pairOwner}
		p, _, id := newOffer(t, ids)
		ids.owner = "0x00000000000000000000000000000000000000bb"
		if _, _, err := p.Accept(ctx, id, "U3"); !errors.Is(err, ErrNotOwner) {
			t.Errorf("accept: %v", err)
		}
		ids.owner = pairOwner
		if _, _, err := p.Accept(ctx, id, "U3"); !errors.Is(err, ErrOfferGone) {
			t.Errorf("the offer still stands: %v", err)
		}
	})
}
