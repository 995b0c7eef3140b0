package ens_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/ens"
)

// FuzzParseName parses arbitrary names, as mentions and /add-agent bring
// them: a name is either refused with ErrInvalidName, or parsed into a
// lowercase form made of valid labels that parses back to itself, whose
// forms all parse to the same canonical name, and whose namehash does not
// depend on the spelling's case.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{
		"claudine.acme.137.protocol6022.eth", "Claudine.ACME.137.6022.eth", "alice.eth", "eth", "", ".",
		"a..eth", "-a.eth", "a-.eth", "x.y.0137.protocol6022.eth", "x.y.18446744073709551616.6022.eth",
		"é.eth", "a.b.1.protocol6022.eth.", strings.Repeat("a", 64) + ".eth", "@claudine.acme.137.6022.eth",
		"a_b.eth", "UPPER.ETH", "a.b.c.d.e.f.eth",
	} {
		f.Add(s)
	}
	names, err := ens.NewNames(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := names.Parse(s)
		if err != nil {
			if !errors.Is(err, ens.ErrInvalidName) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrInvalidName", s, err)
			}
			return
		}
		if n.Domain != strings.ToLower(s) {
			t.Fatalf("Parse(%q).Domain = %q, want the name lowercased", s, n.Domain)
		}
		for _, l := range strings.Split(n.Canonical, ".") {
			if !ens.ValidLabel(l) || l != strings.ToLower(l) {
				t.Fatalf("Parse(%q).Canonical = %q has label %q", s, n.Canonical, l)
			}
		}
		if len(n.Forms) == 0 || n.Forms[0] != n.Canonical || !slices.Contains(n.Forms, n.Domain) {
			t.Fatalf("Parse(%q): forms %q, canonical %q, domain %q", s, n.Forms, n.Canonical, n.Domain)
		}
		for _, form := range n.Forms {
			again, err := names.Parse(form)
			if err != nil || again.Canonical != n.Canonical || again.ChainID != n.ChainID {
				t.Fatalf("form %q of %q parses to %+v, %v", form, s, again, err)
			}
		}
		if n.Is6022() != (n.Agent != "" && n.Collection != "" && n.Base != "") {
			t.Fatalf("Parse(%q) = %+v: a 6022 name needs its parts", s, n)
		}
		upper, err := names.Parse(strings.ToUpper(s))
		if err != nil || ens.Namehash(upper.Canonical) != ens.Namehash(n.Canonical) {
			t.Fatalf("%q and its upper case resolve to different nodes (%v)", s, err)
		}
	})
}
