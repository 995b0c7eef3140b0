package tools

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// transport is how s is reached: its command over stdio, or its URL over
// Streamable HTTP with its headers.
func (s *server) transport(ctx context.Context, hc *http.Client, log *slog.Logger) mcp.Transport {
	if s.cfg.URL != "" {
		client := originClient(hc, s.cfg.URL, s.cfg.Headers)
		client.Transport = limitTransport{next: client.Transport, limit: s.limit, over: &s.over}
		return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: client, MaxEventSize: int(s.limit) + 1}
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...) // #nosec G204 -- the operator's configured server command; no shell, no user input
	cmd.Env = []string{}
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
		cmd.Env = append(cmd.Env, k+"="+s.cfg.Env[k])
	}
	cmd.Stderr = stderrLog(ctx, log.With(slog.String("server", s.cfg.Name)), s)
	return &commandTransport{cmd: cmd, limit: s.limit, over: &s.over}
}

// limitTransport bounds each answer's body (limitBody).
type limitTransport struct {
	next  http.RoundTripper
	limit int64
	over  *atomic.Bool
}

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.Body != nil {
		resp.Body = limitBody(resp.Body, resp.Header.Get("Content-Type"), t.limit, t.over)
	}
	return resp, err
}

func cmpTransport(t http.RoundTripper) http.RoundTripper {
	if t == nil {
		return http.DefaultTransport
	}
	return t
}

// errOtherOrigin refuses a request of an HTTP server's session to an
// origin other than the configured URL's.
var errOtherOrigin = errors.New("a redirect to another origin is refused")

// originClient is hc for one HTTP server: its headers (which are secrets,
// a bearer token most often) go only to the origin of endpoint, and a
// request to any other origin, a redirect's included, is refused by the
// transport rather than sent — the headers being set by the transport, the
// client's own rule of dropping Authorization across hosts would not apply
// to them.
func originClient(hc *http.Client, endpoint string, header map[string]string) *http.Client {
	client := *hc
	client.Transport = headerTransport{next: cmpTransport(hc.Transport), origin: originOf(endpoint), header: header}
	return &client
}

// originOf is a URL's scheme, host and port, lowercase, the port written
// out ("https://crm.example:443"); empty for what does not parse.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// headerTransport sets a server's headers on the requests to its origin,
// and refuses any request to another.
type headerTransport struct {
	next   http.RoundTripper
	origin string
	header map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if originOf(r.URL.String()) != t.origin {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even when it refuses
		}
		return nil, errOtherOrigin
	}
	if len(t.header) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.header {
			r.Header.Set(k, v)
		}
	}
	return t.next.RoundTrip(r)
}

// stderrLog logs what a stdio server writes to its stderr, line by line at
// debug level, its secrets hidden.
func stderrLog(ctx context.Context, log *slog.Logger, s *server) io.Writer {
	return &lineLog{ctx: ctx, log: log, s: s}
}

type lineLog struct {
	ctx     context.Context
	log     *slog.Logger
	s       *server
	mu      sync.Mutex
	partial []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.log.DebugContext(l.ctx, "mcp: server stderr", slog.String("line", l.s.redact.Replace(string(l.partial[:i]))))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 4096 {
		l.partial = l.partial[:0]
	}
	return len(p), nil
}
