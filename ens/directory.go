package ens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Log attribute keys.
const (
	logKeyComponent = "component"
	logKeyName      = "ens_name"
	logKeyToken     = "token_id"
	logKeyAge       = "age"
	logKeyError     = "err"
)

// Chain is one chain holding 6022 agents ([[ens.chains]]).
type Chain struct {
	ChainID uint64
	// RPCURL is the chain's JSON-RPC endpoint; empty skips the chain
	// (look-ups fail with "no RPC for chain N").
	RPCURL string
	// Registry is the AgentEnsRegistry address; empty means the public
	// deployment (DefaultRegistries).
	Registry string
}

// Collection lets an agent be named from its token ([[ens.collections]]):
// the token's agents are <nft name>.<Label>.<ChainID>.<base_domains[0]>.
type Collection struct {
	ChainID uint64
	Address string
	Label   string
}

// Options configure a Directory; the wiring fills them from the config.
// Zero values take the documented defaults.
type Options struct {
	BaseDomains   []string // default DefaultBaseDomains
	Chains        []Chain
	MainnetRPCURL string   // standard ENS; empty turns it off
	TextKeys      []string // default DefaultTextKeys
	CacheTTL      time.Duration
	NegativeTTL   time.Duration
	StaleMax      time.Duration
	RPCTimeout    time.Duration // deadline of one RPC call or gateway request
	// ResolveTimeout is the deadline of one whole look-up (a name, a
	// token, an owner), however many calls and gateways it takes; default
	// DefaultResolveTimeout.
	ResolveTimeout time.Duration
	Collections    []Collection
	Logger         *slog.Logger

	// ENSRegistry overrides the ENS registry address (ENSRegistryAddress),
	// for test chains and other networks.
	ENSRegistry string
	// Dial opens a chain connection; default ethclient.DialContext.
	Dial DialFunc
	// Gateway guards CCIP-Read gateway requests (ens.gateway_allow_http,
	// ens.gateway_allow_private) and holds the resolver, dialer and TLS
	// seams tests use.
	Gateway GatewayOptions
	// Now is the cache's clock; default time.Now.
	Now func() time.Time
}

// Directory resolves agent names: the static directory first, then, through
// a cache, the 6022 registry of the name's chain (for 6022 names) or
// standard ENS (for other .eth names). It also names agents from their
// token, for /add-agent, and reads owners fresh, for pairing.
type Directory struct {
	names       Names
	static      *Static
	cache       *Cache
	registry    *registryResolver
	standard    *standardResolver
	callers     *callers
	collections []collection
	deadline    resolveDeadline
}

type collection struct {
	chainID uint64
	address common.Address
	label   string
}

// New builds the resolvers from opts and the static agents. It checks the
// options and dials nothing: chains are dialled on first use.
func New(opts Options, static []Agent) (*Directory, error) {
	names, err := NewNames(opts.BaseDomains)
	if err != nil {
		return nil, err
	}
	st, err := NewStatic(names, static)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With(logKeyComponent, "ens")
	timeout := opts.RPCTimeout
	if timeout <= 0 {
		timeout = DefaultRPCTimeout
	}

	urls, registries, err := chainSettings(opts)
	if err != nil {
		return nil, err
	}
	ensReg := common.HexToAddress(ENSRegistryAddress)
	if opts.ENSRegistry != "" {
		if !common.IsHexAddress(opts.ENSRegistry) {
			return nil, fmt.Errorf("ens: ENS registry %q is not an address", opts.ENSRegistry)
		}
		ensReg = common.HexToAddress(opts.ENSRegistry)
	}
	textKeys := opts.TextKeys
	if len(textKeys) == 0 {
		textKeys = DefaultTextKeys
	}
	if slices.Contains(textKeys, "") {
		return nil, errors.New("ens: text_keys has an empty key")
	}
	colls, err := checkCollections(opts.Collections)
	if err != nil {
		return nil, err
	}
	cs := newCallers(opts.Dial, urls, timeout)
	deadline := resolveDeadline(opts.ResolveTimeout)
	if deadline <= 0 {
		deadline = resolveDeadline(DefaultResolveTimeout)
	}
	d := &Directory{
		names:       names,
		static:      st,
		callers:     cs,
		collections: colls,
		deadline:    deadline,
		registry:    &registryResolver{names: names, callers: cs, registries: registries, timeout: timeout, log: log},
		standard: &standardResolver{
			names: names, callers: cs, registry: ensReg, textKeys: slices.Clone(textKeys), timeout: timeout,
			ccip: ccipReader{client: newGatewayClient(opts.Gateway, timeout), timeout: timeout, allowHTTP: opts.Gateway.AllowHTTP}, log: log,
		},
	}
	d.cache = NewCache(chainResolver{d.registry, d.standard, deadline}, names, CacheConfig{
		TTL: opts.CacheTTL, NegativeTTL: opts.NegativeTTL, StaleMax: opts.StaleMax, Logger: log, Now: opts.Now,
	})
	return d, nil
}

// chainSettings reads the chains of opts: the RPC URL and the 6022
// registry of each (a public default where there is one), mainnet's
// included.
func chainSettings(opts Options) (map[uint64]string, map[uint64]common.Address, error) {
	urls := map[uint64]string{}
	registries := map[uint64]common.Address{}
	for id, addr := range DefaultRegistries {
		registries[id] = common.HexToAddress(addr)
	}
	seen := map[uint64]bool{}
	for _, ch := range opts.Chains {
		if ch.ChainID == 0 {
			return nil, nil, errors.New("ens: a chain has no chain_id")
		}
		if seen[ch.ChainID] {
			return nil, nil, fmt.Errorf("ens: chain %d is listed twice", ch.ChainID)
		}
		seen[ch.ChainID] = true
		if ch.RPCURL != "" {
			urls[ch.ChainID] = ch.RPCURL
		}
		switch {
		case ch.Registry != "":
			if !common.IsHexAddress(ch.Registry) {
				return nil, nil, fmt.Errorf("ens: chain %d: registry %q is not an address", ch.ChainID, ch.Registry)
			}
			registries[ch.ChainID] = common.HexToAddress(ch.Registry)
		case registries[ch.ChainID] == (common.Address{}):
			return nil, nil, fmt.Errorf("ens: chain %d: no registry address and no public default for that chain", ch.ChainID)
		}
	}
	if opts.MainnetRPCURL != "" {
		if u, ok := urls[mainnetChainID]; ok && u != opts.MainnetRPCURL {
			return nil, nil, errors.New("ens: chain 1 has an rpc_url that differs from mainnet_rpc_url")
		}
		urls[mainnetChainID] = opts.MainnetRPCURL
	}
	return urls, registries, nil
}

func checkCollections(in []Collection) ([]collection, error) {
	out := make([]collection, 0, len(in))
	for _, c := range in {
		if c.ChainID == 0 || !common.IsHexAddress(c.Address) || !ValidLabel(c.Label) {
			return nil, fmt.Errorf("ens: collection %q: needs a chain_id, an address and a valid label (got %d, %q, %q)",
				c.Label, c.ChainID, c.Address, c.Label)
		}
		cc := collection{chainID: c.ChainID, address: common.HexToAddress(c.Address), label: lowerASCII(c.Label)}
		for _, prev := range out {
			if prev.chainID == cc.chainID && prev.address == cc.address {
				return nil, fmt.Errorf("ens: collection %s on chain %d is listed twice", c.Address, c.ChainID)
			}
		}
		out = append(out, cc)
	}
	return out, nil
}

var (
	_ Resolver = (*Directory)(nil)
	_ Resolver = (*Static)(nil)
	_ Resolver = (*Cache)(nil)
	_ Resolver = (*registryResolver)(nil)
	_ Resolver = (*standardResolver)(nil)
)

// chainResolver sends 6022 names to the registry and other names to
// standard ENS, each look-up within one deadline.
type chainResolver struct {
	registry *registryResolver
	standard *standardResolver
	deadline resolveDeadline
}

func (c chainResolver) Resolve(ctx context.Context, name string) (Agent, error) {
	n, err := c.registry.names.Parse(name)
	if err != nil {
		return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, err)
	}
	ctx, done := c.deadline.start(ctx)
	if n.Is6022() {
		a, err := c.registry.Resolve(ctx, name)
		return a, done(err)
	}
	a, err := c.standard.Resolve(ctx, name)
	return a, done(err)
}

// resolveDeadline is the one deadline of a whole look-up
// (ens.resolve_timeout): a resolver's many RPC calls, OffchainLookups and
// gateway URLs each have their own shorter bound (ens.rpc_timeout), and
// this keeps their sum bounded too.
type resolveDeadline time.Duration

// errResolveDeadline is the cause of a look-up's context ended by its
// deadline.
var errResolveDeadline = errors.New("the look-up took longer than ens.resolve_timeout")

// start returns ctx with the deadline, and the function that ends it and
// names the deadline in an error it caused.
func (d resolveDeadline) start(ctx context.Context) (context.Context, func(error) error) {
	ctx, cancel := context.WithTimeoutCause(ctx, time.Duration(d), errResolveDeadline)
	return ctx, func(err error) error {
		defer cancel()
		if err != nil && errors.Is(context.Cause(ctx), errResolveDeadline) {
			return fmt.Errorf("%w (%s, %s)", err, errResolveDeadline, time.Duration(d))
		}
		return err
	}
}

// Names returns the naming rules in use.
func (d *Directory) Names() Names { return d.names }

// Resolve returns the agent behind name, in any of its forms. The agent's
// EnsDomain is the canonical form. Errors name the name and the step that
// failed, and wrap ErrInvalidName, ErrNotFound or ErrNoRPC where they apply.
func (d *Directory) Resolve(ctx context.Context, name string) (Agent, error) {
	n, err := d.names.Parse(name)
	if err != nil {
		return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, err)
	}
	if a, ok := d.static.has(n.Canonical); ok {
		return a, nil
	}
	// The cache is asked by key, the name being parsed already. Errors name
	// the canonical form: the cache shares them between forms.
	return d.cache.resolve(ctx, n.Canonical, n.Canonical)
}

// ResolveToken names and reads the agent minted as token tokenID of a
// collection configured in [[ens.collections]] (for /add-agent
// <collection> <token-id> [chain-id]). chainID 0 means the one chain the
// collection is configured on. Errors wrap ErrNotFound when the token does
// not exist.
func (d *Directory) ResolveToken(ctx context.Context, chainID uint64, collectionAddr string, tokenID *big.Int) (Agent, error) {
	where := fmt.Sprintf("ens: agent %s #%s", collectionAddr, tokenID)
	if chainID != 0 {
		where += fmt.Sprintf(" on chain %d", chainID)
	}
	if !common.IsHexAddress(collectionAddr) {
		return Agent{}, fmt.Errorf("%s: %q is not a collection address: %w", where, collectionAddr, ErrInvalidName)
	}
	if tokenID == nil || tokenID.Sign() < 0 {
		return Agent{}, fmt.Errorf("%s: the token id must be a whole number: %w", where, ErrInvalidName)
	}
	coll, err := d.findCollection(chainID, common.HexToAddress(collectionAddr))
	if err != nil {
		return Agent{}, fmt.Errorf("%s: %w", where, err)
	}
	ctx, done := d.deadline.start(ctx)
	a, err := d.registry.resolveToken(ctx, coll.chainID, coll.address, coll.label, tokenID)
	if err = done(err); err != nil {
		return Agent{}, fmt.Errorf("%s: %w", where, err)
	}
	if s, ok := d.static.has(a.EnsDomain); ok {
		return s, nil
	}
	return a, nil
}

func (d *Directory) findCollection(chainID uint64, addr common.Address) (collection, error) {
	var found []collection
	for _, c := range d.collections {
		if c.address == addr && (chainID == 0 || c.chainID == chainID) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return collection{}, errors.New("the collection is not configured (add it under [[ens.collections]] with its chain_id and label)")
	default:
		return collection{}, errors.New("the collection is configured on several chains: give the chain id")
	}
}

// Owner reads the current owner of an agent's identity, bypassing the
// cache (for pairing checks): ownerOf on the agent's collection, the
// registry owner for a standard ENS name, the configured owner for a static
// agent. An empty result means no owner is known.
func (d *Directory) Owner(ctx context.Context, a Agent) (string, error) {
	ctx, done := d.deadline.start(ctx)
	owner, err := d.owner(ctx, a)
	return owner, done(err)
}

func (d *Directory) owner(ctx context.Context, a Agent) (string, error) {
	if a.ChainID != 0 && common.IsHexAddress(a.Collection) && a.TokenID != nil {
		owner, err := d.registry.ownerOf(ctx, a.ChainID, common.HexToAddress(a.Collection), a.TokenID)
		if err != nil {
			return "", fmt.Errorf("ens: owner of %q: %w", a.EnsDomain, err)
		}
		return owner, nil
	}
	n, err := d.names.Parse(a.EnsDomain)
	if err != nil {
		return "", fmt.Errorf("ens: owner of %q: %w", a.EnsDomain, err)
	}
	if s, ok := d.static.has(n.Canonical); ok {
		return s.Owner, nil
	}
	if n.Is6022() {
		fresh, err := d.registry.Resolve(ctx, n.Canonical)
		if err != nil {
			return "", err
		}
		return fresh.Owner, nil
	}
	owner, err := d.standard.ownerOf(ctx, n.Domain)
	if err != nil {
		return "", fmt.Errorf("ens: owner of %q: %w", a.EnsDomain, err)
	}
	return owner, nil
}

// Forget drops a name from the cache, so its next look-up reads the chain.
func (d *Directory) Forget(name string) { d.cache.Forget(name) }

// CacheStats returns the cache's counters (for metrics).
func (d *Directory) CacheStats() CacheStats { return d.cache.Stats() }

// Close closes the chain connections opened so far.
func (d *Directory) Close() error {
	d.callers.close()
	return nil
}
