package chaintest

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"

	"github.com/conclavehq/conclave/ens"
)

// simChainID is the simulated backend's chain id; names still say 137,
// since the Directory is told that chain 137 (and mainnet) is this backend.
const simChainID = 1337

// evm is a simulated chain with a funded deployer.
type evm struct {
	tb     testing.TB
	be     *simulated.Backend
	client simulated.Client
	key    *ecdsa.PrivateKey
	from   common.Address
	auth   *bind.TransactOpts
}

func newEVM(tb testing.TB) *evm {
	tb.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	be := simulated.NewBackend(types.GenesisAlloc{from: {Balance: new(big.Int).Exp(big.NewInt(10), big.NewInt(21), nil)}})
	tb.Cleanup(func() { be.Close() })
	return &evm{
		tb: tb, be: be, client: be.Client(), key: key, from: from,
		auth: bind.NewKeyedTransactor(key, big.NewInt(simChainID)),
	}
}

// contract is a deployed test contract.
type contract struct {
	addr  common.Address
	abi   abi.ABI
	bound *bind.BoundContract
}

func loadArtifact(tb testing.TB, name string) (abi.ABI, []byte) {
	tb.Helper()
	dir := filepath.Join("..", "testdata", "contracts", "build")
	rawABI, err := os.ReadFile(filepath.Join(dir, name+".abi"))
	if err != nil {
		tb.Fatal(err)
	}
	a, err := abi.JSON(strings.NewReader(string(rawABI)))
	if err != nil {
		tb.Fatalf("%s.abi: %v", name, err)
	}
	hexBin, err := os.ReadFile(filepath.Join(dir, name+".bin"))
	if err != nil {
		tb.Fatal(err)
	}
	bin, err := hexutil.Decode("0x" + strings.TrimSpace(string(hexBin)))
	if err != nil {
		tb.Fatalf("%s.bin: %v", name, err)
	}
	return a, bin
}

// deploy deploys build/<name> with constructor args and mines it.
func (e *evm) deploy(name string, args ...any) contract {
	e.tb.Helper()
	a, bin := loadArtifact(e.tb, name)
	input, err := a.Pack("", args...)
	if err != nil {
		e.tb.Fatalf("%s constructor: %v", name, err)
	}
	addr, tx, err := bind.DeployContract(e.auth, bin, e.client, input)
	if err != nil {
		e.tb.Fatalf("deploy %s: %v", name, err)
	}
	e.mine(tx)
	return contract{addr: addr, abi: a, bound: bind.NewBoundContract(addr, a, e.client, e.client, e.client)}
}

// send calls a state-changing method and mines it; each transaction is
// committed before the next, since gas is estimated on committed state.
func (e *evm) send(c contract, method string, args ...any) {
	e.tb.Helper()
	tx, err := c.bound.Transact(e.auth, method, args...)
	if err != nil {
		e.tb.Fatalf("%s: %v", method, err)
	}
	e.mine(tx)
}

func (e *evm) mine(tx *types.Transaction) {
	e.tb.Helper()
	e.be.Commit()
	receipt, err := bind.WaitMined(context.Background(), e.client, tx.Hash())
	if err != nil {
		e.tb.Fatal(err)
	}
	if receipt.Status != types.ReceiptStatusSuccessful {
		e.tb.Fatalf("transaction %s failed", tx.Hash())
	}
}

// The argument types of TestAgentCollection.mint.
type (
	agentAddress    struct{ AddressType, Value string }
	keyValue        struct{ Key, Value string }
	nullableUint256 struct {
		IsSet bool
		Value *big.Int
	}
)

type token struct {
	owner      common.Address
	name       string
	addresses  []agentAddress
	images     []keyValue
	attributes []keyValue
	cloneOf    int64 // -1: not a clone
}

// agents6022 is a deployed 6022-style registry and collection.
type agents6022 struct {
	e          *evm
	registry   contract
	collection contract
	minted     int64
}

func deploy6022(e *evm) *agents6022 {
	return &agents6022{
		e:          e,
		registry:   e.deploy("TestAgentEnsRegistry"),
		collection: e.deploy("TestAgentCollection"),
	}
}

// mint mints tok and returns its token id (ids count from 0).
func (a *agents6022) mint(tok token) int64 {
	clone := nullableUint256{Value: new(big.Int)}
	if tok.cloneOf >= 0 {
		clone = nullableUint256{IsSet: true, Value: big.NewInt(tok.cloneOf)}
	}
	if tok.addresses == nil {
		tok.addresses = []agentAddress{}
	}
	if tok.images == nil {
		tok.images = []keyValue{}
	}
	a.e.send(a.collection, "mint", tok.owner, tok.name, tok.addresses, tok.images, tok.attributes, clone)
	a.minted++
	return a.minted - 1
}

// provision points name's node at a token.
func (a *agents6022) provision(name string, tokenID int64) {
	a.e.send(a.registry, "provision", ens.Namehash(name), a.collection.addr, big.NewInt(tokenID))
}

func (a *agents6022) setText(name, key, value string) {
	a.e.send(a.registry, "setText", ens.Namehash(name), key, value)
}

// countingCaller counts the eth_calls that reach the chain.
type countingCaller struct {
	ethereum.ContractCaller
	calls atomic.Int64
}

func (c *countingCaller) CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error) {
	c.calls.Add(1)
	return c.ContractCaller.CallContract(ctx, msg, block)
}

// directory builds an ens.Directory whose chain 137 and mainnet are the
// simulated chain.
func directory(tb testing.TB, e *evm, registry, ensRegistry common.Address, opts ens.Options) (*ens.Directory, *countingCaller) {
	tb.Helper()
	caller := &countingCaller{ContractCaller: e.client}
	opts.Chains = append(opts.Chains, ens.Chain{ChainID: 137, RPCURL: "sim://137", Registry: registry.Hex()})
	opts.MainnetRPCURL = "sim://1"
	if ensRegistry != (common.Address{}) {
		opts.ENSRegistry = ensRegistry.Hex()
	}
	opts.Dial = func(context.Context, uint64, string) (ethereum.ContractCaller, error) { return caller, nil }
	d, err := ens.New(opts, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d, caller
}

// gateway is a CCIP-Read gateway serving ENS records by name. It decodes
// the resolve(bytes name, bytes data) call the wildcard resolver forwards
// and answers with the ABI-encoded record. Names absent from records get a
// 404; names in loop get an empty answer, which the resolver bounces back.
type gateway struct {
	srv      *httptest.Server
	resolver abi.ABI // TestOffchainResolver
	records  abi.ABI // TestPublicResolver: addr and text

	mu      sync.Mutex
	addrs   map[string]common.Address
	texts   map[string]map[string]string
	loop    map[string]bool
	methods []string // "GET /gw", "POST /gw", "GET /down", …, in order
}

func newGateway(tb testing.TB) *gateway {
	tb.Helper()
	resolverABI, _ := loadArtifact(tb, "TestOffchainResolver")
	recordsABI, _ := loadArtifact(tb, "TestPublicResolver")
	g := &gateway{
		resolver: resolverABI, records: recordsABI,
		addrs: map[string]common.Address{}, texts: map[string]map[string]string{}, loop: map[string]bool{},
	}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	tb.Cleanup(g.srv.Close)
	return g
}

// URLs for the resolver: {data} in the path means GET, none means POST.
func (g *gateway) getURL() string  { return g.srv.URL + "/gw/{sender}/{data}.json" }
func (g *gateway) postURL() string { return g.srv.URL + "/gw" }
func (g *gateway) downURL() string { return g.srv.URL + "/down/{sender}/{data}" }

func (g *gateway) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.methods...)
}

func (g *gateway) serve(w http.ResponseWriter, r *http.Request) {
	first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	g.mu.Lock()
	g.methods = append(g.methods, r.Method+" /"+first)
	g.mu.Unlock()

	var sender, data string
	switch {
	case first == "down":
		http.Error(w, "gateway down", http.StatusInternalServerError)
		return
	case r.Method == http.MethodGet:
		parts := strings.Split(strings.TrimSuffix(r.URL.Path, ".json"), "/")
		sender, data = parts[len(parts)-2], parts[len(parts)-1]
	default:
		var body struct{ Data, Sender string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sender, data = body.Sender, body.Data
	}
	if !common.IsHexAddress(sender) {
		http.Error(w, "bad sender", http.StatusBadRequest)
		return
	}
	answer, status := g.answer(data)
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"data": hexutil.Encode(answer)})
}

func (g *gateway) answer(data string) ([]byte, int) {
	call, err := hexutil.Decode(data)
	if err != nil || len(call) < 4 {
		return nil, http.StatusBadRequest
	}
	args, err := g.resolver.Methods["resolve"].Inputs.Unpack(call[4:])
	if err != nil {
		return nil, http.StatusBadRequest
	}
	name, err := dnsDecode(args[0].([]byte))
	if err != nil {
		return nil, http.StatusBadRequest
	}
	inner := args[1].([]byte)
	m, err := g.records.MethodById(inner)
	if err != nil {
		return nil, http.StatusBadRequest
	}
	in, err := m.Inputs.Unpack(inner[4:])
	if err != nil {
		return nil, http.StatusBadRequest
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.loop[name] {
		return []byte{}, http.StatusOK
	}
	addr, known := g.addrs[name]
	if !known {
		return nil, http.StatusNotFound
	}
	var out []byte
	switch m.Name {
	case "addr":
		out, err = m.Outputs.Pack(addr)
	case "text":
		out, err = m.Outputs.Pack(g.texts[name][in[1].(string)])
	default:
		return nil, http.StatusNotImplemented
	}
	if err != nil {
		return nil, http.StatusInternalServerError
	}
	return out, http.StatusOK
}

func dnsDecode(b []byte) (string, error) {
	var labels []string
	for len(b) > 0 && b[0] != 0 {
		n := int(b[0])
		if len(b) < 1+n {
			return "", fmt.Errorf("truncated DNS name")
		}
		labels = append(labels, string(b[1:1+n]))
		b = b[1+n:]
	}
	return strings.Join(labels, "."), nil
}
