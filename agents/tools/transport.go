package tools

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// transport is how s is reached: its command over stdio, or its URL over
// Streamable HTTP with its headers.
func (s *server) transport(ctx context.Context, hc *http.Client, log *slog.Logger) mcp.Transport {
	if s.cfg.URL != "" {
		client := *hc
		client.Transport = headerTransport{next: cmpTransport(hc.Transport), header: s.cfg.Headers}
		return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &client}
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...) // #nosec G204 -- the operator's configured server command; no shell, no user input
	cmd.Env = []string{}
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
		cmd.Env = append(cmd.Env, k+"="+s.cfg.Env[k])
	}
	cmd.Stderr = stderrLog(ctx, log.With(slog.String("server", s.cfg.Name)), s)
	return &mcp.CommandTransport{Command: cmd}
}

func cmpTransport(t http.RoundTripper) http.RoundTripper {
	if t == nil {
		return http.DefaultTransport
	}
	return t
}

// headerTransport sets a server's headers on every request.
type headerTransport struct {
	next   http.RoundTripper
	header map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
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
