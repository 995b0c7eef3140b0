package ens

import (
	"context"
	"fmt"
	"maps"
	"math/big"
)

// Static is the directory of agents declared in the config. It needs no
// chain and answers every form of a name.
type Static struct {
	names  Names
	agents map[string]Agent // by canonical name
}

// NewStatic indexes the configured agents. Each EnsDomain must be a valid
// name and appear once (in any form); a CloneOf must be a valid name, and is
// kept in canonical form. An agent's role is copied into Attributes["role"];
// with no role, Attributes["role"] is parsed instead.
func NewStatic(names Names, agents []Agent) (*Static, error) {
	s := &Static{names: names, agents: make(map[string]Agent, len(agents))}
	for _, a := range agents {
		n, err := names.Parse(a.EnsDomain)
		if err != nil {
			return nil, fmt.Errorf("ens: static agent %q: %w", a.EnsDomain, err)
		}
		if _, dup := s.agents[n.Canonical]; dup {
			return nil, fmt.Errorf("ens: static agent %q is declared twice", a.EnsDomain)
		}
		if a.CloneOf != "" {
			human, err := names.Parse(a.CloneOf)
			if err != nil {
				return nil, fmt.Errorf("ens: static agent %q: clone of %q: %w", a.EnsDomain, a.CloneOf, err)
			}
			a.CloneOf = human.Canonical
		}
		s.agents[n.Canonical] = normaliseStatic(a, n)
	}
	return s, nil
}

func normaliseStatic(a Agent, n Name) Agent {
	a.EnsDomain = n.Canonical
	if a.Name == "" {
		a.Name = n.FirstLabel()
	}
	a.Attributes = maps.Clone(a.Attributes)
	if a.Attributes == nil {
		a.Attributes = map[string]string{}
	}
	if a.Role == "" {
		a.Role = ParseRole(attribute(a.Attributes, "role"))
	} else {
		a.Role = ParseRole(string(a.Role))
	}
	a.Attributes["role"] = string(a.Role)
	a.Addresses = maps.Clone(a.Addresses)
	if a.Addresses == nil {
		a.Addresses = map[string]string{}
	}
	return a
}

// Resolve returns the configured agent. Errors wrap ErrInvalidName or
// ErrNotFound.
func (s *Static) Resolve(_ context.Context, name string) (Agent, error) {
	n, err := s.names.Parse(name)
	if err != nil {
		return Agent{}, fmt.Errorf("ens: resolve %q: %w", name, err)
	}
	a, ok := s.agents[n.Canonical]
	if !ok {
		return Agent{}, fmt.Errorf("ens: resolve %q: not in the static directory: %w", name, ErrNotFound)
	}
	return copyAgent(a), nil
}

// has reports whether the canonical name is a configured agent.
func (s *Static) has(canonical string) (Agent, bool) {
	a, ok := s.agents[canonical]
	return copyAgent(a), ok
}

// copyAgent returns a with its maps and token id copied, so callers may
// change what they get without touching a cache or the directory.
func copyAgent(a Agent) Agent {
	a.Addresses = maps.Clone(a.Addresses)
	a.Attributes = maps.Clone(a.Attributes)
	if a.TokenID != nil {
		a.TokenID = new(big.Int).Set(a.TokenID)
	}
	return a
}

// attribute looks key up exactly, then case-insensitively, since attribute
// keys are kept as stored.
func attribute(attrs map[string]string, key string) string {
	if v, ok := attrs[key]; ok {
		return v
	}
	for k, v := range attrs {
		if lowerASCII(k) == key {
			return v
		}
	}
	return ""
}
