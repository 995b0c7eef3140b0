package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/bot/fakeslack"
)

// TestServerLimits: the server every listener gets carries SPEC §12.2's
// limits.
func TestServerLimits(t *testing.T) {
	srv := newServer(http.NotFoundHandler(), defaultLimits)
	got := map[string]any{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout,
		"ReadTimeout":       srv.ReadTimeout,
		"WriteTimeout":      srv.WriteTimeout,
		"IdleTimeout":       srv.IdleTimeout,
		"MaxHeaderBytes":    srv.MaxHeaderBytes,
		"MaxBodyBytes":      defaultLimits.MaxBodyBytes,
	}
	want := map[string]any{
		"ReadHeaderTimeout": 5 * time.Second,
		"ReadTimeout":       15 * time.Second,
		"WriteTimeout":      30 * time.Second,
		"IdleTimeout":       60 * time.Second,
		"MaxHeaderBytes":    64 << 10,
		"MaxBodyBytes":      int64(64 << 10),
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
}

// bodyReads records what a handler got when it read the request body.
type bodyReads chan error

func (c bodyReads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, err := io.ReadAll(r.Body)
	c <- err
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	io.WriteString(w, "ok")
}

// serveTest runs serveHTTP with one listener on a free port until the test
// ends and returns its address.
func serveTest(t *testing.T, h http.Handler, l serverLimits) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveHTTP(ctx, []listener{{name: "http", addr: "127.0.0.1:0", handler: h, limits: l, ready: func(a string) { ready <- a }}})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serveHTTP: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveHTTP: %v", err)
		}
	})
	return addr
}

// shortLimits are the limits with timeouts short enough for a test to
// watch a connection being cut.
func shortLimits() serverLimits {
	l := defaultLimits
	l.ReadHeaderTimeout = 200 * time.Millisecond
	l.ReadTimeout = 300 * time.Millisecond
	return l
}

// waitClosed reads from conn until the server closes it; a connection
// still open after the guard deadline fails the test.
func waitClosed(t *testing.T, conn net.Conn) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open (read %q)", got)
	}
	return string(got)
}

// send opens a raw connection to addr and writes text on it.
func send(t *testing.T, addr, text string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, text); err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestSlowlorisHeadersAreCutOff(t *testing.T) {
	reads := make(bodyReads, 1)
	addr := serveTest(t, reads, shortLimits())
	// Headers that never end: a slowloris client keeps the request open.
	conn := send(t, addr, "GET /healthz HTTP/1.1\r\nHost: conclave\r\nX-Slow: 1\r\n")
	waitClosed(t, conn)
	select {
	case err := <-reads:
		t.Errorf("the handler ran for an unfinished request (%v)", err)
	default:
	}
}

func TestStalledBodyIsCutOff(t *testing.T) {
	reads := make(bodyReads, 1)
	addr := serveTest(t, reads, shortLimits())
	// Complete headers, then 10 of the 1000 announced bytes, then nothing.
	conn := send(t, addr, "POST /wallet/x HTTP/1.1\r\nHost: conclave\r\nContent-Length: 1000\r\n\r\n0123456789")
	var readErr error
	select {
	case readErr = <-reads:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's body read never ended")
	}
	var ne net.Error
	if !errors.As(readErr, &ne) || !ne.Timeout() {
		t.Errorf("body read error = %v, want a timeout", readErr)
	}
	waitClosed(t, conn)
}

func TestRequestBodiesAreCapped(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		status int
	}{
		{"at the cap", 64 << 10, http.StatusOK},
		{"one byte over", 64<<10 + 1, http.StatusRequestEntityTooLarge},
		{"5 MiB", 5 << 20, http.StatusRequestEntityTooLarge},
	}
	reads := make(bodyReads, 1)
	addr := serveTest(t, reads, defaultLimits)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post("http://"+addr+"/wallet/x", "text/plain", strings.NewReader(strings.Repeat("a", tt.size)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			readErr := <-reads
			if resp.StatusCode != tt.status {
				t.Errorf("status %d (read error %v), want %d", resp.StatusCode, readErr, tt.status)
			}
		})
	}
}

func TestLargeHeadersAreRefused(t *testing.T) {
	addr := serveTest(t, make(bodyReads, 1), defaultLimits)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: conclave\r\nX-Big: "+strings.Repeat("a", 128<<10)+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}

// TestOpsListener: with http.ops_addr the operations endpoints (and pprof
// when asked for) move to their own listener and the public one serves
// only the wallet page; without it everything shares http.addr and pprof
// is off by default.
func TestOpsListener(t *testing.T) {
	tests := []struct {
		name     string
		extra    string
		public   map[string]int
		ops      map[string]int
		splitOps bool
	}{
		{
			name:   "one listener",
			extra:  "",
			public: map[string]int{"/healthz": 200, "/metrics": 200, "/debug/pprof/": 404},
		},
		{
			name:     "ops listener with pprof",
			extra:    "ops_addr = \"127.0.0.1:0\"\npprof = true\npublic_url = \"https://wallet.example\"\n",
			splitOps: true,
			public:   map[string]int{"/healthz": 404, "/readyz": 404, "/metrics": 404, "/debug/pprof/": 404},
			ops:      map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/debug/pprof/": 200, "/debug/pprof/cmdline": 200},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{})
			path := r.config(t, "")
			rewrite(t, path, "addr = \"127.0.0.1:0\"\n", "addr = \"127.0.0.1:0\"\n"+tt.extra)
			p := start(t, path, nil)
			if tt.splitOps == (p.opsAddr == "") {
				t.Fatalf("ops listener at %q, want one: %v", p.opsAddr, tt.splitOps)
			}
			ctx := waitCtx(t)
			check := func(where string, routes map[string]int) {
				for route, want := range routes {
					resp, err := http.Get("http://" + where + route)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != want {
						t.Errorf("%s%s = %d, want %d", where, route, resp.StatusCode, want)
					}
				}
			}
			if tt.splitOps {
				(&process{addr: p.opsAddr}).waitReady(t, ctx, http.StatusOK)
				check(p.opsAddr, tt.ops)
			} else {
				p.waitReady(t, ctx, http.StatusOK)
			}
			check(p.addr, tt.public)
			// The wallet page is on the public listener: its answer, even for
			// an unknown link, carries the page's own headers.
			resp, err := http.Get("http://" + p.addr + "/wallet/x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("the public listener does not serve the wallet page: %d %v", resp.StatusCode, resp.Header)
			}
		})
	}
}

// TestHealthcheckAsksTheOpsListener: with http.ops_addr, /healthz is only
// there, and `conclave healthcheck` asks it.
func TestHealthcheckAsksTheOpsListener(t *testing.T) {
	addrs := []string{freeAddr(t), freeAddr(t)}
	r := newRig(t, fakeslack.Options{})
	path := r.config(t, "")
	rewrite(t, path, "addr = \"127.0.0.1:0\"\n", fmt.Sprintf("addr = %q\nops_addr = %q\n", addrs[0], addrs[1]))
	p := start(t, path, nil)
	if p.addr != addrs[0] || p.opsAddr != addrs[1] {
		t.Fatalf("serving on %s and %s, want %v", p.addr, p.opsAddr, addrs)
	}
	if code, out, errOut := cli(t, nil, "healthcheck", "--config", path); code != 0 || strings.TrimSpace(out) != "ok" {
		t.Errorf("healthcheck: exit %d, %q %q", code, out, errOut)
	}
}

// freeAddr is a loopback address with a port free a moment ago, for a
// configuration that must name its port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
