package ens

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// DefaultRegistries are the public AgentEnsRegistry deployments, by chain.
var DefaultRegistries = map[uint64]string{
	137:   "0x23dbc335f966d9869940FB55f61E919118AAD236", // Polygon
	80002: "0x37c5879529E5b0241663ed40feeebb2326BBEE0d", // Polygon Amoy
}

// registryResolver resolves 6022 names through the AgentEnsRegistry of the chain
// named by the name's chainId label, and the agent's AgentCollectionV1.
// Names of any other shape are not its business (ErrNotFound).
type registryResolver struct {
	names      Names
	callers    *callers
	registries map[uint64]common.Address
	timeout    time.Duration
	log        *slog.Logger
}

// Resolve looks the name's node up in the registry (under each configured
// base, canonical first), then reads the token. Errors name the step and the
// chain, and wrap ErrNotFound when the registry or collection does not know
// the agent, ErrNoRPC when the chain has no RPC URL.
func (r *registryResolver) Resolve(ctx context.Context, name string) (Agent, error) {
	n, err := r.names.Parse(name)
	if err != nil {
		return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, err)
	}
	if !n.Is6022() {
		return Agent{}, fmt.Errorf("ens: resolve %q: not a 6022 agent name: %w", name, ErrNotFound)
	}
	a, err := r.resolve(ctx, n)
	if err != nil {
		return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, err)
	}
	return a, nil
}

func (r *registryResolver) resolve(ctx context.Context, n Name) (Agent, error) {
	reg, err := r.registry(ctx, n.ChainID)
	if err != nil {
		return Agent{}, err
	}
	var ref struct {
		Collection common.Address
		TokenId    *big.Int // named after the ABI output "tokenId"
	}
	var node common.Hash
	for _, form := range n.Forms {
		node = Namehash(form)
		if err := reg.call(ctx, &ref, "agentRef", node); err != nil {
			return Agent{}, fmt.Errorf("agentRef on chain %d: %w", n.ChainID, err)
		}
		if ref.Collection != (common.Address{}) {
			break
		}
	}
	if ref.Collection == (common.Address{}) {
		return Agent{}, fmt.Errorf("agentRef on chain %d: the registry has no such name: %w", n.ChainID, ErrNotFound)
	}
	return r.readAgent(ctx, reg, n, node, ref.Collection, ref.TokenId, nil)
}

// registry returns the chain's AgentEnsRegistry.
func (r *registryResolver) registry(ctx context.Context, chainID uint64) (contract, error) {
	caller, err := r.callers.get(ctx, chainID)
	if err != nil {
		return contract{}, err
	}
	addr, ok := r.registries[chainID]
	if !ok {
		return contract{}, fmt.Errorf("no 6022 registry address for chain %d", chainID)
	}
	return contract{caller: caller, address: addr, abi: &agentRegistry, timeout: r.timeout}, nil
}

// readAgent reads token tokenID of collection, and the name's text records
// at node, into an Agent named n. info, when not nil, was already read.
func (r *registryResolver) readAgent(ctx context.Context, reg contract, n Name, node common.Hash,
	collection common.Address, tokenID *big.Int, info *agentInformation) (Agent, error) {
	coll := contract{caller: reg.caller, address: collection, abi: &agentCollection, timeout: r.timeout}
	var (
		wg                sync.WaitGroup
		infoErr, ownerErr error
		avatarErr, urlErr error
		owner             common.Address
		avatar, url       string
		chain             = n.ChainID
		token             = tokenID.String()
		collectionHex     = collection.Hex()
		tokenMissing      = func(step string, err error) error { return r.tokenErr(step, chain, collectionHex, token, err) }
		optionalText      = func(key string, v *string, errp *error) { *errp = optional(reg.call(ctx, v, "text", node, key)) }
	)
	if info == nil {
		wg.Go(func() { info, infoErr = readInformation(ctx, coll, tokenID) })
	}
	wg.Go(func() { ownerErr = coll.call(ctx, &owner, "ownerOf", tokenID) })
	wg.Go(func() { optionalText("avatar", &avatar, &avatarErr) })
	wg.Go(func() { optionalText("url", &url, &urlErr) })
	wg.Wait()
	switch {
	case infoErr != nil:
		return Agent{}, tokenMissing("informationOf", infoErr)
	case ownerErr != nil:
		return Agent{}, tokenMissing("ownerOf", ownerErr)
	case avatarErr != nil:
		return Agent{}, fmt.Errorf("text(avatar) on chain %d: %w", chain, avatarErr)
	case urlErr != nil:
		return Agent{}, fmt.Errorf("text(url) on chain %d: %w", chain, urlErr)
	}

	a := Agent{
		Name:       info.Name,
		EnsDomain:  n.Canonical,
		Addresses:  make(map[string]string, len(info.Addresses)),
		Attributes: make(map[string]string, len(info.Attributes)),
		Avatar:     avatar,
		URL:        url,
		ChainID:    chain,
		Collection: collectionHex,
		TokenID:    new(big.Int).Set(tokenID),
	}
	if a.Name == "" {
		a.Name = n.FirstLabel()
	}
	if owner != (common.Address{}) {
		a.Owner = owner.Hex()
	}
	for _, ad := range info.Addresses {
		if _, dup := a.Addresses[ad.AddressType]; !dup {
			a.Addresses[ad.AddressType] = ad.Value
		}
	}
	for _, kv := range info.Attributes {
		a.Attributes[kv.Key] = kv.Value
	}
	a.Role = ParseRole(attribute(a.Attributes, "role"))
	if a.Avatar == "" {
		a.Avatar = imageAvatar(info.Images)
	}
	if info.CloneOf.IsSet && info.CloneOf.Value != nil {
		cloneOf, err := r.humanName(ctx, coll, n, info.CloneOf.Value)
		if err != nil {
			return Agent{}, err
		}
		a.CloneOf = cloneOf
	}
	return a, nil
}

// humanName returns the ENS name of the human agent a clone was forked
// from: the human token's name in the same collection. A human whose name
// cannot form a label is logged and left out.
func (r *registryResolver) humanName(ctx context.Context, coll contract, clone Name, humanToken *big.Int) (string, error) {
	var name string
	err := coll.call(ctx, &name, "nameOf", humanToken)
	if err != nil && !isRevert(err) {
		return "", fmt.Errorf("nameOf(%s) on chain %d: %w", humanToken, clone.ChainID, err)
	}
	human, perr := r.names.name6022(lowerASCII(name), clone.Collection, clone.ChainID)
	if err != nil || perr != nil {
		r.log.Warn("ens: clone's human agent has no usable name",
			logKeyName, clone.Canonical, logKeyToken, humanToken.String(), logKeyError, firstErr(err, perr))
		return "", nil
	}
	return human.Canonical, nil
}

// tokenErr explains a failed read of a token. A revert means the token does
// not exist (burnt, or a stale registry entry), so the agent is not found.
func (r *registryResolver) tokenErr(step string, chain uint64, collection, token string, err error) error {
	if isRevert(err) {
		return fmt.Errorf("%s(%s) of collection %s on chain %d reverted: %w", step, token, collection, chain, ErrNotFound)
	}
	return fmt.Errorf("%s(%s) of collection %s on chain %d: %w", step, token, collection, chain, err)
}

// ownerOf reads the token's owner from the chain, with no cache.
func (r *registryResolver) ownerOf(ctx context.Context, chainID uint64, collection common.Address, tokenID *big.Int) (string, error) {
	caller, err := r.callers.get(ctx, chainID)
	if err != nil {
		return "", err
	}
	coll := contract{caller: caller, address: collection, abi: &agentCollection, timeout: r.timeout}
	var owner common.Address
	if err := coll.call(ctx, &owner, "ownerOf", tokenID); err != nil {
		return "", r.tokenErr("ownerOf", chainID, collection.Hex(), tokenID.String(), err)
	}
	return owner.Hex(), nil
}

// resolveToken reads token tokenID of a configured collection and names it
// <nft name>.<label>.<chainId>.<canonical base>.
func (r *registryResolver) resolveToken(ctx context.Context, chainID uint64, collection common.Address, label string, tokenID *big.Int) (Agent, error) {
	reg, err := r.registry(ctx, chainID)
	if err != nil {
		return Agent{}, err
	}
	coll := contract{caller: reg.caller, address: collection, abi: &agentCollection, timeout: r.timeout}
	info, err := readInformation(ctx, coll, tokenID)
	if err != nil {
		return Agent{}, r.tokenErr("informationOf", chainID, collection.Hex(), tokenID.String(), err)
	}
	n, err := r.names.name6022(lowerASCII(info.Name), label, chainID)
	if err != nil {
		return Agent{}, fmt.Errorf("the token's name %q cannot form an ENS name: %w", info.Name, err)
	}
	return r.readAgent(ctx, reg, n, Namehash(n.Canonical), collection, tokenID, info)
}

// readInformation calls informationOf(tokenID).
func readInformation(ctx context.Context, coll contract, tokenID *big.Int) (*agentInformation, error) {
	// A single tuple output unpacks into the first field of a struct.
	var out struct{ Info agentInformation }
	if err := coll.call(ctx, &out, "informationOf", tokenID); err != nil {
		return nil, err
	}
	return &out.Info, nil
}

// imageAvatar picks the NFT image to show when the registry has no avatar
// record: "avatar", else "default"; a bare IPFS CID becomes ipfs://CID.
func imageAvatar(images []keyValue) string {
	for _, key := range []string{"avatar", "default"} {
		for _, kv := range images {
			if kv.Key != key || kv.Value == "" {
				continue
			}
			if strings.Contains(kv.Value, "://") {
				return kv.Value
			}
			return "ipfs://" + kv.Value
		}
	}
	return ""
}

// optional turns a revert into "no value": the record is optional and not
// every resolver implements it. Transport errors stay errors.
func optional(err error) error {
	if err != nil && isRevert(err) {
		return nil
	}
	return err
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
