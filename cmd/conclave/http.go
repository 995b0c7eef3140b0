package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"
)

// readinessCheck is one dependency /readyz looks at. check's error is
// logged; /readyz shows only its reason class (unreachable, not connected),
// never an address or an upstream's text.
type readinessCheck struct {
	name   string
	reason string
	check  func(context.Context) error
}

// newOpsMux serves /healthz (the process is alive) and /readyz (every check
// passes); the caller mounts /metrics and, on a shared listener, the
// wallet page.
func newOpsMux(checks []readinessCheck, log *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		status := http.StatusOK
		report := map[string]string{}
		for _, c := range checks {
			if err := c.check(ctx); err != nil {
				status = http.StatusServiceUnavailable
				report[c.name] = c.reason
				if shown, ok := errors.AsType[shownReason](err); ok {
					report[c.name] = shown.text
				}
				log.Debug("readyz: a check fails", slog.String("check", c.name), slog.Any(logErr, err))
				continue
			}
			report[c.name] = "ok"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(report)
	})
	return mux
}

// mountPprof adds the runtime profiles under /debug/pprof/.
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// serverLimits bound what one client may hold of the HTTP server: slow
// headers (slowloris), a stalled body, a stuck reader, idle connections,
// large headers and bodies.
type serverLimits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	MaxBodyBytes      int64
}

// defaultLimits are every listener's limits (SPEC §12.2).
var defaultLimits = serverLimits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       15 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       60 * time.Second,
	MaxHeaderBytes:    64 << 10,
	MaxBodyBytes:      64 << 10,
}

// pprofWriteTimeout replaces WriteTimeout on an ops listener serving
// pprof, so the default 30 s CPU profile fits.
const pprofWriteTimeout = 2 * time.Minute

// newServer builds an http.Server with the limits; bodies over
// MaxBodyBytes fail to read (the handler answers 413 or an error).
func newServer(h http.Handler, l serverLimits) *http.Server {
	return &http.Server{
		Handler:           http.MaxBytesHandler(h, l.MaxBodyBytes),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// listener is one address conclave serves and what it serves there.
type listener struct {
	name    string // "http" or "ops", for errors and logs
	addr    string
	handler http.Handler
	limits  serverLimits
	ready   func(addr string) // when set, gets the bound address
}

// serveHTTP binds every listener, then serves them until ctx ends and shuts
// them down gracefully. A listener that fails ends them all.
func serveHTTP(ctx context.Context, listeners []listener) error {
	type bound struct {
		listener
		ln  net.Listener
		srv *http.Server
	}
	var all []bound
	for _, l := range listeners {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			for _, b := range all {
				_ = b.ln.Close() // unused; the listen error is the one to report
			}
			return fmt.Errorf("http: listen on %s (%s): %w", l.addr, l.name, err)
		}
		all = append(all, bound{l, ln, newServer(l.handler, l.limits)})
	}
	errc := make(chan error, len(all))
	for _, b := range all {
		go func() { errc <- b.srv.Serve(b.ln) }()
	}
	for _, b := range all {
		if b.ready != nil {
			b.ready(b.ln.Addr().String())
		}
	}
	var first error
	pending := len(all)
	select {
	case err := <-errc:
		first, pending = fmt.Errorf("http: %w", err), pending-1
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, b := range all {
		if err := b.srv.Shutdown(shutdownCtx); err != nil && first == nil {
			first = fmt.Errorf("http: shutdown %s: %w", b.name, err)
		}
	}
	for range pending {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = fmt.Errorf("http: %w", err)
		}
	}
	return first
}

// runHealthcheck asks the local bot's /healthz, for container health
// checks (the image has no curl).
func runHealthcheck(ctx context.Context, args []string, e env) error {
	fs := newFlags("healthcheck", e)
	load := configFlag(fs, e)
	url := fs.String("url", "", "URL to check (default: /healthz on the configured http.ops_addr, else http.addr)")
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	target := *url
	if target == "" {
		cfg, _, err := load()
		if err != nil {
			return err
		}
		target = "http://" + localAddr(cmp.Or(cfg.HTTP.OpsAddr, cfg.HTTP.Addr)) + "/healthz"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", target, resp.Status)
	}
	fmt.Fprintln(e.stdout, "ok")
	return nil
}

// localAddr turns a listen address (":8080", "0.0.0.0:8080") into one to
// dial on this host.
func localAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" || strings.HasPrefix(host, "[") {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
