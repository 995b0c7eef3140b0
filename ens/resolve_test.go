package ens_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/ens/enstest"
)

var (
	ownerAlice = common.HexToAddress("0x00000000000000000000000000000000000A11CE")
	ownerBob   = common.HexToAddress("0x0000000000000000000000000000000000000B0B")
	walletC    = "0x1111111111111111111111111111111111111111"
)

// seedAgents mints an expert (registered under the canonical base), a human
// (registered under the second base only) and the human's clone.
func seedAgents(f *fakeChain) {
	expert := fakeToken{
		Name:       "claudine",
		Addresses:  []fakeAddress{{AddressType: "evm", Value: walletC}, {AddressType: "btc", Value: "bc1qxyz"}},
		Attributes: []fakeKV{{Key: "role", Value: "Expert"}, {Key: "mission", Value: "Knows every claim"}, {Key: "expertise", Value: "claims"}},
		Images:     []fakeKV{{Key: "default", Value: "bafyclaudine"}},
		Owner:      ownerAlice,
	}
	f.Mint("claudine.acme.137.protocol6022.eth", 1, expert)
	f.SetText("claudine.acme.137.protocol6022.eth", "avatar", "https://img.example/claudine.png")
	f.SetText("claudine.acme.137.protocol6022.eth", "url", "https://claudine.example")

	human := fakeToken{Name: "arnaud", Attributes: []fakeKV{{Key: "role", Value: "human"}}, Images: []fakeKV{{Key: "default", Value: "bafyarnaud"}}, Owner: ownerBob}
	f.Mint("arnaud.acme.137.6022.eth", 2, human)

	twin := fakeToken{Name: "arnaud-twin", Attributes: []fakeKV{{Key: "role", Value: "clone"}}, Owner: ownerBob}
	twin.CloneOf.IsSet, twin.CloneOf.Value = true, big.NewInt(2)
	f.Mint("arnaud-twin.acme.137.protocol6022.eth", 3, twin)
}

func TestResolveRegistry(t *testing.T) {
	fake := newFakeChain(t)
	seedAgents(fake)
	d := newDirectory(t, fake, ens.Options{})
	ctx := context.Background()

	tests := []struct {
		name string
		in   string
		want ens.Agent
	}{
		{
			name: "expert",
			in:   "claudine.acme.137.protocol6022.eth",
			want: ens.Agent{
				Name: "claudine", EnsDomain: "claudine.acme.137.protocol6022.eth", Owner: ownerAlice.Hex(),
				Addresses:  map[string]string{"evm": walletC, "btc": "bc1qxyz"},
				Attributes: map[string]string{"role": "Expert", "mission": "Knows every claim", "expertise": "claims"},
				Role:       ens.RoleExpert, Avatar: "https://img.example/claudine.png", URL: "https://claudine.example",
				ChainID: 137, Collection: fake.Collection().Hex(), TokenID: big.NewInt(1),
			},
		},
		{
			name: "registered under the second base, asked under the first",
			in:   "Arnaud.Acme.137.protocol6022.eth",
			want: ens.Agent{
				Name: "arnaud", EnsDomain: "arnaud.acme.137.protocol6022.eth", Owner: ownerBob.Hex(),
				Addresses: map[string]string{}, Attributes: map[string]string{"role": "human"},
				Role: ens.RoleHuman, Avatar: "ipfs://bafyarnaud",
				ChainID: 137, Collection: fake.Collection().Hex(), TokenID: big.NewInt(2),
			},
		},
		{
			name: "clone names its human",
			in:   "arnaud-twin.acme.137.6022.eth",
			want: ens.Agent{
				Name: "arnaud-twin", EnsDomain: "arnaud-twin.acme.137.protocol6022.eth", Owner: ownerBob.Hex(),
				Addresses: map[string]string{}, Attributes: map[string]string{"role": "clone"},
				Role: ens.RoleClone, CloneOf: "arnaud.acme.137.protocol6022.eth",
				ChainID: 137, Collection: fake.Collection().Hex(), TokenID: big.NewInt(3),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Resolve(ctx, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			assertAgent(t, got, tt.want)
		})
	}
}

func assertAgent(t *testing.T, got, want ens.Agent) {
	t.Helper()
	if d := enstest.Diff(got, want); d != "" {
		t.Error(d)
	}
}

func TestStaticWins(t *testing.T) {
	fake := newFakeChain(t)
	seedAgents(fake)
	static := []ens.Agent{
		{EnsDomain: "claudine.acme.137.6022.eth", Name: "Claudine (config)", Role: "Facilitator",
			Owner: ownerBob.Hex(), Attributes: map[string]string{"mission": "Runs the desk", "role": "expert"}},
		{EnsDomain: "helper.eth", Attributes: map[string]string{"role": "clone"}},
	}
	d := newDirectory(t, fake, ens.Options{}, static...)
	ctx := context.Background()

	for _, in := range []string{"claudine.acme.137.protocol6022.eth", "CLAUDINE.acme.137.6022.eth"} {
		got, err := d.Resolve(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		assertAgent(t, got, ens.Agent{
			Name: "Claudine (config)", EnsDomain: "claudine.acme.137.protocol6022.eth", Owner: ownerBob.Hex(),
			Role: ens.RoleFacilitator, Addresses: map[string]string{},
			Attributes: map[string]string{"mission": "Runs the desk", "role": "facilitator"},
		})
	}
	got, err := d.Resolve(ctx, "helper.eth")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "helper" || got.Role != ens.RoleClone || got.Attributes["role"] != "clone" {
		t.Errorf("static agent without role or name = %+v", got)
	}
	if n := fake.CallCount(""); n != 0 {
		t.Errorf("static agents made %d RPC calls", n)
	}

	// What a caller does to its copy does not reach the directory.
	got.Attributes["role"] = "facilitator"
	again, _ := d.Resolve(ctx, "helper.eth")
	if again.Attributes["role"] != "clone" {
		t.Errorf("the directory shares its maps with callers")
	}
}

func TestNewStaticRejects(t *testing.T) {
	names := mustNames(t)
	tests := []struct {
		name   string
		agents []ens.Agent
	}{
		{"invalid name", []ens.Agent{{EnsDomain: "bad_name.eth"}}},
		{"same agent in two forms", []ens.Agent{{EnsDomain: "a.acme.137.6022.eth"}, {EnsDomain: "a.acme.137.protocol6022.eth"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ens.NewStatic(names, tt.agents); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestResolveErrors covers each bad input: the error must name the name and
// the step, and wrap the sentinel callers branch on.
func TestResolveErrors(t *testing.T) {
	fake := newFakeChain(t)
	seedAgents(fake)
	// A registry entry pointing at a token that does not exist (burnt).
	fake.Register("ghost.acme.137.protocol6022.eth", 99)

	tests := []struct {
		name     string
		in       string
		down     bool
		sentinel error
		want     []string
	}{
		{"unknown name", "nobody.acme.137.protocol6022.eth", false, ens.ErrNotFound,
			[]string{`ens: resolve "nobody.acme.137.protocol6022.eth": agentRef on chain 137:`, "agent not found"}},
		{"burnt token", "ghost.acme.137.protocol6022.eth", false, ens.ErrNotFound,
			[]string{`"ghost.acme.137.protocol6022.eth"`, "informationOf(99)", "reverted"}},
		{"no RPC for the chain", "claudine.acme.5.protocol6022.eth", false, ens.ErrNoRPC,
			[]string{`"claudine.acme.5.protocol6022.eth"`, "no RPC for chain 5"}},
		{"standard ENS with no mainnet RPC", "vitalik.eth", false, ens.ErrNoRPC,
			[]string{`"vitalik.eth"`, "no RPC for Ethereum mainnet"}},
		{"RPC down, nothing cached", "claudine.acme.137.protocol6022.eth", true, errConnRefused,
			[]string{`ens: resolve "claudine.acme.137.protocol6022.eth": agentRef on chain 137:`, "connection refused"}},
		{"non-ASCII", "clàudine.acme.137.protocol6022.eth", false, ens.ErrInvalidName,
			[]string{`"clàudine.acme.137.protocol6022.eth"`, "name not supported"}},
		{"bad label", "clau_dine.acme.137.protocol6022.eth", false, ens.ErrInvalidName,
			[]string{`"clau_dine.acme.137.protocol6022.eth"`, `label "clau_dine"`}},
		{"not .eth", "claudine.example.com", false, ens.ErrInvalidName,
			[]string{`"claudine.example.com"`, "only .eth names"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDirectory(t, fake, ens.Options{})
			fake.SetDown(tt.down)
			defer fake.SetDown(false)
			_, err := d.Resolve(context.Background(), tt.in)
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("error = %v, want it to wrap %v", err, tt.sentinel)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestErrorsHideTheRPCURL(t *testing.T) {
	// Nothing listens on port 1; the default dialler (ethclient) is used.
	for _, secretURL := range []string{
		"http://127.0.0.1:1/v3/secret-api-key",
		"http://rpc-user:secret-api-key@127.0.0.1:1/v3/secret-path-key", // net/http quotes it as rpc-user:***@
	} {
		d, err := ens.New(ens.Options{Chains: []ens.Chain{{ChainID: 137, RPCURL: secretURL}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Resolve(context.Background(), claudine)
		d.Close()
		if err == nil || strings.Contains(err.Error(), "secret-") || strings.Contains(err.Error(), "rpc-user") ||
			!strings.Contains(err.Error(), "agentRef on chain 137") || !strings.Contains(err.Error(), "http://127.0.0.1:1/…") {
			t.Fatalf("error = %v, want the failed step and the host without the URL's key", err)
		}
	}
}

func TestRPCDeadline(t *testing.T) {
	fake := newFakeChain(t)
	seedAgents(fake)
	d := newDirectory(t, fake, ens.Options{RPCTimeout: 20_000_000}) // 20ms
	release := fake.HoldCalls()
	defer release()
	_, err := d.Resolve(context.Background(), "claudine.acme.137.protocol6022.eth")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "agentRef on chain 137") {
		t.Fatalf("a call that never answers: error = %v, want a deadline error naming the step", err)
	}
}

// A whole resolution has one deadline (ens.resolve_timeout), shorter here
// than the deadline of its one RPC call: the error says which one ended it.
func TestResolveDeadline(t *testing.T) {
	fake := newFakeChain(t)
	seedAgents(fake)
	d := newDirectory(t, fake, ens.Options{RPCTimeout: time.Minute, ResolveTimeout: 50 * time.Millisecond,
		Collections: []ens.Collection{{ChainID: 137, Address: fake.Collection().Hex(), Label: "acme"}}})
	release := fake.HoldCalls()
	defer release()
	_, err := d.Resolve(context.Background(), "claudine.acme.137.protocol6022.eth")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "agentRef on chain 137: context deadline exceeded (the look-up took longer than ens.resolve_timeout, 50ms)") {
		t.Fatalf("a call that never answers: error = %v, want the resolution's deadline named", err)
	}
	_, err = d.ResolveToken(context.Background(), 0, fake.Collection().Hex(), big.NewInt(1))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "ens.resolve_timeout") {
		t.Fatalf("ResolveToken: error = %v, want the resolution's deadline named", err)
	}
}

func TestResolveToken(t *testing.T) {
	fake := newFakeChain(t)
	seedAgents(fake)
	fake.Mint("", 7, fakeToken{Name: "Victor", Attributes: []fakeKV{{Key: "role", Value: "expert"}}, Owner: ownerAlice})
	fake.Mint("", 8, fakeToken{Name: "Bad Name!", Owner: ownerAlice})
	coll := fake.Collection().Hex()
	opts := ens.Options{Collections: []ens.Collection{{ChainID: 137, Address: strings.ToLower(coll), Label: "Acme"}}}
	d := newDirectory(t, fake, opts)
	ctx := context.Background()

	t.Run("builds the name from the NFT and the collection label", func(t *testing.T) {
		for _, chain := range []uint64{137, 0} {
			got, err := d.ResolveToken(ctx, chain, coll, big.NewInt(7))
			if err != nil {
				t.Fatal(err)
			}
			assertAgent(t, got, ens.Agent{
				Name: "Victor", EnsDomain: "victor.acme.137.protocol6022.eth", Owner: ownerAlice.Hex(),
				Role: ens.RoleExpert, Addresses: map[string]string{}, Attributes: map[string]string{"role": "expert"},
				ChainID: 137, Collection: coll, TokenID: big.NewInt(7),
			})
		}
	})
	errTests := []struct {
		name     string
		chain    uint64
		coll     string
		token    int64
		sentinel error
		want     string
	}{
		{"collection not configured", 137, "0x2222222222222222222222222222222222222222", 7, nil, "not configured"},
		{"collection on another chain", 80002, coll, 7, nil, "not configured"},
		{"not an address", 137, "acme", 7, ens.ErrInvalidName, "not a collection address"},
		{"no such token", 137, coll, 42, ens.ErrNotFound, "informationOf(42)"},
		{"name is no label", 137, coll, 8, ens.ErrInvalidName, `"Bad Name!"`},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.ResolveToken(ctx, tt.chain, tt.coll, big.NewInt(tt.token))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "ens: agent ") {
				t.Fatalf("error = %v, want one with %q", err, tt.want)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tt.sentinel)
			}
		})
	}
}

func TestOwnerIsFresh(t *testing.T) {
	fake := newFakeChain(t)
	seedAgents(fake)
	d := newDirectory(t, fake, ens.Options{}, ens.Agent{EnsDomain: "elen.eth", Owner: ownerAlice.Hex()})
	ctx := context.Background()

	a, err := d.Resolve(ctx, "claudine.acme.137.protocol6022.eth")
	if err != nil {
		t.Fatal(err)
	}
	fake.SetOwner(1, ownerBob)
	if cached, _ := d.Resolve(ctx, "claudine.acme.137.protocol6022.eth"); cached.Owner != ownerAlice.Hex() {
		t.Fatalf("cached owner = %s, want the cached %s", cached.Owner, ownerAlice.Hex())
	}
	if got, err := d.Owner(ctx, a); err != nil || got != ownerBob.Hex() {
		t.Errorf("Owner = %q, %v, want the new owner %s", got, err, ownerBob.Hex())
	}
	static, _ := d.Resolve(ctx, "elen.eth")
	if got, err := d.Owner(ctx, static); err != nil || got != ownerAlice.Hex() {
		t.Errorf("static Owner = %q, %v", got, err)
	}
	fake.SetDown(true)
	if _, err := d.Owner(ctx, a); !errors.Is(err, errConnRefused) || !strings.Contains(err.Error(), "ownerOf(1)") {
		t.Errorf("Owner with the chain down: error = %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		opts ens.Options
		want string
	}{
		{"bad base", ens.Options{BaseDomains: []string{"6022.com"}}, "base domain"},
		{"chain without id", ens.Options{Chains: []ens.Chain{{RPCURL: "http://x"}}}, "chain_id"},
		{"chain twice", ens.Options{Chains: []ens.Chain{{ChainID: 137}, {ChainID: 137}}}, "twice"},
		{"unknown chain without registry", ens.Options{Chains: []ens.Chain{{ChainID: 5, RPCURL: "http://x"}}}, "no registry address"},
		{"bad registry", ens.Options{Chains: []ens.Chain{{ChainID: 5, Registry: "0x12"}}}, "not an address"},
		{"bad collection", ens.Options{Collections: []ens.Collection{{ChainID: 137, Address: "0x12", Label: "acme"}}}, "collection"},
		{"bad collection label", ens.Options{Collections: []ens.Collection{{ChainID: 137, Address: walletC, Label: "a_b"}}}, "label"},
		{"empty text key", ens.Options{TextKeys: []string{"role", ""}}, "text_keys"},
		{"mainnet twice", ens.Options{MainnetRPCURL: "http://a", Chains: []ens.Chain{{ChainID: 1, RPCURL: "http://b", Registry: walletC}}}, "mainnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ens.New(tt.opts, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one with %q", err, tt.want)
			}
		})
	}
	d, err := ens.New(ens.Options{}, nil)
	if err != nil {
		t.Fatalf("the zero Options must work (no chain at all): %v", err)
	}
	d.Close()
}

// A chain listed without an RPC URL, or not listed at all, is skipped: its
// names fail with "no RPC for chain N" and nothing is dialled.
func TestChainWithoutRPCIsSkipped(t *testing.T) {
	for name, chains := range map[string][]ens.Chain{
		"listed without rpc_url": {{ChainID: 137}},
		"not listed":             nil,
	} {
		t.Run(name, func(t *testing.T) {
			dials := 0
			d, err := ens.New(ens.Options{Chains: chains, Dial: func(context.Context, uint64, string) (ethereum.ContractCaller, error) {
				dials++
				return nil, errors.New("dialled")
			}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			_, err = d.Resolve(context.Background(), "claudine.acme.137.protocol6022.eth")
			if !errors.Is(err, ens.ErrNoRPC) || !strings.Contains(err.Error(), `ens: resolve "claudine.acme.137.protocol6022.eth": no RPC for chain 137`) {
				t.Errorf("error = %v, want ErrNoRPC saying no RPC for chain 137", err)
			}
			if dials != 0 {
				t.Errorf("%d dials", dials)
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	tests := map[string]ens.Role{
		"facilitator": ens.RoleFacilitator, "Facilitator": ens.RoleFacilitator, " FACILITATOR ": ens.RoleFacilitator,
		"expert": ens.RoleExpert, "clone": ens.RoleClone, "Clone\n": ens.RoleClone, "human": ens.RoleHuman, "Human": ens.RoleHuman,
		"": ens.RoleExpert, "admin": ens.RoleExpert, "facilitator-ish": ens.RoleExpert,
	}
	for in, want := range tests {
		if got := ens.ParseRole(in); got != want {
			t.Errorf("ParseRole(%q) = %q, want %q", in, got, want)
		}
	}
}

// A static clone names its human in canonical form, whichever form the
// config used; a clone_of that is no valid name is refused.
func TestStaticCloneOf(t *testing.T) {
	names := mustNames(t)
	s, err := ens.NewStatic(names, []ens.Agent{
		{EnsDomain: "arnaud.acme.137.6022.eth", Role: ens.RoleHuman},
		{EnsDomain: "arnaud-twin.acme.137.6022.eth", Role: ens.RoleClone, CloneOf: "Arnaud.Acme.137.6022.eth"},
	})
	if err != nil {
		t.Fatal(err)
	}
	twin, err := s.Resolve(context.Background(), "arnaud-twin.acme.137.protocol6022.eth")
	if err != nil {
		t.Fatal(err)
	}
	if twin.CloneOf != "arnaud.acme.137.protocol6022.eth" {
		t.Errorf("CloneOf = %q, want the canonical form", twin.CloneOf)
	}
	_, err = ens.NewStatic(names, []ens.Agent{{EnsDomain: "twin.eth", Role: ens.RoleClone, CloneOf: "not a name"}})
	if !errors.Is(err, ens.ErrInvalidName) || !strings.Contains(err.Error(), "twin.eth") {
		t.Errorf("a clone_of that is no name: error = %v", err)
	}
}

// An attribute is found whatever the case it is stored under; the key
// written exactly wins.
func TestAgentAttribute(t *testing.T) {
	a := ens.Agent{Attributes: map[string]string{"Mission": "Runs the desk", "llm_profile": "cheap", "ROLE": "expert", "role": "clone"}}
	for key, want := range map[string]string{"mission": "Runs the desk", "llm_profile": "cheap", "role": "clone", "expertise": ""} {
		if got := a.Attribute(key); got != want {
			t.Errorf("Attribute(%q) = %q, want %q", key, got, want)
		}
	}
}
