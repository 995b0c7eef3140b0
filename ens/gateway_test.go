package ens

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// publicIP is the address the guarded tests' gateway host names resolve to;
// the recording dialer connects it to the local TLS test server.
var publicIP = netip.MustParseAddr("203.0.113.7")

// fakeResolver answers gateway host names from a table.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ips, ok := r[host]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// recordingDialer records every address the gateway client tries to
// connect to, and connects publicIP to the test server; anything else is a
// connection that a guarded client must never have attempted.
type recordingDialer struct {
	target string // the test server's real address

	mu    sync.Mutex
	dials []string
}

func (d *recordingDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, addr)
	d.mu.Unlock()
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != publicIP.String() {
		return nil, fmt.Errorf("test dialer: no route to %s", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, d.target)
}

func (d *recordingDialer) attempted() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dials...)
}

// guardedGateway is a TLS gateway reached through the guard: paths
// /redirect/<n>/… redirect n times before answering, /to-loopback/…
// redirects to 127.0.0.1, /big/… answers 5 MiB (with a Content-Length),
// /stream/… 5 MiB without one, /hang/… never answers.
func guardedGateway(t *testing.T) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		switch parts[0] {
		case "redirect":
			n, _ := strconv.Atoi(parts[1])
			if n > 0 {
				http.Redirect(w, r, fmt.Sprintf("https://gw.example.com:%s/redirect/%d/%s", srv.URL[strings.LastIndex(srv.URL, ":")+1:], n-1, parts[2]), http.StatusFound)
				return
			}
		case "to-loopback":
			http.Redirect(w, r, srv.URL+"/gw/"+parts[1], http.StatusTemporaryRedirect)
			return
		case "big":
			w.Header().Set("Content-Length", strconv.Itoa(5<<20))
			_, _ = w.Write(make([]byte, 5<<20))
			return
		case "stream":
			chunk := []byte(strings.Repeat(" ", 64<<10))
			for range (5 << 20) / len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		case "hang":
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(`{"data":"0xabcd"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// guardOptions are gateway options whose host names resolve from a table
// and whose connections go through a recording dialer to srv.
func guardOptions(srv *httptest.Server) (*recordingDialer, GatewayOptions) {
	dialer := &recordingDialer{target: srv.Listener.Addr().String()}
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	opts := GatewayOptions{
		Resolver: fakeResolver{
			"gw.example.com":       {publicIP},
			"loopback.example.com": {netip.MustParseAddr("127.0.0.1")},
			"mixed.example.com":    {netip.MustParseAddr("10.0.0.1"), publicIP},
			"zoned.example.com":    {netip.MustParseAddr("fe80::1%eth0")},
		},
		Dial: dialer.Dial,
		// httptest's certificate names example.com.
		TLS: &tls.Config{RootCAs: pool, ServerName: "example.com", MinVersion: tls.VersionTLS12},
	}
	return dialer, opts
}

// TestGatewayGuard proves that no gateway request reaches a private
// address: every case is refused (or reaches only the public address) and
// the dialer never saw a private one.
func TestGatewayGuard(t *testing.T) {
	srv := guardedGateway(t)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	tests := []struct {
		name        string
		url         string
		allowHTTP   bool
		timeout     time.Duration
		wantErr     error    // nil: the answer comes back
		wantDialed  []string // every address a connection was attempted to
		wantMessage string   // a part of the (logged) error
	}{
		{name: "a public gateway", url: "https://gw.example.com:$P/gw/{data}", wantDialed: []string{"203.0.113.7:$P"}},
		{name: "127.0.0.1", url: "https://127.0.0.1:$P/gw/{data}", wantErr: ErrGatewayRefused, wantMessage: "127.0.0.1"},
		{name: "10.x", url: "https://10.1.2.3/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "cloud metadata 169.254.169.254", url: "https://169.254.169.254/latest/meta-data/{data}", wantErr: ErrGatewayRefused},
		{name: "192.168.x", url: "https://192.168.1.1/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "172.16.x", url: "https://172.20.0.1/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "CGNAT", url: "https://100.64.0.9/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "unspecified", url: "https://0.0.0.0:$P/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "multicast", url: "https://224.0.0.1/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "IPv6 loopback", url: "https://[::1]:$P/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "IPv6 unique local", url: "https://[fd00::1]/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "IPv6 link-local", url: "https://[fe80::1]/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "IPv6 loopback with a zone", url: "https://[::1%25lo]:$P/gw/{data}", wantErr: ErrGatewayRefused, wantMessage: "IPv6 zone"},
		{name: "IPv6 link-local with a zone", url: "https://[fe80::1%25eth0]:$P/gw/{data}", wantErr: ErrGatewayRefused, wantMessage: "IPv6 zone"},
		{name: "a public IPv6 address with a zone", url: "https://[2606:4700::1111%25eth0]/gw/{data}", wantErr: ErrGatewayRefused,
			wantMessage: "IPv6 zone"},
		{name: "a host name that resolves to a zoned address", url: "https://zoned.example.com:$P/gw/{data}", wantErr: ErrGatewayRefused,
			wantMessage: "zoned.example.com is an address with an IPv6 zone"},
		{name: "NAT64 of 127.0.0.1", url: "https://[64:ff9b::7f00:1]:$P/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "6to4 of 10.0.0.1", url: "https://[2002:a00:1::1]/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "IPv4-compatible 127.0.0.1", url: "https://[::7f00:1]:$P/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "IPv6 site-local", url: "https://[fec0::1]/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "benchmarking 198.18.x", url: "https://198.18.0.1/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "IETF protocol block 192.0.0.x", url: "https://192.0.0.8/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "reserved 240.x", url: "https://240.1.2.3/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "IPv4-mapped loopback", url: "https://[::ffff:127.0.0.1]:$P/gw/{data}", wantErr: ErrGatewayRefused},
		{name: "a host name that resolves to loopback", url: "https://loopback.example.com:$P/gw/{data}", wantErr: ErrGatewayRefused,
			wantMessage: "loopback.example.com resolves to 127.0.0.1"},
		{name: "a host name with a private and a public address", url: "https://mixed.example.com:$P/gw/{data}",
			wantDialed: []string{"203.0.113.7:$P"}},
		{name: "a redirect to loopback", url: "https://gw.example.com:$P/to-loopback/{data}", wantErr: ErrGatewayRefused,
			wantDialed: []string{"203.0.113.7:$P"}},
		{name: "three redirects", url: "https://gw.example.com:$P/redirect/3/{data}", wantDialed: []string{"203.0.113.7:$P"}},
		{name: "four redirects", url: "https://gw.example.com:$P/redirect/4/{data}", wantErr: ErrGatewayRefused,
			wantDialed: []string{"203.0.113.7:$P"}, wantMessage: "more than 3 redirects"},
		{name: "a 5 MiB body", url: "https://gw.example.com:$P/big/{data}", wantErr: ErrGatewayRefused,
			wantDialed: []string{"203.0.113.7:$P"}, wantMessage: "at most 1048576"},
		{name: "a 5 MiB body without a length", url: "https://gw.example.com:$P/stream/{data}", wantErr: ErrGatewayRefused,
			wantDialed: []string{"203.0.113.7:$P"}, wantMessage: "over 1048576 bytes"},
		{name: "plain http", url: "http://gw.example.com:$P/gw/{data}", wantErr: ErrGatewayRefused, wantMessage: "gateway_allow_http"},
		{name: "plain http, allowed, still guarded", url: "http://loopback.example.com:$P/gw/{data}", allowHTTP: true,
			wantErr: ErrGatewayRefused},
		{name: "an unknown host", url: "https://nowhere.example.com/gw/{data}", wantErr: ErrGatewayUnreachable},
		{name: "a gateway that never answers", url: "https://gw.example.com:$P/hang/{data}", timeout: 200 * time.Millisecond,
			wantErr: ErrGatewayUnreachable, wantDialed: []string{"203.0.113.7:$P"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialer, opts := guardOptions(srv)
			opts.AllowHTTP = tt.allowHTTP
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			reader := ccipReader{client: newGatewayClient(opts, timeout), timeout: timeout, allowHTTP: tt.allowHTTP}
			l := offchainLookup{Sender: common.HexToAddress("0x00000000000000000000000000000000000Ab1E5"),
				URLs: []string{strings.ReplaceAll(tt.url, "$P", port)}, CallData: []byte{1}}
			got, err := reader.ask(context.Background(), l)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr == nil && string(got) != "\xab\xcd":
				t.Errorf("answer %x", got)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			case tt.wantErr == ErrGatewayRefused && errors.Is(err, ErrGatewayUnreachable):
				t.Errorf("error %v is both refused and unreachable", err)
			}
			if tt.wantMessage != "" && !strings.Contains(err.Error(), tt.wantMessage) {
				t.Errorf("error %q lacks %q", err, tt.wantMessage)
			}
			dials := dialer.attempted()
			for _, d := range dials {
				host, _, _ := net.SplitHostPort(d)
				if ip, perr := netip.ParseAddr(host); perr != nil || !publicAddress(ip) {
					t.Errorf("a connection was attempted to %s", d)
				}
			}
			want := strings.ReplaceAll(strings.Join(tt.wantDialed, ","), "$P", port)
			// Redirects and retries may reuse or reopen the connection:
			// only which addresses were tried matters.
			if got := strings.Join(dedupe(dials), ","); got != want {
				t.Errorf("connections attempted to %q, want %q", got, want)
			}
		})
	}
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

func TestPublicAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "203.0.113.7": true, "2606:4700::1111": true, "172.32.0.1": true, "100.128.0.1": true,
		"127.0.0.1": false, "127.8.9.10": false, "10.255.0.1": false, "172.31.255.255": false, "192.168.0.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "100.127.255.255": false, "0.0.0.0": false, "224.0.0.251": false,
		"255.255.255.255": false, "::": false, "::1": false, "fc00::1": false, "fdff::1": false, "fe80::1": false,
		"ff02::1": false, "::ffff:10.0.0.1": false, "::ffff:8.8.8.8": true,
		// Zoned addresses: no prefix contains them, so only an allow-list
		// refuses them.
		"::1%lo": false, "fe80::1%eth0": false, "2606:4700::1111%eth0": false,
		// Special ranges the standard library calls global unicast.
		"64:ff9b::a00:1": false, "64:ff9b::808:808": false, "2002:a00:1::1": false, "::7f00:1": false, "::808:808": false,
		"fec0::1": false, "198.18.0.1": false, "198.19.255.255": false, "192.0.0.8": false, "240.0.0.1": false,
		"0.1.2.3": false, "198.20.0.1": true, "192.0.1.1": true, "2001:db8::1": true,
		// NAT64 local-use, SIIT's IPv4-translated, Teredo.
		"64:ff9b:1::a00:1": false, "64:ff9b:1:ffff::1": false, "::ffff:0:7f00:1": false, "::ffff:0:808:808": false,
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": false, "2001::1": false, "2001:1::1": true,
		// IPv4-mapped: the IPv4 address it carries decides.
		"::ffff:127.0.0.1": false, "::ffff:192.168.1.1": false,
	} {
		if got := publicAddress(netip.MustParseAddr(addr)); got != want {
			t.Errorf("publicAddress(%s) = %v, want %v", addr, got, want)
		}
	}
}

// With gateway_allow_private a gateway on loopback is fetched (tests and
// private deployments).
func TestGatewayAllowPrivate(t *testing.T) {
	dialer, opts := guardOptions(guardedGateway(t))
	srv := guardedGateway(t)
	opts.AllowPrivate = true
	opts.Dial = (&net.Dialer{}).DialContext
	reader := ccipReader{client: newGatewayClient(opts, 5*time.Second), timeout: 5 * time.Second}
	l := offchainLookup{URLs: []string{srv.URL + "/gw/{data}"}, CallData: []byte{1}}
	got, err := reader.ask(context.Background(), l)
	if err != nil || string(got) != "\xab\xcd" {
		t.Fatalf("answer %x, error %v", got, err)
	}
	if d := dialer.attempted(); len(d) != 0 {
		t.Errorf("the recording dialer was used: %v", d)
	}
}

// A zone names an interface of conclave's own host: refused even with
// gateway_allow_private, before any connection is attempted.
func TestGatewayZoneRefusedWhenPrivateAllowed(t *testing.T) {
	srv := guardedGateway(t)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	dialer, opts := guardOptions(srv)
	opts.AllowPrivate = true
	reader := ccipReader{client: newGatewayClient(opts, 5*time.Second), timeout: 5 * time.Second}
	for _, u := range []string{"https://[::1%25lo]:" + port + "/gw/{data}", "https://zoned.example.com:" + port + "/gw/{data}"} {
		_, err := reader.ask(context.Background(), offchainLookup{URLs: []string{u}, CallData: []byte{1}})
		if !errors.Is(err, ErrGatewayRefused) || !strings.Contains(err.Error(), "IPv6 zone") {
			t.Errorf("%s: error %v, want the zone refused", u, err)
		}
	}
	if d := dialer.attempted(); len(d) != 0 {
		t.Errorf("connections were attempted: %v", d)
	}
}
