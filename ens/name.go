package ens

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// DefaultBaseDomains are the bases of 6022 agent names when the config names
// none: the documented one first, so it is the canonical form.
var DefaultBaseDomains = []string{"protocol6022.eth", "6022.eth"}

const maxLabelLen = 63

// Names knows the configured base domains and parses agent names against
// them. The zero value is not usable; build one with NewNames.
type Names struct {
	bases []string
}

// NewNames validates and normalises the base domains (ens.base_domains). An
// empty list means DefaultBaseDomains. The first base gives the canonical
// form of every 6022 name.
func NewNames(bases []string) (Names, error) {
	if len(bases) == 0 {
		bases = DefaultBaseDomains
	}
	out := make([]string, 0, len(bases))
	seen := make(map[string]bool, len(bases))
	for _, b := range bases {
		labels, err := ethLabels(b)
		if err != nil {
			return Names{}, fmt.Errorf("ens: base domain %q: %w", b, err)
		}
		norm := strings.Join(labels, ".")
		if seen[norm] {
			return Names{}, fmt.Errorf("ens: base domain %q is listed twice", b)
		}
		seen[norm] = true
		out = append(out, norm)
	}
	return Names{bases: out}, nil
}

// Name is a parsed, normalised agent name.
type Name struct {
	// Domain is the name as given, lowercased.
	Domain string
	// Canonical is the name under the first base domain for a 6022 name,
	// else Domain. Storage keys and template directories use it.
	Canonical string
	// Forms lists the name under every configured base, canonical first (a
	// single entry, Domain, for other .eth names). A mention of any form
	// means the same agent.
	Forms []string

	// The parts of a 6022 name <agent>.<collection>.<chainId>.<base>; zero
	// for other .eth names.
	Agent, Collection string
	ChainID           uint64
	Base              string
}

// Is6022 reports whether the name has the 6022 form
// <agent>.<collection>.<chainId>.<base> under a configured base.
func (n Name) Is6022() bool { return n.ChainID != 0 }

// FirstLabel returns the leftmost label: the agent's short name.
func (n Name) FirstLabel() string {
	first, _, _ := strings.Cut(n.Domain, ".")
	return first
}

// Parse validates s and normalises it to lowercase. Names are ASCII letters,
// digits and hyphens in dot-separated labels of 1–63 characters with no
// leading or trailing hyphen, ending in .eth. Errors wrap ErrInvalidName.
func (ns Names) Parse(s string) (Name, error) {
	labels, err := ethLabels(s)
	if err != nil {
		return Name{}, err
	}
	domain := strings.Join(labels, ".")
	n := Name{Domain: domain, Canonical: domain, Forms: []string{domain}}
	for _, base := range ns.bases {
		prefix, ok := strings.CutSuffix(domain, "."+base)
		if !ok {
			continue
		}
		parts := strings.Split(prefix, ".")
		if len(parts) != 3 {
			continue
		}
		chainID, ok := parseChainID(parts[2])
		if !ok {
			continue
		}
		n.Agent, n.Collection, n.ChainID, n.Base = parts[0], parts[1], chainID, base
		n.Forms = make([]string, len(ns.bases))
		for i, b := range ns.bases {
			n.Forms[i] = prefix + "." + b
		}
		n.Canonical = n.Forms[0]
		break
	}
	return n, nil
}

// name6022 builds <agent>.<collection>.<chainId>.<canonical base>.
func (ns Names) name6022(agent, collection string, chainID uint64) (Name, error) {
	return ns.Parse(agent + "." + collection + "." + strconv.FormatUint(chainID, 10) + "." + ns.bases[0])
}

// parseChainID accepts a chain id label: decimal digits, no leading zero,
// not zero, within uint64.
func parseChainID(label string) (uint64, bool) {
	if label == "" || label[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(label); i++ {
		if label[i] < '0' || label[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseUint(label, 10, 64)
	return id, err == nil
}

// ethLabels lowercases s and splits it into validated labels; the last one
// must be "eth" and there must be at least one more.
func ethLabels(s string) ([]string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return nil, fmt.Errorf("%w: name not supported (only ASCII letters, digits and hyphens)", ErrInvalidName)
		}
	}
	if s == "" {
		return nil, fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	labels := strings.Split(lowerASCII(s), ".")
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return nil, err
		}
	}
	if len(labels) < 2 || labels[len(labels)-1] != "eth" {
		return nil, fmt.Errorf("%w: name not supported (only .eth names)", ErrInvalidName)
	}
	return labels, nil
}

// checkLabel applies the label rules to an already lowercased label.
func checkLabel(l string) error {
	switch {
	case l == "":
		return fmt.Errorf("%w: empty label", ErrInvalidName)
	case len(l) > maxLabelLen:
		return fmt.Errorf("%w: label %q is longer than %d characters", ErrInvalidName, l, maxLabelLen)
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Errorf("%w: label %q starts or ends with a hyphen", ErrInvalidName, l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("%w: label %q has %q (only a-z, 0-9 and -)", ErrInvalidName, l, c)
		}
	}
	return nil
}

// ValidLabel reports whether l, lowercased, is a valid label.
func ValidLabel(l string) bool { return checkLabel(lowerASCII(l)) == nil }

// Namehash computes the EIP-137 node of a name. It hashes the name as given:
// normalise it first (Names.Parse).
func Namehash(name string) common.Hash {
	var node common.Hash
	if name == "" {
		return node
	}
	labels := strings.Split(name, ".")
	for i := len(labels) - 1; i >= 0; i-- {
		label := crypto.Keccak256Hash([]byte(labels[i]))
		node = crypto.Keccak256Hash(node[:], label[:])
	}
	return node
}

// dnsEncode returns the DNS wire format of a normalised name, as ENSIP-10's
// resolve(bytes,bytes) expects.
func dnsEncode(name string) ([]byte, error) {
	out := make([]byte, 0, len(name)+2)
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 255 {
			return nil, errors.New("name cannot be DNS-encoded")
		}
		out = append(out, byte(len(l))) // #nosec G115 -- len(l) <= 255, checked above
		out = append(out, l...)
	}
	return append(out, 0), nil
}
