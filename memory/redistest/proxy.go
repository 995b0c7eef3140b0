package redistest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a loopback TCP proxy in front of a Redis, which a test takes
// down and brings back to stop Redis for its clients alone: while down,
// connections are refused and those open are cut, as when the server
// stops; the server itself (shared with other tests) is never touched.
type Proxy struct {
	t      testing.TB
	target string // host:port of the Redis behind
	addr   string // host:port the proxy listens on, kept across Down/Up

	mu    sync.Mutex
	ln    net.Listener // nil while down
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy in front of db's server and returns db as seen
// through it (same prefix and database, the proxy's address). The proxy
// stops when t ends. Only redis:// URLs of one node can be proxied; t is
// skipped with another.
func NewProxy(t testing.TB, db DB) (*Proxy, DB) {
	t.Helper()
	u, err := url.Parse(db.URL)
	if err != nil || u.Scheme != "redis" || u.Port() == "" {
		t.Skipf("redistest: a proxy needs a redis://host:port URL in %s", EnvURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{t: t, target: u.Host, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.Down()
		p.wg.Wait()
	})
	u.Host = p.addr
	return p, DB{URL: u.String(), Prefix: db.Prefix}
}

// Addr returns the host:port the proxy listens on, up or down.
func (p *Proxy) Addr() string { return p.addr }

// Down refuses new connections and cuts the open ones. Down when down does
// nothing.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	_ = p.ln.Close()
	p.ln = nil
	for c := range p.conns {
		_ = c.Close()
	}
}

// Up accepts connections again, on the same address. Up when up does
// nothing.
func (p *Proxy) Up() {
	p.t.Helper()
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if up {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("redistest: proxy back on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// serve accepts on ln until it is closed.
func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(ln, c) })
		}
	})
}

// pipe joins client c to a new connection to the target until either side
// closes or the proxy goes down.
func (p *Proxy) pipe(ln net.Listener, c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln { // went down meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var copies sync.WaitGroup
	copies.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
	copies.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
	copies.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}
