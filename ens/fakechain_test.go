package ens_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/conclavehq/conclave/ens"
)

// fakeChain is an in-memory ethereum.ContractCaller that answers the 6022
// registry and collection calls, encoded with the test contracts' ABIs (the
// same contracts the EVM tests deploy). It counts calls, can be taken down,
// and can hold calls until released.
type fakeChain struct {
	registryAddr, collectionAddr common.Address
	registryABI, collectionABI   abi.ABI

	mu      sync.Mutex
	refs    map[common.Hash]fakeRef
	texts   map[common.Hash]map[string]string
	tokens  map[string]*fakeToken // by token id
	calls   map[string]int        // by method
	down    bool
	hold    chan struct{} // when set, calls wait for it to close (or their deadline)
	waiting int
}

type fakeRef struct {
	collection common.Address
	tokenID    *big.Int
}

type fakeKV struct{ Key, Value string }

type fakeAddress struct{ AddressType, Value string }

// fakeToken has the field names of the AgentInformation tuple, plus owner.
type fakeToken struct {
	Name       string
	Creator    common.Address
	Images     []fakeKV
	Attributes []fakeKV
	CloneOf    struct {
		IsSet bool
		Value *big.Int
	}
	Addresses []fakeAddress
	owner     common.Address
}

var errConnRefused = errors.New("dial tcp 127.0.0.1:8545: connect: connection refused")

// revertErr looks like a reverted eth_call from an RPC node.
type revertErr struct{ data []byte }

func (e revertErr) Error() string          { return "execution reverted" }
func (e revertErr) ErrorData() interface{} { return hexutil.Encode(e.data) }

func newFakeChain(t *testing.T) *fakeChain {
	t.Helper()
	return &fakeChain{
		registryAddr:   common.HexToAddress("0x23dbc335f966d9869940FB55f61E919118AAD236"),
		collectionAddr: common.HexToAddress("0xb533A24430c3d66FAEdE1516d07913089EFf0e7e"),
		registryABI:    loadABI(t, "TestAgentEnsRegistry"),
		collectionABI:  loadABI(t, "TestAgentCollection"),
		refs:           map[common.Hash]fakeRef{},
		texts:          map[common.Hash]map[string]string{},
		tokens:         map[string]*fakeToken{},
		calls:          map[string]int{},
	}
}

func loadABI(t *testing.T, name string) abi.ABI {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "contracts", "build", name+".abi"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := abi.JSON(f)
	if err != nil {
		t.Fatalf("%s.abi: %v", name, err)
	}
	return a
}

// mint adds a token and registers name (already normalised) for it.
func (f *fakeChain) mint(name string, id int64, tok fakeToken) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := tok
	if t.CloneOf.Value == nil {
		t.CloneOf.Value = new(big.Int)
	}
	f.tokens[big.NewInt(id).String()] = &t
	if name != "" {
		f.refs[ens.Namehash(name)] = fakeRef{f.collectionAddr, big.NewInt(id)}
	}
}

func (f *fakeChain) setText(name, key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	node := ens.Namehash(name)
	if f.texts[node] == nil {
		f.texts[node] = map[string]string{}
	}
	f.texts[node][key] = value
}

func (f *fakeChain) setOwner(id int64, owner common.Address) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[big.NewInt(id).String()].owner = owner
}

func (f *fakeChain) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// holdCalls makes calls wait until the returned function is called.
func (f *fakeChain) holdCalls() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold = make(chan struct{})
	ch := f.hold
	return sync.OnceFunc(func() { close(ch) })
}

// callCount returns the calls of one method, or of all when method is "".
func (f *fakeChain) callCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if method != "" {
		return f.calls[method]
	}
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

func (f *fakeChain) waitingCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

// CallContract implements ethereum.ContractCaller.
func (f *fakeChain) CallContract(ctx context.Context, msg ethereum.CallMsg, _ *big.Int) ([]byte, error) {
	var a *abi.ABI
	switch {
	case msg.To != nil && *msg.To == f.registryAddr:
		a = &f.registryABI
	case msg.To != nil && *msg.To == f.collectionAddr:
		a = &f.collectionABI
	default:
		return nil, nil // no code at that address
	}
	m, err := a.MethodById(msg.Data)
	if err != nil {
		return nil, revertErr{}
	}
	args, err := m.Inputs.Unpack(msg.Data[4:])
	if err != nil {
		return nil, fmt.Errorf("fake chain: %s: %w", m.Name, err)
	}

	f.mu.Lock()
	f.calls[m.Name]++
	hold, down := f.hold, f.down
	if hold != nil {
		f.waiting++
	}
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if down {
		return nil, errConnRefused
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	switch m.Name {
	case "agentRef":
		ref, ok := f.refs[common.Hash(args[0].([32]byte))]
		if !ok {
			return m.Outputs.Pack(common.Address{}, new(big.Int))
		}
		return m.Outputs.Pack(ref.collection, ref.tokenID)
	case "text":
		return m.Outputs.Pack(f.texts[common.Hash(args[0].([32]byte))][args[1].(string)])
	}
	tok, ok := f.tokens[args[0].(*big.Int).String()]
	if !ok {
		e := f.collectionABI.Errors["ERC721NonexistentToken"]
		data, _ := e.Inputs.Pack(args[0])
		return nil, revertErr{append(e.ID[:4:4], data...)}
	}
	switch m.Name {
	case "informationOf":
		return m.Outputs.Pack(*tok)
	case "ownerOf":
		return m.Outputs.Pack(tok.owner)
	case "nameOf":
		return m.Outputs.Pack(tok.Name)
	}
	return nil, revertErr{}
}

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
