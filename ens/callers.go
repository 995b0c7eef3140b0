package ens

import (
	"context"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/ethclient"

	redactpkg "github.com/conclavehq/conclave/internal/redact"
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
	dial    DialFunc
	urls    map[uint64]string
	timeout time.Duration

	mu    sync.Mutex
	conns map[uint64]redactingCaller
}

func newCallers(dial DialFunc, urls map[uint64]string, timeout time.Duration) *callers {
	if dial == nil {
		dial = dialEthclient
	}
	return &callers{dial: dial, urls: urls, timeout: timeout, conns: make(map[uint64]redactingCaller)}
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
	// a WebSocket dial is bounded by the call deadline.
	dialCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	raw, err := c.dial(dialCtx, chainID, url)
	if err != nil {
		return nil, fmt.Errorf("dial chain %d: %w", chainID, redact(err, url))
	}
	conn := redactingCaller{next: raw, url: url}
	c.conns[chainID] = conn
	return conn, nil
}

// close closes the connections that can be closed.
func (c *callers) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, conn := range c.conns {
		switch cl := conn.next.(type) {
		case interface{ Close() }:
			cl.Close()
		case interface{ Close() error }:
			_ = cl.Close()
		}
		delete(c.conns, id)
	}
}

// redactingCaller keeps an RPC URL, which often carries an API key, out of
// error messages (net/http puts the URL in its errors).
type redactingCaller struct {
	next ethereum.ContractCaller
	url  string
}

func (r redactingCaller) CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error) {
	res, err := r.next.CallContract(ctx, msg, block)
	return res, redact(err, r.url)
}

// redact replaces rawURL in err's message with its scheme and host: the
// one masker (internal/redact) finds it in each form errors quote it (as
// written, with its password starred out as net/http and net/url write
// it, with a path appended), and what it leaves of the whole URL becomes
// the scheme and host alone. The error still unwraps to the original.
func redact(err error, rawURL string) error {
	if err == nil || rawURL == "" {
		return err
	}
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.Host != "" {
		msg = strings.ReplaceAll(redactpkg.Text(msg, rawURL), redactpkg.URL(rawURL), u.Scheme+"://"+u.Host+"/…")
	} else {
		msg = strings.ReplaceAll(msg, rawURL, "the RPC URL")
	}
	if msg == err.Error() {
		return err
	}
	return redactedError{err: err, msg: msg}
}

type redactedError struct {
	err error
	msg string
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
