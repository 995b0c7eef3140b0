package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// readinessCheck is one dependency /readyz looks at.
type readinessCheck struct {
	name  string
	check func(context.Context) error
}

// newOpsMux serves /healthz (the process is alive), /readyz (every check
// passes) and whatever else is mounted by the caller (metrics, the wallet
// page).
func newOpsMux(checks []readinessCheck) *http.ServeMux {
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
				report[c.name] = err.Error()
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

// serveHTTP listens on addr and serves h until ctx ends, then shuts down
// gracefully. ready, when set, gets the bound address.
func serveHTTP(ctx context.Context, addr string, h http.Handler, ready func(string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("http: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// runHealthcheck asks the local bot's /healthz, for container health
// checks (the image has no curl).
func runHealthcheck(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	load := configFlag(fs, e)
	url := fs.String("url", "", "URL to check (default: /healthz on the configured http.addr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	target := *url
	if target == "" {
		cfg, _, err := load()
		if err != nil {
			return err
		}
		target = "http://" + localAddr(cfg.HTTP.Addr) + "/healthz"
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
