package enstest_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/ens/enstest"
)

func TestDiff(t *testing.T) {
	base := ens.Agent{
		Name: "claudine", EnsDomain: "claudine.acme.137.protocol6022.eth", Role: ens.RoleExpert,
		Attributes: map[string]string{"role": "expert"}, TokenID: big.NewInt(1),
	}
	tests := []struct {
		name   string
		change func(*ens.Agent)
		want   string
	}{
		{"equal", func(*ens.Agent) {}, ""},
		{"nil and empty maps are equal", func(a *ens.Agent) { a.Addresses = map[string]string{} }, ""},
		{"name", func(a *ens.Agent) { a.Name = "x" }, "Name = x"},
		{"role", func(a *ens.Agent) { a.Role = ens.RoleClone }, "Role = clone"},
		{"token id", func(a *ens.Agent) { a.TokenID = big.NewInt(2) }, "TokenID = 2"},
		{"no token id", func(a *ens.Agent) { a.TokenID = nil }, "TokenID = <nil>"},
		{"attribute", func(a *ens.Agent) { a.Attributes = map[string]string{"role": "human"} }, "Attributes = map[role:human]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := base
			got.Attributes = map[string]string{"role": "expert"}
			tt.change(&got)
			d := enstest.Diff(got, base)
			if tt.want == "" && d != "" || tt.want != "" && !strings.Contains(d, tt.want) {
				t.Errorf("Diff = %q, want %q", d, tt.want)
			}
		})
	}
}
