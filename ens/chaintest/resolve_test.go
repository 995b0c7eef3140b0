package chaintest

import (
	"context"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/ens/enstest"
)

var (
	alice  = common.HexToAddress("0x00000000000000000000000000000000000A11CE")
	bob    = common.HexToAddress("0x0000000000000000000000000000000000000B0B")
	wallet = "0x1111111111111111111111111111111111111111"
)

// world is every contract the tests resolve through, on one chain.
type world struct {
	e        *evm
	agents   *agents6022
	ensReg   contract
	resolver contract // a plain resolver with addr and text
	offchain contract // a wildcard resolver behind gateway (GET, after a failing URL)
	postOnly contract // a wildcard resolver behind gateway (POST)
	gw       *gateway
	tokens   map[string]int64
}

func newWorld(tb testing.TB) *world {
	tb.Helper()
	e := newEVM(tb)
	w := &world{e: e, agents: deploy6022(e), gw: newGateway(tb), tokens: map[string]int64{}}

	w.tokens["claudine"] = w.agents.mint(token{
		owner: alice, name: "claudine",
		addresses:  []agentAddress{{"evm", wallet}},
		images:     []keyValue{{"default", "bafyclaudine"}},
		attributes: []keyValue{{"role", "expert"}, {"mission", "Knows every claim"}},
		cloneOf:    -1,
	})
	w.agents.provision("claudine.acme.137.protocol6022.eth", w.tokens["claudine"])
	w.agents.setText("claudine.acme.137.protocol6022.eth", "url", "https://claudine.example")
	w.tokens["arnaud"] = w.agents.mint(token{owner: bob, name: "arnaud", attributes: []keyValue{{"role", "human"}}, cloneOf: -1})
	w.agents.provision("arnaud.acme.137.6022.eth", w.tokens["arnaud"]) // only under the second base
	w.tokens["arnaud-twin"] = w.agents.mint(token{
		owner: bob, name: "arnaud-twin", attributes: []keyValue{{"role", "clone"}}, cloneOf: w.tokens["arnaud"],
	})
	w.agents.provision("arnaud-twin.acme.137.protocol6022.eth", w.tokens["arnaud-twin"])
	w.tokens["victor"] = w.agents.mint(token{owner: e.from, name: "Victor", attributes: []keyValue{{"role", "facilitator"}}, cloneOf: -1})

	w.ensReg = e.deploy("TestENSRegistry")
	w.resolver = e.deploy("TestPublicResolver")
	e.send(w.ensReg, "setRecord", ens.Namehash("alice.eth"), alice, w.resolver.addr)
	e.send(w.resolver, "setAddr", ens.Namehash("alice.eth"), common.HexToAddress(wallet))
	e.send(w.resolver, "setText", ens.Namehash("alice.eth"), "role", "Facilitator")
	e.send(w.resolver, "setText", ens.Namehash("alice.eth"), "mission", "Runs the desk")
	e.send(w.resolver, "setText", ens.Namehash("alice.eth"), "avatar", "https://img.example/alice.png")

	w.offchain = e.deploy("TestOffchainResolver", []string{w.gw.downURL(), w.gw.getURL()})
	e.send(w.ensReg, "setRecord", ens.Namehash("offchain.eth"), bob, w.offchain.addr)
	w.postOnly = e.deploy("TestOffchainResolver", []string{w.gw.postURL()})
	e.send(w.ensReg, "setRecord", ens.Namehash("post.eth"), bob, w.postOnly.addr)

	w.gw.mu.Lock()
	for _, name := range []string{"bob.offchain.eth", "bob.post.eth"} {
		w.gw.addrs[name] = bob
		w.gw.texts[name] = map[string]string{"role": "clone", "description": "Bob's twin", "url": "https://bob.example"}
	}
	w.gw.loop["loop.offchain.eth"] = true
	w.gw.mu.Unlock()
	return w
}

func (w *world) directory(tb testing.TB, opts ens.Options) (*ens.Directory, *countingCaller) {
	return directory(tb, w.e, w.agents.registry.addr, w.ensReg.addr, opts)
}

func TestResolveOnEVM(t *testing.T) {
	w := newWorld(t)
	coll := w.agents.collection.addr.Hex()
	tests := []struct {
		name string
		in   string
		want ens.Agent
	}{
		{
			name: "6022 expert",
			in:   "Claudine.acme.137.6022.eth",
			want: ens.Agent{
				Name: "claudine", EnsDomain: "claudine.acme.137.protocol6022.eth", Owner: alice.Hex(),
				Addresses:  map[string]string{"evm": wallet},
				Attributes: map[string]string{"role": "expert", "mission": "Knows every claim"},
				Role:       ens.RoleExpert, Avatar: "ipfs://bafyclaudine", URL: "https://claudine.example",
				ChainID: 137, Collection: coll, TokenID: big.NewInt(w.tokens["claudine"]),
			},
		},
		{
			name: "6022 human registered under the second base",
			in:   "arnaud.acme.137.protocol6022.eth",
			want: ens.Agent{
				Name: "arnaud", EnsDomain: "arnaud.acme.137.protocol6022.eth", Owner: bob.Hex(),
				Addresses: map[string]string{}, Attributes: map[string]string{"role": "human"}, Role: ens.RoleHuman,
				ChainID: 137, Collection: coll, TokenID: big.NewInt(w.tokens["arnaud"]),
			},
		},
		{
			name: "6022 clone names its human",
			in:   "arnaud-twin.acme.137.protocol6022.eth",
			want: ens.Agent{
				Name: "arnaud-twin", EnsDomain: "arnaud-twin.acme.137.protocol6022.eth", Owner: bob.Hex(),
				Addresses: map[string]string{}, Attributes: map[string]string{"role": "clone"}, Role: ens.RoleClone,
				CloneOf: "arnaud.acme.137.protocol6022.eth",
				ChainID: 137, Collection: coll, TokenID: big.NewInt(w.tokens["arnaud-twin"]),
			},
		},
		{
			name: "standard ENS",
			in:   "Alice.eth",
			want: ens.Agent{
				Name: "alice", EnsDomain: "alice.eth", Owner: alice.Hex(),
				Addresses: map[string]string{"evm": common.HexToAddress(wallet).Hex()},
				Attributes: map[string]string{
					"role": "Facilitator", "mission": "Runs the desk", "avatar": "https://img.example/alice.png",
				},
				Role: ens.RoleFacilitator, Avatar: "https://img.example/alice.png",
			},
		},
		{
			name: "wildcard resolver through CCIP-Read GET, after a failing gateway",
			in:   "bob.offchain.eth",
			want: ens.Agent{
				Name: "bob", EnsDomain: "bob.offchain.eth",
				Addresses:  map[string]string{"evm": bob.Hex()},
				Attributes: map[string]string{"role": "clone", "description": "Bob's twin", "url": "https://bob.example"},
				Role:       ens.RoleClone, URL: "https://bob.example",
			},
		},
		{
			name: "wildcard resolver through CCIP-Read POST",
			in:   "bob.post.eth",
			want: ens.Agent{
				Name: "bob", EnsDomain: "bob.post.eth",
				Addresses:  map[string]string{"evm": bob.Hex()},
				Attributes: map[string]string{"role": "clone", "description": "Bob's twin", "url": "https://bob.example"},
				Role:       ens.RoleClone, URL: "https://bob.example",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := w.directory(t, ens.Options{Gateway: ens.GatewayOptions{AllowHTTP: true, AllowPrivate: true}})
			got, err := d.Resolve(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			assertAgent(t, got, tt.want)
		})
	}

	seen := w.gw.seen()
	for _, want := range []string{"GET /down", "GET /gw", "POST /gw"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the gateway never saw %q (saw %v)", want, seen)
		}
	}
	if i, j := slices.Index(seen, "GET /down"), slices.Index(seen, "GET /gw"); i > j {
		t.Errorf("gateway URLs were not tried in order: %v", seen)
	}
}

func assertAgent(t *testing.T, got, want ens.Agent) {
	t.Helper()
	if d := enstest.Diff(got, want); d != "" {
		t.Error(d)
	}
}

func TestResolveErrorsOnEVM(t *testing.T) {
	w := newWorld(t)
	tests := []struct {
		name     string
		in       string
		sentinel error
		want     string
	}{
		{"unknown 6022 name", "nobody.acme.137.protocol6022.eth", ens.ErrNotFound, "agentRef on chain 137"},
		{"name with no resolver", "nobody.eth", ens.ErrNotFound, "no resolver"},
		{"subname of a resolver that is no wildcard", "sub.alice.eth", ens.ErrNotFound, "not a wildcard resolver"},
		{"gateway does not know the name", "ghost.offchain.eth", ens.ErrNotFound, "no address or text record"},
		{"resolver keeps redirecting", "loop.offchain.eth", nil, "still redirected after 4 off-chain lookups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := w.directory(t, ens.Options{Gateway: ens.GatewayOptions{AllowHTTP: true, AllowPrivate: true}})
			_, err := d.Resolve(context.Background(), tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `ens: resolve "`+tt.in+`"`) {
				t.Fatalf("error = %v, want one naming %q and %q", err, tt.in, tt.want)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tt.sentinel)
			}
		})
	}
}

func TestTokenAndOwnerOnEVM(t *testing.T) {
	w := newWorld(t)
	coll := w.agents.collection.addr
	d, _ := w.directory(t, ens.Options{Collections: []ens.Collection{{ChainID: 137, Address: coll.Hex(), Label: "acme"}}})
	ctx := context.Background()

	victor, err := d.ResolveToken(ctx, 0, strings.ToLower(coll.Hex()), big.NewInt(w.tokens["victor"]))
	if err != nil {
		t.Fatal(err)
	}
	if victor.EnsDomain != "victor.acme.137.protocol6022.eth" || victor.Role != ens.RoleFacilitator || victor.Owner != w.e.from.Hex() {
		t.Errorf("ResolveToken = %+v", victor)
	}
	if _, err := d.ResolveToken(ctx, 137, coll.Hex(), big.NewInt(100)); !errors.Is(err, ens.ErrNotFound) {
		t.Errorf("a token never minted: error = %v, want ErrNotFound", err)
	}

	// The NFT changes hands: Owner reads the chain, not what was resolved.
	w.e.send(w.agents.collection, "transferFrom", w.e.from, bob, big.NewInt(w.tokens["victor"]))
	if owner, err := d.Owner(ctx, victor); err != nil || owner != bob.Hex() {
		t.Errorf("Owner = %q, %v, want %s", owner, err, bob.Hex())
	}
	aliceENS, err := d.Resolve(ctx, "alice.eth")
	if err != nil {
		t.Fatal(err)
	}
	if owner, err := d.Owner(ctx, aliceENS); err != nil || owner != alice.Hex() {
		t.Errorf("Owner of a standard ENS name = %q, %v", owner, err)
	}
}

// TestGatewayGuardOnEVM resolves a name whose resolver sends conclave to
// gateways on 127.0.0.1 with the guard as it is by default: refused,
// with ErrGatewayRefused and no request reaching the gateway, whether the
// URL is refused for being plain http or the address for being loopback.
func TestGatewayGuardOnEVM(t *testing.T) {
	w := newWorld(t)
	for name, opts := range map[string]ens.GatewayOptions{
		"defaults":              {},
		"http allowed, private": {AllowHTTP: true},
	} {
		t.Run(name, func(t *testing.T) {
			before := len(w.gw.seen())
			d, _ := w.directory(t, ens.Options{Gateway: opts})
			_, err := d.Resolve(context.Background(), "bob.offchain.eth")
			if !errors.Is(err, ens.ErrGatewayRefused) || errors.Is(err, ens.ErrNotFound) {
				t.Fatalf("error %v, want one wrapping ErrGatewayRefused", err)
			}
			if seen := w.gw.seen()[before:]; len(seen) != 0 {
				t.Errorf("the loopback gateway was reached: %v", seen)
			}
		})
	}
}

// recordingDial is a gateway dialer that connects for real and records
// every address it was asked for.
type recordingDial struct {
	mu    sync.Mutex
	addrs []string
}

func (d *recordingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *recordingDial) attempted() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

// TestZonedGatewayOnEVM resolves a name whose resolver sends conclave to
// the gateway on IPv6 loopback written with a zone (http://[::1%25lo]:…):
// refused with ErrGatewayRefused, no connection attempted and no request
// reaching the gateway — by default and with private gateways allowed.
// The same gateway without the zone, private gateways allowed, answers:
// the rig would have reached it.
func TestZonedGatewayOnEVM(t *testing.T) {
	w := newWorld(t)
	host := "::1"
	v6 := httptest.NewUnstartedServer(http.HandlerFunc(w.gw.serve))
	if l, err := net.Listen("tcp", "[::1]:0"); err == nil {
		v6.Listener.Close()
		v6.Listener = l
	} else {
		host = "127.0.0.1" // no IPv6 loopback: the zone is still refused before any dial
	}
	v6.Start()
	t.Cleanup(v6.Close)
	_, port, _ := net.SplitHostPort(v6.Listener.Addr().String())
	path := "/gw/{sender}/{data}.json"
	zoned := w.e.deploy("TestOffchainResolver", []string{"http://[" + host + "%25lo]:" + port + path})
	w.e.send(w.ensReg, "setRecord", ens.Namehash("zoned.eth"), bob, zoned.addr)
	plain := w.e.deploy("TestOffchainResolver", []string{"http://" + net.JoinHostPort(host, port) + path})
	w.e.send(w.ensReg, "setRecord", ens.Namehash("plain.eth"), bob, plain.addr)
	w.gw.mu.Lock()
	for _, name := range []string{"bob.zoned.eth", "bob.plain.eth"} {
		w.gw.addrs[name] = bob
		w.gw.texts[name] = map[string]string{"description": "an answer from loopback"}
	}
	w.gw.mu.Unlock()

	for name, opts := range map[string]ens.GatewayOptions{
		"http allowed":                {AllowHTTP: true},
		"http and private allowed":    {AllowHTTP: true, AllowPrivate: true},
		"defaults (https only) still": {},
	} {
		t.Run(name, func(t *testing.T) {
			before := len(w.gw.seen())
			rec := &recordingDial{}
			opts.Dial = rec.dial
			d, _ := w.directory(t, ens.Options{Gateway: opts})
			a, err := d.Resolve(context.Background(), "bob.zoned.eth")
			if !errors.Is(err, ens.ErrGatewayRefused) || errors.Is(err, ens.ErrNotFound) {
				t.Fatalf("agent %+v, error %v, want one wrapping ErrGatewayRefused", a, err)
			}
			if got := rec.attempted(); len(got) != 0 {
				t.Errorf("connections were attempted to %v", got)
			}
			if seen := w.gw.seen()[before:]; len(seen) != 0 {
				t.Errorf("the loopback gateway was reached: %v", seen)
			}
		})
	}
	t.Run("control: the same gateway without the zone, private allowed", func(t *testing.T) {
		rec := &recordingDial{}
		d, _ := w.directory(t, ens.Options{Gateway: ens.GatewayOptions{AllowHTTP: true, AllowPrivate: true, Dial: rec.dial}})
		a, err := d.Resolve(context.Background(), "bob.plain.eth")
		if err != nil || a.Attributes["description"] != "an answer from loopback" {
			t.Fatalf("agent %+v, error %v, want the gateway's answer", a, err)
		}
		if got := rec.attempted(); len(got) == 0 {
			t.Error("the recording dialer saw no connection")
		}
	})
}
