// Package enstest is the test support of identities: Diff compares
// resolved agents, and Chain is the one simulated chain of the tests that
// run no EVM (ens, cmd/conclave).
package enstest

import (
	"fmt"
	"maps"
	"strings"

	"github.com/conclavehq/conclave/ens"
)

// Diff describes how got differs from want, field by field; it is empty
// when they are equal. Nil and empty maps are equal.
func Diff(got, want ens.Agent) string {
	var d []string
	field := func(name string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s = %v, want %v", name, g, w))
		}
	}
	field("Name", got.Name, want.Name)
	field("EnsDomain", got.EnsDomain, want.EnsDomain)
	field("Owner", got.Owner, want.Owner)
	field("Role", got.Role, want.Role)
	field("CloneOf", got.CloneOf, want.CloneOf)
	field("Avatar", got.Avatar, want.Avatar)
	field("URL", got.URL, want.URL)
	field("ChainID", got.ChainID, want.ChainID)
	field("Collection", got.Collection, want.Collection)
	if (got.TokenID == nil) != (want.TokenID == nil) || got.TokenID != nil && got.TokenID.Cmp(want.TokenID) != 0 {
		d = append(d, fmt.Sprintf("TokenID = %v, want %v", got.TokenID, want.TokenID))
	}
	if !maps.Equal(got.Addresses, want.Addresses) {
		d = append(d, fmt.Sprintf("Addresses = %v, want %v", got.Addresses, want.Addresses))
	}
	if !maps.Equal(got.Attributes, want.Attributes) {
		d = append(d, fmt.Sprintf("Attributes = %v, want %v", got.Attributes, want.Attributes))
	}
	return strings.Join(d, "; ")
}
