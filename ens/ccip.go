package ens

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// maxLookups bounds the OffchainLookup reverts followed for one call, so a
// resolver that keeps redirecting cannot hold a resolution forever.
const maxLookups = 4

// maxGatewayURLs bounds the gateway URLs tried for one OffchainLookup: the
// list comes from the resolver, so a long one would make conclave send as
// many requests as its author likes.
const maxGatewayURLs = 4

// maxGatewayBody caps a gateway's answer; a longer one is refused.
const maxGatewayBody = 1 << 20

// offchainLookup is EIP-3668's
// OffchainLookup(address sender, string[] urls, bytes callData, bytes4 callbackFunction, bytes extraData).
type offchainLookup struct {
	Sender           common.Address `abi:"sender"`
	URLs             []string       `abi:"urls"`
	CallData         []byte         `abi:"callData"`
	CallbackFunction [4]byte        `abi:"callbackFunction"`
	ExtraData        []byte         `abi:"extraData"`
}

var (
	offchainLookupError = ensResolver.Errors["OffchainLookup"]
	bytesType, _        = abi.NewType("bytes", "", nil)
	callbackArgs        = abi.Arguments{{Type: bytesType}, {Type: bytesType}}
)

// ccipReader follows CCIP-Read redirections (EIP-3668) over HTTP.
type ccipReader struct {
	client    *http.Client // the guarded gateway client (newGatewayClient)
	timeout   time.Duration
	allowHTTP bool
}

// call makes an eth_call to c with data; when the contract reverts with
// OffchainLookup it asks the gateways and calls the callback, up to
// maxLookups times.
func (r ccipReader) call(ctx context.Context, c contract, data []byte) ([]byte, error) {
	for lookups := 0; ; lookups++ {
		res, err := c.raw(ctx, data)
		if err == nil {
			return res, nil
		}
		rd, _ := revertData(err)
		if len(rd) < 4 || !bytes.Equal(rd[:4], offchainLookupError.ID[:4]) {
			return nil, err
		}
		if lookups == maxLookups {
			return nil, fmt.Errorf("CCIP-Read: still redirected after %d off-chain lookups", maxLookups)
		}
		l, err := decodeOffchainLookup(rd[4:])
		if err != nil {
			return nil, err
		}
		if l.Sender != c.address {
			return nil, fmt.Errorf("CCIP-Read: OffchainLookup sender %s is not the resolver %s", l.Sender.Hex(), c.address.Hex())
		}
		answer, err := r.ask(ctx, l)
		if err != nil {
			return nil, err
		}
		args, err := callbackArgs.Pack(answer, l.ExtraData)
		if err != nil {
			return nil, fmt.Errorf("CCIP-Read: pack callback: %w", err)
		}
		data = append(l.CallbackFunction[:], args...)
	}
}

func decodeOffchainLookup(b []byte) (offchainLookup, error) {
	var l offchainLookup
	vals, err := offchainLookupError.Inputs.Unpack(b)
	if err == nil {
		err = offchainLookupError.Inputs.Copy(&l, vals)
	}
	if err != nil {
		return offchainLookup{}, fmt.Errorf("CCIP-Read: decode OffchainLookup: %w", err)
	}
	return l, nil
}

// errGatewayStatus is a gateway's answer other than 2xx: after a 4xx the
// other URLs are not tried. It counts as ErrGatewayUnreachable.
type errGatewayStatus struct{ code int }

func (e errGatewayStatus) Error() string { return fmt.Sprintf("HTTP %d", e.code) }

func (e errGatewayStatus) Is(target error) bool { return target == ErrGatewayUnreachable }

// ask tries the gateway URLs in order, the first maxGatewayURLs of them. A
// URL with {data} is fetched with GET, any other gets a POST of {"data",
// "sender"}. A 4xx answer stops the search; 404 means the gateway does not
// know the name (ErrNotFound).
func (r ccipReader) ask(ctx context.Context, l offchainLookup) ([]byte, error) {
	if len(l.URLs) == 0 {
		return nil, errors.New("CCIP-Read: OffchainLookup gave no gateway URL")
	}
	sender := strings.ToLower(l.Sender.Hex())
	data := hexutil.Encode(l.CallData)
	var errs []error
	for _, u := range l.URLs[:min(len(l.URLs), maxGatewayURLs)] {
		answer, err := r.fetch(ctx, u, sender, data)
		if err == nil {
			return answer, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", gatewayHost(u), err))
		var status errGatewayStatus
		if errors.As(err, &status) && status.code >= 400 && status.code < 500 {
			if status.code == http.StatusNotFound {
				errs = append(errs, ErrNotFound)
			}
			break
		}
	}
	return nil, fmt.Errorf("CCIP-Read gateway: %w", errors.Join(errs...))
}

func (r ccipReader) fetch(ctx context.Context, tmpl, sender, data string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	target := strings.ReplaceAll(tmpl, "{sender}", sender)
	var req *http.Request
	var err error
	if strings.Contains(target, "{data}") {
		target = strings.ReplaceAll(target, "{data}", data)
		req, err = gatewayRequest(ctx, http.MethodGet, target, nil)
	} else {
		body, _ := json.Marshal(struct {
			Data   string `json:"data"`
			Sender string `json:"sender"`
		}{data, sender})
		req, err = gatewayRequest(ctx, http.MethodPost, target, body)
	}
	if err != nil {
		return nil, err
	}
	if err := checkGatewayURL(req.URL, r.allowHTTP); err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		if !errors.Is(err, ErrGatewayRefused) && !errors.Is(err, ErrGatewayUnreachable) {
			err = fmt.Errorf("%w: %w", ErrGatewayUnreachable, err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > maxGatewayBody {
		return nil, fmt.Errorf("%w: an answer of %d bytes (at most %d)", ErrGatewayRefused, resp.ContentLength, maxGatewayBody)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxGatewayBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read the answer: %w", ErrGatewayUnreachable, err)
	}
	if len(raw) > maxGatewayBody {
		return nil, fmt.Errorf("%w: an answer over %d bytes", ErrGatewayRefused, maxGatewayBody)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, errGatewayStatus{resp.StatusCode}
	}
	var answer struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("%w: answer is not JSON {\"data\": …}: %w", ErrGatewayUnreachable, err)
	}
	b, err := hexutil.Decode(answer.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: answer's data is not 0x-hex: %w", ErrGatewayUnreachable, err)
	}
	return b, nil
}

func gatewayRequest(ctx context.Context, method, target string, body []byte) (*http.Request, error) {
	if _, err := url.Parse(target); err != nil {
		return nil, fmt.Errorf("%w: not a URL", ErrGatewayRefused)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// gatewayHost names a gateway in errors without its path or query.
func gatewayHost(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return "gateway URL"
}
