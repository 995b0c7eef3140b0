package ens_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ethereum/go-ethereum"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/ens/enstest"
)

// The tests of ens run on the one simulated chain of the tests that run no
// EVM (enstest.Chain); ens/chaintest runs the same contracts on one.
type (
	fakeChain   = enstest.Chain
	fakeToken   = enstest.Token
	fakeKV      = enstest.KV
	fakeAddress = enstest.Address
)

var errConnRefused = enstest.ErrConnRefused

func newFakeChain(t *testing.T) *fakeChain { return enstest.NewChain(t) }

// newDirectory builds a Directory whose chain 137 is the fake.
func newDirectory(t *testing.T, fake *fakeChain, opts ens.Options, static ...ens.Agent) *ens.Directory {
	t.Helper()
	opts.Chains = append(opts.Chains, ens.Chain{ChainID: 137, RPCURL: "fake://137"})
	opts.Dial = func(_ context.Context, chainID uint64, _ string) (ethereum.ContractCaller, error) {
		if chainID != 137 {
			return nil, fmt.Errorf("no fake for chain %d", chainID)
		}
		return fake, nil
	}
	d, err := ens.New(opts, static)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
