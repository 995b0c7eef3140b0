package ens_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/ens"
)

func TestNamehash(t *testing.T) {
	// EIP-137's vectors, and one from the ENS documentation.
	tests := []struct {
		name, want string
	}{
		{"", "0x0000000000000000000000000000000000000000000000000000000000000000"},
		{"eth", "0x93cdeb708b7545dc668eb9280176169d1c33cfd8ed6f04690a0bcc88a93fc4ae"},
		{"foo.eth", "0xde9b09fd7c5f901e23a3f19fecc54828e9c848539801e86591bd9801b019f84f"},
		{"vitalik.eth", "0xee6c4522aab0003e8d14cd40a6af439055fd2577951148c14b6cea9a53475835"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ens.Namehash(tt.name).Hex(); got != tt.want {
				t.Errorf("Namehash(%q) = %s, want %s", tt.name, got, tt.want)
			}
		})
	}
}

func mustNames(t *testing.T, bases ...string) ens.Names {
	t.Helper()
	ns, err := ens.NewNames(bases)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func TestParse(t *testing.T) {
	ns := mustNames(t) // the defaults: protocol6022.eth, 6022.eth
	tests := []struct {
		in        string
		domain    string
		canonical string
		forms     []string
		chainID   uint64
	}{
		{
			in: "claudine.acme.137.protocol6022.eth", domain: "claudine.acme.137.protocol6022.eth",
			canonical: "claudine.acme.137.protocol6022.eth", chainID: 137,
			forms: []string{"claudine.acme.137.protocol6022.eth", "claudine.acme.137.6022.eth"},
		},
		{
			in: "Claudine.ACME.80002.6022.ETH", domain: "claudine.acme.80002.6022.eth",
			canonical: "claudine.acme.80002.protocol6022.eth", chainID: 80002,
			forms: []string{"claudine.acme.80002.protocol6022.eth", "claudine.acme.80002.6022.eth"},
		},
		{
			in: "monsieur-k.monsieur-k-enterprises.80002.protocol6022.eth", domain: "monsieur-k.monsieur-k-enterprises.80002.protocol6022.eth",
			canonical: "monsieur-k.monsieur-k-enterprises.80002.protocol6022.eth", chainID: 80002,
			forms: []string{"monsieur-k.monsieur-k-enterprises.80002.protocol6022.eth", "monsieur-k.monsieur-k-enterprises.80002.6022.eth"},
		},
		{in: "Vitalik.eth", domain: "vitalik.eth", canonical: "vitalik.eth", forms: []string{"vitalik.eth"}},
		// Shapes that are not 6022 names are other .eth names.
		{in: "acme.137.protocol6022.eth", domain: "acme.137.protocol6022.eth", canonical: "acme.137.protocol6022.eth", forms: []string{"acme.137.protocol6022.eth"}},
		{in: "a.acme.0137.6022.eth", domain: "a.acme.0137.6022.eth", canonical: "a.acme.0137.6022.eth", forms: []string{"a.acme.0137.6022.eth"}},
		{in: "a.acme.polygon.6022.eth", domain: "a.acme.polygon.6022.eth", canonical: "a.acme.polygon.6022.eth", forms: []string{"a.acme.polygon.6022.eth"}},
		{in: "a.b.c.137.6022.eth", domain: "a.b.c.137.6022.eth", canonical: "a.b.c.137.6022.eth", forms: []string{"a.b.c.137.6022.eth"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, err := ns.Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if n.Domain != tt.domain || n.Canonical != tt.canonical || n.ChainID != tt.chainID || !slices.Equal(n.Forms, tt.forms) {
				t.Errorf("Parse(%q) = %+v, want domain %q canonical %q chain %d forms %v", tt.in, n, tt.domain, tt.canonical, tt.chainID, tt.forms)
			}
			if n.Is6022() != (tt.chainID != 0) {
				t.Errorf("Is6022() = %v", n.Is6022())
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	ns := mustNames(t)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "empty name"},
		{"no tld", "claudine", "only .eth names"},
		{"other tld", "claudine.acme.com", "only .eth names"},
		{"bare eth", "eth", "only .eth names"},
		{"accented", "clàudine.acme.137.protocol6022.eth", "name not supported"},
		{"emoji", "🤖.eth", "name not supported"},
		{"cyrillic lookalike", "аlice.eth", "name not supported"},
		{"empty label", "claudine..137.protocol6022.eth", "empty label"},
		{"trailing dot", "claudine.eth.", "empty label"},
		{"leading hyphen", "-claudine.eth", "starts or ends with a hyphen"},
		{"trailing hyphen", "claudine-.eth", "starts or ends with a hyphen"},
		{"underscore", "clau_dine.eth", "only a-z, 0-9 and -"},
		{"space", "clau dine.eth", "only a-z, 0-9 and -"},
		{"at sign", "@claudine.eth", "only a-z, 0-9 and -"},
		{"long label", strings.Repeat("a", 64) + ".eth", "longer than 63"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ns.Parse(tt.in)
			if !errors.Is(err, ens.ErrInvalidName) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) error = %v, want ErrInvalidName with %q", tt.in, err, tt.want)
			}
		})
	}
	if _, err := ns.Parse(strings.Repeat("a", 63) + ".eth"); err != nil {
		t.Errorf("a 63-character label is valid: %v", err)
	}
}

func TestNamesBases(t *testing.T) {
	t.Run("one base", func(t *testing.T) {
		ns := mustNames(t, "6022.eth")
		n, err := ns.Parse("x.acme.137.6022.eth")
		if err != nil || !slices.Equal(n.Forms, []string{"x.acme.137.6022.eth"}) {
			t.Fatalf("Forms = %v, %v", n.Forms, err)
		}
		n, err = ns.Parse("x.acme.137.protocol6022.eth")
		if err != nil || n.Is6022() {
			t.Fatalf("a name under an unconfigured base is another .eth name: %+v, %v", n, err)
		}
	})
	t.Run("canonical follows the first base", func(t *testing.T) {
		ns := mustNames(t, "6022.eth", "Protocol6022.eth")
		n, err := ns.Parse("x.acme.137.protocol6022.eth")
		if err != nil || n.Canonical != "x.acme.137.6022.eth" {
			t.Fatalf("Canonical = %q, %v", n.Canonical, err)
		}
		// The bases, normalised, in the order configured.
		if !slices.Equal(n.Forms, []string{"x.acme.137.6022.eth", "x.acme.137.protocol6022.eth"}) {
			t.Errorf("Forms = %v", n.Forms)
		}
	})
	for _, bad := range [][]string{{"6022.com"}, {"bad_base.eth"}, {"6022.eth", "6022.ETH"}} {
		t.Run("rejects "+strings.Join(bad, ","), func(t *testing.T) {
			if _, err := ens.NewNames(bad); err == nil {
				t.Fatalf("NewNames(%q) accepted", bad)
			}
		})
	}
}

func TestValidLabel(t *testing.T) {
	for label, want := range map[string]bool{"acme": true, "ACME": true, "a-b": true, "-a": false, "a_b": false, "": false} {
		if got := ens.ValidLabel(label); got != want {
			t.Errorf("ValidLabel(%q) = %v, want %v", label, got, want)
		}
	}
}
