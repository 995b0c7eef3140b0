package enstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/conclavehq/conclave/ens"
)

// Chain is the one simulated chain of the tests that do not run an EVM: an
// in-memory 6022 registry and collection answering eth_call, encoded with
// the test contracts' ABIs (ens/testdata/contracts, the contracts
// ens/chaintest deploys). It is an ethereum.ContractCaller for a
// Directory's Dial, and serves JSON-RPC (URL) for a process that dials an
// RPC URL. It counts calls, can be taken down, and can hold calls until
// released.
type Chain struct {
	registry, collection       common.Address
	registryABI, collectionABI abi.ABI
	tb                         testing.TB

	mu      sync.Mutex
	srv     *httptest.Server
	refs    map[common.Hash]ref
	texts   map[common.Hash]map[string]string
	tokens  map[string]*Token // by token id
	calls   map[string]int    // by method
	down    bool
	hold    chan struct{} // when set, calls wait for it to close (or their deadline)
	waiting int
}

type ref struct {
	collection common.Address
	tokenID    *big.Int
}

// KV is a key and a value of the AgentInformation tuple.
type KV struct{ Key, Value string }

// Address is an address entry of the AgentInformation tuple.
type Address struct{ AddressType, Value string }

// Token has the field names of the AgentInformation tuple, plus its owner.
type Token struct {
	Name       string
	Creator    common.Address
	Images     []KV
	Attributes []KV
	CloneOf    struct {
		IsSet bool
		Value *big.Int
	}
	Addresses []Address
	Owner     common.Address
}

// ErrConnRefused is what calls fail with while the chain is down.
var ErrConnRefused = errors.New("dial tcp 127.0.0.1:8545: connect: connection refused")

// revertErr looks like a reverted eth_call from an RPC node.
type revertErr struct{ data []byte }

func (e revertErr) Error() string          { return "execution reverted" }
func (e revertErr) ErrorData() interface{} { return hexutil.Encode(e.data) }

// NewChain returns an empty chain: mint tokens on it.
func NewChain(tb testing.TB) *Chain {
	tb.Helper()
	return &Chain{
		registry:      common.HexToAddress("0x23dbc335f966d9869940FB55f61E919118AAD236"),
		collection:    common.HexToAddress("0xb533A24430c3d66FAEdE1516d07913089EFf0e7e"),
		registryABI:   loadABI(tb, "TestAgentEnsRegistry"),
		collectionABI: loadABI(tb, "TestAgentCollection"),
		tb:            tb,
		refs:          map[common.Hash]ref{},
		texts:         map[common.Hash]map[string]string{},
		tokens:        map[string]*Token{},
		calls:         map[string]int{},
	}
}

// loadABI reads a test contract's ABI from ens/testdata, found from this
// file's place in the repository (tests run from their own package).
func loadABI(tb testing.TB, name string) abi.ABI {
	tb.Helper()
	_, here, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(here), "..", "testdata", "contracts", "build", name+".abi")
	f, err := os.Open(path) // #nosec G304 -- a test contract's ABI in the repository
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	a, err := abi.JSON(f)
	if err != nil {
		tb.Fatalf("%s.abi: %v", name, err)
	}
	return a
}

// Registry is the address of the registry.
func (c *Chain) Registry() common.Address { return c.registry }

// Collection is the address of the collection.
func (c *Chain) Collection() common.Address { return c.collection }

// Register points name (already normalised) at token id of the collection,
// minted or not.
func (c *Chain) Register(name string, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs[ens.Namehash(name)] = ref{c.collection, big.NewInt(id)}
}

// Mint adds a token and registers name (already normalised; "" for none)
// for it.
func (c *Chain) Mint(name string, id int64, tok Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := tok
	if t.CloneOf.Value == nil {
		t.CloneOf.Value = new(big.Int)
	}
	c.tokens[big.NewInt(id).String()] = &t
	if name != "" {
		c.refs[ens.Namehash(name)] = ref{c.collection, big.NewInt(id)}
	}
}

// SetText sets a text record of name.
func (c *Chain) SetText(name, key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	node := ens.Namehash(name)
	if c.texts[node] == nil {
		c.texts[node] = map[string]string{}
	}
	c.texts[node][key] = value
}

// SetOwner changes the owner of token id.
func (c *Chain) SetOwner(id int64, owner common.Address) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens[big.NewInt(id).String()].Owner = owner
}

// SetDown takes the chain down (calls fail with ErrConnRefused, JSON-RPC
// requests with a 503) or brings it back.
func (c *Chain) SetDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

// HoldCalls makes calls wait until the returned function is called.
func (c *Chain) HoldCalls() (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = make(chan struct{})
	ch := c.hold
	return sync.OnceFunc(func() { close(ch) })
}

// CallCount returns the calls of one method, or of all when method is "".
func (c *Chain) CallCount(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if method != "" {
		return c.calls[method]
	}
	n := 0
	for _, k := range c.calls {
		n += k
	}
	return n
}

// WaitingCalls is how many calls HoldCalls is holding.
func (c *Chain) WaitingCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// CallContract implements ethereum.ContractCaller.
func (c *Chain) CallContract(ctx context.Context, msg ethereum.CallMsg, _ *big.Int) ([]byte, error) {
	var a *abi.ABI
	switch {
	case msg.To != nil && *msg.To == c.registry:
		a = &c.registryABI
	case msg.To != nil && *msg.To == c.collection:
		a = &c.collectionABI
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
	if err := c.wait(ctx, m.Name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answerLocked(m, args)
}

// wait counts a call, holds it while HoldCalls says so, and fails it while
// the chain is down.
func (c *Chain) wait(ctx context.Context, method string) error {
	c.mu.Lock()
	c.calls[method]++
	hold, down := c.hold, c.down
	if hold != nil {
		c.waiting++
	}
	c.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if down {
		return ErrConnRefused
	}
	return nil
}

func (c *Chain) answerLocked(m *abi.Method, args []any) ([]byte, error) {
	switch m.Name {
	case "agentRef":
		r, ok := c.refs[common.Hash(args[0].([32]byte))]
		if !ok {
			return m.Outputs.Pack(common.Address{}, new(big.Int))
		}
		return m.Outputs.Pack(r.collection, r.tokenID)
	case "text":
		return m.Outputs.Pack(c.texts[common.Hash(args[0].([32]byte))][args[1].(string)])
	}
	tok, ok := c.tokens[args[0].(*big.Int).String()]
	if !ok {
		e := c.collectionABI.Errors["ERC721NonexistentToken"]
		data, _ := e.Inputs.Pack(args[0])
		return nil, revertErr{append(e.ID[:4:4], data...)}
	}
	switch m.Name {
	case "informationOf":
		return m.Outputs.Pack(*tok)
	case "ownerOf":
		return m.Outputs.Pack(tok.Owner)
	case "nameOf":
		return m.Outputs.Pack(tok.Name)
	}
	return nil, revertErr{}
}

// URL is a JSON-RPC endpoint answering eth_call from the chain, started
// on first use and closed when the test ends.
func (c *Chain) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv == nil {
		c.srv = httptest.NewServer(http.HandlerFunc(c.serveRPC))
		c.tb.Cleanup(c.srv.Close)
	}
	return c.srv.URL
}

func (c *Chain) serveRPC(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	down := c.down
	c.mu.Unlock()
	if down {
		http.Error(w, "node unavailable", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage   `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	var call struct {
		To    *common.Address `json:"to"`
		Input hexutil.Bytes   `json:"input"`
		Data  hexutil.Bytes   `json:"data"`
	}
	if json.Unmarshal(body, &req) != nil || req.Method != "eth_call" || len(req.Params) == 0 || json.Unmarshal(req.Params[0], &call) != nil {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	input := call.Input
	if len(input) == 0 {
		input = call.Data
	}
	out, err := c.CallContract(r.Context(), ethereum.CallMsg{To: call.To, Data: input}, nil)
	reply := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	if err != nil {
		reply["error"] = map[string]any{"code": -32000, "message": err.Error()}
	} else {
		reply["result"] = hexutil.Bytes(out)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}
