package ens

import (
	"context"
	"fmt"
	"sync"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/ethclient"
)

// DialFunc opens a connection to a chain's RPC endpoint. The default is
// ethclient.DialContext; tests pass a function returning a fake or a
// simulated backend.
type DialFunc func(ctx context.Context, chainID uint64, rpcURL string) (ethereum.ContractCaller, error)

func dialEthclient(ctx context.Context, _ uint64, rpcURL string) (ethereum.ContractCaller, error) {
	return ethclient.DialContext(ctx, rpcURL)
}

// callers holds one caller per chain, dialled on first use.
type callers struct {
	dial DialFunc
	urls map[uint64]string

	mu    sync.Mutex
	conns map[uint64]ethereum.ContractCaller
}

func newCallers(dial DialFunc, urls map[uint64]string) *callers {
	if dial == nil {
		dial = dialEthclient
	}
	return &callers{dial: dial, urls: urls, conns: make(map[uint64]ethereum.ContractCaller)}
}

// get returns the chain's caller, dialling it the first time. A chain with
// no RPC URL gives an error wrapping ErrNoRPC.
func (c *callers) get(ctx context.Context, chainID uint64) (ethereum.ContractCaller, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[chainID]; ok {
		return conn, nil
	}
	url := c.urls[chainID]
	if url == "" {
		return nil, fmt.Errorf("%w for chain %d", ErrNoRPC, chainID)
	}
	// Dialling an HTTP endpoint sends nothing, so holding the lock is cheap;
	// a WebSocket dial is bounded by ctx.
	conn, err := c.dial(ctx, chainID, url)
	if err != nil {
		return nil, fmt.Errorf("dial chain %d: %w", chainID, err)
	}
	c.conns[chainID] = conn
	return conn, nil
}

// close closes the connections that can be closed.
func (c *callers) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, conn := range c.conns {
		switch cl := conn.(type) {
		case interface{ Close() }:
			cl.Close()
		case interface{ Close() error }:
			_ = cl.Close()
		}
		delete(c.conns, id)
	}
}
