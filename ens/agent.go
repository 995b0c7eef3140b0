// Package ens resolves agent identities: ENS names of the form
// <agent>.<collection>.<chainId>.<base>, backed by NFTs in 6022 agent
// collections, and other .eth names through standard ENS.
//
// Resolvers are tried in order: the static directory from the config, the
// 6022 registry on the chain named by the name, then standard ENS. A cache
// with the same method set sits in front of the chain resolvers.
package ens

import (
	"context"
	"errors"
	"math/big"
	"strings"
)

// Role is what an agent does in a conversation.
type Role string

// The roles. Any other value read from an identity counts as RoleExpert.
const (
	RoleFacilitator Role = "facilitator"
	RoleExpert      Role = "expert"
	RoleClone       Role = "clone"
	RoleHuman       Role = "human"
)

// ParseRole maps an attribute value to a Role, case-insensitively and
// ignoring surrounding white space (attributes are typed by people);
// unknown values are experts.
func ParseRole(s string) Role {
	switch r := Role(lowerASCII(strings.TrimSpace(s))); r {
	case RoleFacilitator, RoleExpert, RoleClone, RoleHuman:
		return r
	}
	return RoleExpert
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ErrNotFound reports that no resolver knows the name.
var ErrNotFound = errors.New("agent not found")

// ErrInvalidName reports a name that breaks the naming rules (bad label,
// non-ASCII, not under .eth). Nothing was looked up.
var ErrInvalidName = errors.New("invalid agent name")

// ErrNoRPC reports that the chain a name points at has no RPC URL
// configured, so it could not be looked up ("no RPC for chain 137").
var ErrNoRPC = errors.New("no RPC")

// Agent is a resolved identity.
type Agent struct {
	// Name is the NFT's agent name, else the first label.
	Name string
	// EnsDomain is the full, normalised ENS name.
	EnsDomain string
	// Owner is the NFT owner's address, EIP-55 checksummed (empty when
	// unknown).
	Owner string
	// Addresses maps an address type to its value; "evm" is the agent's
	// wallet.
	Addresses map[string]string
	// Attributes are the NFT attributes (role, mission, expertise, …), keys
	// as stored.
	Attributes map[string]string
	// Role is the attribute "role" parsed with ParseRole.
	Role Role
	// CloneOf is the ENS name of the human agent a clone was forked from.
	CloneOf string
	// Avatar and URL come from the registry's text records (optional).
	Avatar, URL string

	// The canonical on-chain identity; zero for static and standard-ENS
	// agents.
	ChainID    uint64
	Collection string // checksummed collection address
	TokenID    *big.Int
}

// Attribute returns the attribute key (lowercase), whatever the case it
// is stored under: on-chain metadata writes Mission as often as mission.
func (a Agent) Attribute(key string) string { return attribute(a.Attributes, key) }

// Resolver turns an agent name into an identity.
type Resolver interface {
	// Resolve returns the identity behind name. Errors wrap ErrNotFound
	// when no resolver knows the name; other errors name the name and the
	// step that failed.
	Resolve(ctx context.Context, name string) (Agent, error)
}
