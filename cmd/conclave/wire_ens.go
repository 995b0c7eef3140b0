package main

import (
	"log/slog"
	"maps"
	"strings"

	"github.com/conclavehq/conclave/ens"
)

// ensOptions maps [ens] onto the resolver's options.
func ensOptions(c ENSConfig, log *slog.Logger) ens.Options {
	o := ens.Options{
		BaseDomains:   c.BaseDomains,
		MainnetRPCURL: c.MainnetRPCURL,
		TextKeys:      c.TextKeys,
		CacheTTL:      c.CacheTTL.Duration,
		NegativeTTL:   c.NegativeTTL.Duration,
		StaleMax:      c.StaleMax.Duration,
		RPCTimeout:    c.RPCTimeout.Duration,
		Gateway:       ens.GatewayOptions{AllowHTTP: c.GatewayAllowHTTP, AllowPrivate: c.GatewayAllowPrivate},
		Logger:        log,

		ResolveTimeout: c.ResolveTimeout.Duration,
	}
	for _, ch := range c.Chains {
		o.Chains = append(o.Chains, ens.Chain{ChainID: ch.ChainID, RPCURL: ch.RPCURL, Registry: ch.Registry})
	}
	for _, col := range c.Collections {
		o.Collections = append(o.Collections, ens.Collection{ChainID: col.ChainID, Address: col.Address, Label: col.Label})
	}
	return o
}

// staticAgents turns [[agents]] into the static directory. A static
// agent's role is copied into its attributes, so templates read it the
// same way as an on-chain one.
func staticAgents(cfg []AgentConfig) []ens.Agent {
	out := make([]ens.Agent, 0, len(cfg))
	for _, a := range cfg {
		attrs := maps.Clone(a.Attributes)
		if attrs == nil {
			attrs = map[string]string{}
		}
		role := ens.ParseRole(a.Role)
		attrs["role"] = string(role)
		name := a.Name
		if name == "" {
			name, _, _ = strings.Cut(a.ENS, ".")
		}
		out = append(out, ens.Agent{
			Name:       name,
			EnsDomain:  a.ENS,
			Owner:      a.Owner,
			Addresses:  maps.Clone(a.Addresses),
			Attributes: attrs,
			Role:       role,
			CloneOf:    strings.ToLower(a.CloneOf),
			Avatar:     a.Avatar,
			URL:        a.URL,
		})
	}
	return out
}
