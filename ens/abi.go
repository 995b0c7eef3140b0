package ens

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// The read interfaces conclave calls, written by hand from the published
// ABIs (only the methods used). docs/ens.md lists them in Solidity.
const (
	// AgentEnsRegistry (6022).
	agentRegistryABI = `[
	{"type":"function","name":"agentRef","stateMutability":"view",
	 "inputs":[{"name":"node","type":"bytes32"}],
	 "outputs":[{"name":"collection","type":"address"},{"name":"tokenId","type":"uint256"}]},
	{"type":"function","name":"text","stateMutability":"view",
	 "inputs":[{"name":"node","type":"bytes32"},{"name":"key","type":"string"}],
	 "outputs":[{"name":"","type":"string"}]}
	]`

	// AgentCollectionV1 (6022), an ERC-721.
	agentCollectionABI = `[
	{"type":"function","name":"informationOf","stateMutability":"view",
	 "inputs":[{"name":"tokenId","type":"uint256"}],
	 "outputs":[{"name":"","type":"tuple","components":[
	   {"name":"name","type":"string"},
	   {"name":"creator","type":"address"},
	   {"name":"images","type":"tuple[]","components":[{"name":"key","type":"string"},{"name":"value","type":"string"}]},
	   {"name":"attributes","type":"tuple[]","components":[{"name":"key","type":"string"},{"name":"value","type":"string"}]},
	   {"name":"cloneOf","type":"tuple","components":[{"name":"isSet","type":"bool"},{"name":"value","type":"uint256"}]},
	   {"name":"addresses","type":"tuple[]","components":[{"name":"addressType","type":"string"},{"name":"value","type":"string"}]}
	 ]}]},
	{"type":"function","name":"nameOf","stateMutability":"view",
	 "inputs":[{"name":"tokenId","type":"uint256"}],
	 "outputs":[{"name":"","type":"string"}]},
	{"type":"function","name":"ownerOf","stateMutability":"view",
	 "inputs":[{"name":"tokenId","type":"uint256"}],
	 "outputs":[{"name":"","type":"address"}]}
	]`

	// The ENS registry.
	ensRegistryABI = `[
	{"type":"function","name":"resolver","stateMutability":"view",
	 "inputs":[{"name":"node","type":"bytes32"}],"outputs":[{"name":"","type":"address"}]},
	{"type":"function","name":"owner","stateMutability":"view",
	 "inputs":[{"name":"node","type":"bytes32"}],"outputs":[{"name":"","type":"address"}]}
	]`

	// An ENS resolver: the record getters, ERC-165, ENSIP-10's resolve and
	// EIP-3668's OffchainLookup error.
	ensResolverABI = `[
	{"type":"function","name":"addr","stateMutability":"view",
	 "inputs":[{"name":"node","type":"bytes32"}],"outputs":[{"name":"","type":"address"}]},
	{"type":"function","name":"text","stateMutability":"view",
	 "inputs":[{"name":"node","type":"bytes32"},{"name":"key","type":"string"}],"outputs":[{"name":"","type":"string"}]},
	{"type":"function","name":"supportsInterface","stateMutability":"view",
	 "inputs":[{"name":"interfaceID","type":"bytes4"}],"outputs":[{"name":"","type":"bool"}]},
	{"type":"function","name":"resolve","stateMutability":"view",
	 "inputs":[{"name":"name","type":"bytes"},{"name":"data","type":"bytes"}],"outputs":[{"name":"","type":"bytes"}]},
	{"type":"error","name":"OffchainLookup","inputs":[
	 {"name":"sender","type":"address"},{"name":"urls","type":"string[]"},{"name":"callData","type":"bytes"},
	 {"name":"callbackFunction","type":"bytes4"},{"name":"extraData","type":"bytes"}]}
	]`
)

// The parsed ABIs are read-only tables.
var (
	agentRegistry   = mustABI(agentRegistryABI)
	agentCollection = mustABI(agentCollectionABI)
	ensRegistry     = mustABI(ensRegistryABI)
	ensResolver     = mustABI(ensResolverABI)
)

func mustABI(s string) abi.ABI {
	a, err := abi.JSON(strings.NewReader(s))
	if err != nil {
		panic("ens: bad built-in ABI: " + err.Error())
	}
	return a
}

// agentInformation mirrors AgentCollectionV1's AgentInformation struct.
type agentInformation struct {
	Name       string
	Creator    common.Address
	Images     []keyValue
	Attributes []keyValue
	CloneOf    struct {
		IsSet bool
		Value *big.Int
	}
	Addresses []struct {
		AddressType string
		Value       string
	}
}

type keyValue struct {
	Key   string
	Value string
}

// contract is one contract on one chain, called with a deadline per call.
type contract struct {
	caller  ethereum.ContractCaller
	address common.Address
	abi     *abi.ABI
	timeout time.Duration
}

// call packs method(args), calls it, and unpacks the result into out (a
// pointer, or nil to skip unpacking).
func (c contract) call(ctx context.Context, out any, method string, args ...any) error {
	data, err := c.abi.Pack(method, args...)
	if err != nil {
		return fmt.Errorf("pack %s: %w", method, err)
	}
	res, err := c.raw(ctx, data)
	if err != nil {
		return err
	}
	return unpack(c.abi, out, method, res)
}

// raw sends calldata as an eth_call at the latest block.
func (c contract) raw(ctx context.Context, data []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	to := c.address
	return c.caller.CallContract(ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
}

func unpack(a *abi.ABI, out any, method string, res []byte) error {
	if len(res) == 0 {
		// A call to an address with no code returns nothing.
		return fmt.Errorf("%w: empty result (no contract at the address?)", errNoContract)
	}
	if err := a.UnpackIntoInterface(out, method, res); err != nil {
		return fmt.Errorf("unpack %s: %w", method, err)
	}
	return nil
}

var errNoContract = errors.New("no contract")

// revertData returns the data of a reverted call, and whether err is a
// revert at all (as opposed to a transport failure).
func revertData(err error) ([]byte, bool) {
	var de rpc.DataError
	if errors.As(err, &de) {
		if s, ok := de.ErrorData().(string); ok {
			if b, decErr := hexutil.Decode(s); decErr == nil {
				return b, true
			}
		}
	}
	return nil, strings.Contains(err.Error(), "execution reverted")
}

// isRevert reports whether err means the contract refused the call (or has
// no code), which for an optional record means "no value".
func isRevert(err error) bool {
	if errors.Is(err, errNoContract) {
		return true
	}
	_, ok := revertData(err)
	return ok
}
