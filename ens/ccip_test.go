package ens

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// offchainResolver is a ContractCaller for one contract that answers its
// first call with an OffchainLookup revert and its callback with the
// gateway's answer, checked against the extra data it sent.
type offchainResolver struct {
	t        *testing.T
	address  common.Address
	sender   common.Address // what the revert claims as sender
	urls     []string
	callData []byte
	extra    []byte
	callback [4]byte
	bounces  int // callbacks answered with another OffchainLookup

	mu        sync.Mutex
	responses [][]byte // what the callback received
}

// lookupRevert is a reverted eth_call carrying data, as RPC nodes report it.
type lookupRevert struct{ data []byte }

func (e lookupRevert) Error() string  { return "execution reverted" }
func (e lookupRevert) ErrorData() any { return hexutil.Encode(e.data) }

func (r *offchainResolver) revert() error {
	args, err := offchainLookupError.Inputs.Pack(r.sender, r.urls, r.callData, r.callback, r.extra)
	if err != nil {
		r.t.Fatal(err)
	}
	return lookupRevert{append(offchainLookupError.ID[:4:4], args...)}
}

func (r *offchainResolver) CallContract(_ context.Context, msg ethereum.CallMsg, _ *big.Int) ([]byte, error) {
	if msg.To == nil || *msg.To != r.address {
		r.t.Errorf("call to %v, want the resolver %s", msg.To, r.address.Hex())
		return nil, nil
	}
	if !bytes.HasPrefix(msg.Data, r.callback[:]) {
		return nil, r.revert()
	}
	vals, err := callbackArgs.Unpack(msg.Data[4:])
	if err != nil {
		r.t.Errorf("callback arguments: %v", err)
		return nil, lookupRevert{}
	}
	response, extra := vals[0].([]byte), vals[1].([]byte)
	if !bytes.Equal(extra, r.extra) {
		r.t.Errorf("callback extra data %x, want %x", extra, r.extra)
	}
	r.mu.Lock()
	r.responses = append(r.responses, response)
	n := len(r.responses)
	r.mu.Unlock()
	if n <= r.bounces {
		return nil, r.revert()
	}
	return append([]byte("answer:"), response...), nil
}

// seenRequest is a request a test gateway received.
type seenRequest struct {
	method, path, contentType string
	body                      map[string]string
}

// testGateway answers with status for paths under /fail/, else with its
// data; it records every request.
type testGateway struct {
	srv *httptest.Server

	mu   sync.Mutex
	seen []seenRequest
}

func newTestGateway(t *testing.T, answer string) *testGateway {
	t.Helper()
	g := &testGateway{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		req := seenRequest{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type")}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &req.body); err != nil {
				t.Errorf("POST body %q is not a JSON object of strings: %v", raw, err)
			}
		}
		g.mu.Lock()
		g.seen = append(g.seen, req)
		g.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/fail/500"):
			http.Error(w, "down", http.StatusInternalServerError)
		case strings.HasPrefix(r.URL.Path, "/fail/404"):
			http.Error(w, "unknown", http.StatusNotFound)
		case strings.HasPrefix(r.URL.Path, "/fail/400"):
			http.Error(w, "bad request", http.StatusBadRequest)
		case strings.HasPrefix(r.URL.Path, "/fail/json"):
			_, _ = w.Write([]byte("not json"))
		default:
			_, _ = w.Write([]byte(answer))
		}
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *testGateway) requests() []seenRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]seenRequest(nil), g.seen...)
}

// TestCCIPRead follows EIP-3668 step by step: the gateway URLs in order,
// {sender} and {data} substituted for GET, a JSON POST otherwise, the
// callback called with the answer and the extra data, the sender checked,
// 4xx answers ending the search and redirections bounded.
func TestCCIPRead(t *testing.T) {
	resolverAddr := common.HexToAddress("0x00000000000000000000000000000000000Ab1E5")
	callData := []byte{0x90, 0x61, 0xb9, 0x23, 0x01}
	dataHex := hexutil.Encode(callData)
	senderHex := strings.ToLower(resolverAddr.Hex())
	tests := []struct {
		name     string
		urls     []string // "$GW" is the gateway's base URL
		sender   common.Address
		bounces  int
		want     string   // the result, when there is no error
		wantErr  string   // a part of the error
		notFound bool     // the error wraps ErrNotFound
		requests []string // "METHOD path", in order
	}{
		{
			name: "GET with {sender} and {data}",
			urls: []string{"$GW/gw/{sender}/{data}.json"},
			want: "answer:\xab\xcd", requests: []string{"GET /gw/" + senderHex + "/" + dataHex + ".json"},
		},
		{
			name: "POST without {data}",
			urls: []string{"$GW/post/{sender}"},
			want: "answer:\xab\xcd", requests: []string{"POST /post/" + senderHex},
		},
		{
			name: "a failing gateway, then the next",
			urls: []string{"$GW/fail/500/{data}", "$GW/fail/json/{data}", "ftp://example.com/{data}", "$GW/gw/{data}"},
			want: "answer:\xab\xcd", requests: []string{"GET /fail/500/" + dataHex, "GET /fail/json/" + dataHex, "GET /gw/" + dataHex},
		},
		{
			name:     "at most 4 gateway URLs are tried",
			urls:     []string{"$GW/fail/500/1", "$GW/fail/500/2", "$GW/fail/500/3", "$GW/fail/500/4", "$GW/gw/{data}", "$GW/gw/{data}"},
			wantErr:  "HTTP 500",
			requests: []string{"POST /fail/500/1", "POST /fail/500/2", "POST /fail/500/3", "POST /fail/500/4"},
		},
		{
			name:    "a 4xx answer stops the search",
			urls:    []string{"$GW/fail/400/{data}", "$GW/gw/{data}"},
			wantErr: "HTTP 400", requests: []string{"GET /fail/400/" + dataHex},
		},
		{
			name:    "404 means the gateway does not know the name",
			urls:    []string{"$GW/fail/404/{data}", "$GW/gw/{data}"},
			wantErr: "HTTP 404", notFound: true, requests: []string{"GET /fail/404/" + dataHex},
		},
		{
			name: "the sender must be the contract called",
			urls: []string{"$GW/gw/{data}"}, sender: common.HexToAddress("0x0000000000000000000000000000000000000bad"),
			wantErr: "is not the resolver",
		},
		{
			name: "no gateway URL",
			urls: []string{}, wantErr: "no gateway URL",
		},
		{
			name: "redirected again, within bounds",
			urls: []string{"$GW/gw/{data}"}, bounces: maxLookups - 1,
			want: "answer:\xab\xcd",
		},
		{
			name: "redirected forever",
			urls: []string{"$GW/gw/{data}"}, bounces: maxLookups + 10,
			wantErr: "still redirected after 4 off-chain lookups",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := newTestGateway(t, `{"data":"0xabcd"}`)
			urls := make([]string, len(tt.urls))
			for i, u := range tt.urls {
				urls[i] = strings.ReplaceAll(u, "$GW", gw.srv.URL)
			}
			sender := tt.sender
			if sender == (common.Address{}) {
				sender = resolverAddr
			}
			res := &offchainResolver{
				t: t, address: resolverAddr, sender: sender, urls: urls,
				callData: callData, extra: []byte("extra"), callback: [4]byte{0xde, 0xad, 0xbe, 0xef}, bounces: tt.bounces,
			}
			c := contract{caller: res, address: resolverAddr, abi: &ensResolver, timeout: time.Second}
			reader := ccipReader{client: newGatewayClient(GatewayOptions{AllowHTTP: true, AllowPrivate: true}, time.Second), timeout: time.Second, allowHTTP: true}
			got, err := reader.call(context.Background(), c, []byte{0x01, 0x02, 0x03, 0x04})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr == "" && string(got) != tt.want:
				t.Errorf("result %q, want %q", got, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrNotFound) != tt.notFound {
				t.Errorf("error %v: wraps ErrNotFound = %v, want %v", err, errors.Is(err, ErrNotFound), tt.notFound)
			}
			seen := gw.requests()
			if tt.requests != nil {
				var got []string
				for _, r := range seen {
					got = append(got, r.method+" "+r.path)
				}
				if strings.Join(got, "\n") != strings.Join(tt.requests, "\n") {
					t.Errorf("gateway requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.requests, "\n"))
				}
			}
			for _, r := range seen {
				if r.method != http.MethodPost {
					continue
				}
				if r.contentType != "application/json" || r.body["data"] != dataHex || r.body["sender"] != senderHex || len(r.body) != 2 {
					t.Errorf("POST %s: content type %q, body %v; want JSON {data: %s, sender: %s}", r.path, r.contentType, r.body, dataHex, senderHex)
				}
			}
		})
	}
}
