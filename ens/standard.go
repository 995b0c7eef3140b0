package ens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// ENSRegistryAddress is the ENS registry on Ethereum mainnet.
const ENSRegistryAddress = "0x00000000000C2E074eC69A0dFb2997BA6C7d2e1e"

// mainnetChainID keys the mainnet connection among the chains.
const mainnetChainID = 1

// DefaultTextKeys are the text records read into Attributes by default.
var DefaultTextKeys = []string{"role", "mission", "expertise", "description", "avatar", "url"}

// extendedResolverID is ENSIP-10's IExtendedResolver interface id.
var extendedResolverID = [4]byte{0x90, 0x61, 0xb9, 0x23}

// standardResolver resolves .eth names through standard ENS on Ethereum: the
// registry's resolver for the name (or, with ENSIP-10, for its closest
// parent), followed through CCIP-Read. 6022 names are not its business
// (ErrNotFound): they resolve on their own chain.
type standardResolver struct {
	names    Names
	callers  *callers
	registry common.Address
	textKeys []string
	timeout  time.Duration
	ccip     ccipReader
	log      *slog.Logger
}

// Resolve reads addr, the configured text records and the registry owner.
// Errors wrap ErrNotFound when no resolver or no record exists, ErrNoRPC
// when no mainnet RPC URL is configured.
func (s *standardResolver) Resolve(ctx context.Context, name string) (Agent, error) {
	n, err := s.names.Parse(name)
	if err != nil {
		return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, err)
	}
	if n.Is6022() {
		return Agent{}, fmt.Errorf("ens: resolve %q: 6022 names resolve on their own chain: %w", name, ErrNotFound)
	}
	a, err := s.resolve(ctx, n)
	if err != nil {
		return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, err)
	}
	return a, nil
}

func (s *standardResolver) registryContract(ctx context.Context) (contract, error) {
	caller, err := s.callers.get(ctx, mainnetChainID)
	if errors.Is(err, ErrNoRPC) {
		return contract{}, fmt.Errorf("%w for Ethereum mainnet (ens.mainnet_rpc_url is empty)", ErrNoRPC)
	}
	if err != nil {
		return contract{}, err
	}
	return contract{caller: caller, address: s.registry, abi: &ensRegistry, timeout: s.timeout}, nil
}

func (s *standardResolver) resolve(ctx context.Context, n Name) (Agent, error) {
	reg, err := s.registryContract(ctx)
	if err != nil {
		return Agent{}, err
	}
	node := Namehash(n.Domain)
	resolverAddr, exact, err := s.findResolver(ctx, reg, n.Domain)
	if err != nil {
		return Agent{}, err
	}
	if resolverAddr == (common.Address{}) {
		return Agent{}, fmt.Errorf("ENS registry: no resolver for the name or its parents: %w", ErrNotFound)
	}
	res := contract{caller: reg.caller, address: resolverAddr, abi: &ensResolver, timeout: s.timeout}
	var extended bool
	if err := res.call(ctx, &extended, "supportsInterface", extendedResolverID); err != nil && !isRevert(err) {
		return Agent{}, fmt.Errorf("supportsInterface on resolver %s: %w", resolverAddr.Hex(), err)
	}
	if !exact && !extended {
		return Agent{}, fmt.Errorf("ENS: the parent's resolver %s is not a wildcard resolver: %w", resolverAddr.Hex(), ErrNotFound)
	}
	dnsName, err := dnsEncode(n.Domain)
	if err != nil {
		return Agent{}, err
	}
	rr := recordReader{ccip: s.ccip, resolver: res, node: node, dnsName: dnsName, extended: extended}

	var (
		wg       sync.WaitGroup
		addr     common.Address
		owner    common.Address
		addrErr  error
		ownerErr error
		texts    = make([]string, len(s.textKeys))
		textErrs = make([]error, len(s.textKeys))
	)
	wg.Go(func() { addrErr = rr.read(ctx, &addr, "addr", node) })
	wg.Go(func() { ownerErr = reg.call(ctx, &owner, "owner", node) })
	for i, key := range s.textKeys {
		wg.Go(func() { textErrs[i] = rr.read(ctx, &texts[i], "text", node, key) })
	}
	wg.Wait()
	if addrErr != nil {
		return Agent{}, fmt.Errorf("addr on resolver %s: %w", resolverAddr.Hex(), addrErr)
	}
	if ownerErr != nil {
		return Agent{}, fmt.Errorf("ENS registry owner: %w", ownerErr)
	}
	for i, err := range textErrs {
		if err != nil {
			return Agent{}, fmt.Errorf("text(%s) on resolver %s: %w", s.textKeys[i], resolverAddr.Hex(), err)
		}
	}

	a := Agent{
		Name:       n.FirstLabel(),
		EnsDomain:  n.Canonical,
		Addresses:  map[string]string{},
		Attributes: map[string]string{},
	}
	if addr != (common.Address{}) {
		a.Addresses["evm"] = addr.Hex()
	}
	if owner != (common.Address{}) {
		a.Owner = owner.Hex()
	}
	for i, key := range s.textKeys {
		if texts[i] != "" {
			a.Attributes[key] = texts[i]
		}
	}
	if len(a.Addresses) == 0 && len(a.Attributes) == 0 {
		return Agent{}, fmt.Errorf("resolver %s has no address or text record for the name: %w", resolverAddr.Hex(), ErrNotFound)
	}
	a.Role = ParseRole(a.Attributes["role"])
	a.Avatar = a.Attributes["avatar"]
	a.URL = a.Attributes["url"]
	return a, nil
}

// findResolver asks the registry for the name's resolver, then for each
// parent's (ENSIP-10). exact reports whether it was the name's own.
func (s *standardResolver) findResolver(ctx context.Context, reg contract, name string) (common.Address, bool, error) {
	for candidate := name; candidate != ""; {
		var addr common.Address
		if err := reg.call(ctx, &addr, "resolver", Namehash(candidate)); err != nil {
			return common.Address{}, false, fmt.Errorf("ENS registry resolver(%s): %w", candidate, err)
		}
		if addr != (common.Address{}) {
			return addr, candidate == name, nil
		}
		_, candidate, _ = strings.Cut(candidate, ".")
	}
	return common.Address{}, false, nil
}

// ownerOf reads the name's registry owner, with no cache.
func (s *standardResolver) ownerOf(ctx context.Context, name string) (string, error) {
	reg, err := s.registryContract(ctx)
	if err != nil {
		return "", err
	}
	var owner common.Address
	if err := reg.call(ctx, &owner, "owner", Namehash(name)); err != nil {
		return "", fmt.Errorf("ENS registry owner: %w", err)
	}
	if owner == (common.Address{}) {
		return "", nil
	}
	return owner.Hex(), nil
}

// recordReader reads one record from a resolver, through resolve(bytes,
// bytes) when it is a wildcard resolver, following CCIP-Read.
type recordReader struct {
	ccip     ccipReader
	resolver contract
	node     common.Hash
	dnsName  []byte
	extended bool
}

// read fills out with method(args). A record the resolver does not have
// (a revert, an empty answer, a gateway's 404) leaves out unchanged.
func (rr recordReader) read(ctx context.Context, out any, method string, args ...any) error {
	data, err := ensResolver.Pack(method, args...)
	if err != nil {
		return err
	}
	if rr.extended {
		if data, err = ensResolver.Pack("resolve", rr.dnsName, data); err != nil {
			return err
		}
	}
	res, err := rr.ccip.call(ctx, rr.resolver, data)
	if err == nil && rr.extended {
		var inner []byte
		if err = unpack(&ensResolver, &inner, "resolve", res); err == nil {
			res = inner
		}
	}
	if err == nil {
		err = unpack(&ensResolver, out, method, res)
	}
	if err != nil && (isRevert(err) || errors.Is(err, ErrNotFound)) {
		return nil
	}
	return err
}
