package tools_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclavehq/conclave/agents/tools"
	"github.com/conclavehq/conclave/agents/tools/mcptest"
	"github.com/conclavehq/conclave/internal/testlog"
)

func TestMain(m *testing.M) {
	mcptest.ServeStdioIfAsked()
	os.Exit(m.Run())
}

const secret = "s3cr3t-token-value"

// stdioServer is this test binary serving mcptest over stdio.
func stdioServer(t *testing.T, name string) (tools.Server, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(t.TempDir(), "starts")
	env := mcptest.StdioEnvFor(starts)
	env["MCPTEST_SECRET"] = secret
	return tools.Server{Name: name, Command: []string{exe}, Env: env, Timeout: 5 * time.Second}, starts
}

func httpServer(t *testing.T, name string) tools.Server {
	t.Helper()
	srv := httptest.NewServer(mcptest.Handler())
	t.Cleanup(srv.Close)
	return tools.Server{Name: name, URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer " + secret}, Timeout: 5 * time.Second}
}

// calls counts OnCall reports as "server/tool/outcome".
type calls struct {
	mu  sync.Mutex
	got []string
}

func (c *calls) on(server, tool, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, server+"/"+tool+"/"+outcome)
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// run starts a hub over servers until the test ends and waits for its
// first connection attempts.
func run(t *testing.T, servers ...tools.Server) (*tools.Hub, *testlog.Buffer, *calls) {
	t.Helper()
	return runWith(t, tools.Options{}, servers...)
}

// runWith is run with opts, its logger, OnCall and backoffs set.
func runWith(t *testing.T, opts tools.Options, servers ...tools.Server) (*tools.Hub, *testlog.Buffer, *calls) {
	t.Helper()
	logs := &testlog.Buffer{}
	c := &calls{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.OnCall, opts.MinBackoff, opts.MaxBackoff = c.on, 10*time.Millisecond, 50*time.Millisecond
	h, err := tools.New(servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a secret reached the log:\n%s", logs)
		}
	})
	select {
	case <-h.Started():
	case <-time.After(30 * time.Second):
		t.Fatal("servers were not tried within 30s")
	}
	return h, logs, c
}

// eventually waits until cond holds, failing the test after 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLogged waits until the log satisfies cond, failing the test after
// 20 s.
func waitLogged(t *testing.T, logs *testlog.Buffer, what string, cond func(logged string) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := logs.Wait(ctx, cond); err != nil {
		t.Fatalf("still waiting for %s in the log: %v\n%s", what, err, logs)
	}
}

func names(h *tools.Hub, selection ...string) []string {
	var out []string
	for _, t := range h.Tools(selection) {
		out = append(out, t.Name)
	}
	return out
}

func TestNewRejects(t *testing.T) {
	ok := tools.Server{Name: "crm", URL: "http://x"}
	tests := []struct {
		name    string
		servers []tools.Server
		want    string
	}{
		{"bad name", []tools.Server{{Name: "CRM Tools", URL: "http://x"}}, `mcp: server "CRM Tools": name must be [a-z0-9_-]+`},
		{"empty name", []tools.Server{{URL: "http://x"}}, `mcp: server "": name must be [a-z0-9_-]+`},
		{"twice", []tools.Server{ok, ok}, `mcp: server "crm": name is used twice`},
		{"separator in the name", []tools.Server{{Name: "crm__eu", URL: "http://x"}}, `mcp: server "crm__eu": name must not contain "__" (it joins server and tool names)`},
		{"neither", []tools.Server{{Name: "crm"}}, `mcp: server "crm": needs exactly one of command and url`},
		{"both", []tools.Server{{Name: "crm", URL: "http://x", Command: []string{"x"}}}, `needs exactly one of command and url`},
		{"empty command", []tools.Server{{Name: "crm", Command: []string{""}}}, `command is empty`},
		{"env on http", []tools.Server{{Name: "crm", URL: "http://x", Env: map[string]string{"A": "b"}}}, `env is for stdio servers`},
		{"headers on stdio", []tools.Server{{Name: "crm", Command: []string{"x"}, Headers: map[string]string{"A": "b"}}}, `headers are for HTTP servers`},
		{"negative timeout", []tools.Server{{Name: "crm", URL: "http://x", Timeout: -1}}, `timeout must not be negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tools.New(tt.servers, tools.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// Both transports offer the same tools and run calls the same way.
func TestTransports(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			srv := httpServer(t, "crm")
			if transport == "stdio" {
				srv, _ = stdioServer(t, "crm")
			}
			srv.Timeout = time.Second // the hang tool's bound
			h, _, c := run(t, srv)

			all := h.Tools([]string{"crm"})
			var lookup *struct{ desc, schema string }
			for _, tl := range all {
				if tl.Name == "crm__lookup_customer" {
					lookup = &struct{ desc, schema string }{tl.Description, string(tl.Parameters)}
				}
			}
			if lookup == nil {
				t.Fatalf("tools = %v, want crm__lookup_customer", names(h, "crm"))
			}
			if lookup.desc != "Finds a customer's id by name.\nReturns the id as text." || !strings.Contains(lookup.schema, `"name"`) || !strings.Contains(lookup.schema, `"type":"object"`) {
				t.Errorf("lookup_customer = %+v", *lookup)
			}
			if got := names(h, "crm/fail", "crm/fail", "nosuch", "crm/nosuch"); !reflect.DeepEqual(got, []string{"crm__fail"}) {
				t.Errorf("one tool selected = %v", got)
			}

			ctx := t.Context()
			if got, err := h.Call(ctx, "crm__lookup_customer", `{"name":"Ada Lovelace"}`); err != nil || got != "C45653" {
				t.Errorf("lookup = %q, %v", got, err)
			}
			if _, err := h.Call(ctx, "crm__lookup_customer", `{"name":"Nobody"}`); err == nil || !strings.Contains(err.Error(), `no customer named "Nobody"`) {
				t.Errorf("unknown customer: %v", err)
			}
			if _, err := h.Call(ctx, "crm__fail", ``); err == nil || err.Error() != "the CRM is down" {
				t.Errorf("fail: %v", err)
			}
			if _, err := h.Call(ctx, "crm__hang", `{}`); err == nil || err.Error() != "no answer within 1s" {
				t.Errorf("hang: %v", err)
			}
			if _, err := h.Call(ctx, "crm__lookup_customer", `{"name":`); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
				t.Errorf("bad arguments: %v", err)
			}
			if _, err := h.Call(ctx, "crm__nosuch", `{}`); err == nil || !strings.Contains(err.Error(), `no tool "nosuch"`) {
				t.Errorf("unknown tool: %v", err)
			}
			if _, err := h.Call(ctx, "other__x", `{}`); err == nil || !strings.Contains(err.Error(), `no tool named "other__x"`) {
				t.Errorf("unknown server: %v", err)
			}
			want := []string{"crm/lookup_customer/ok", "crm/lookup_customer/error", "crm/fail/error", "crm/hang/timeout",
				"crm/lookup_customer/failed", "crm/nosuch/unknown", "//unknown"}
			if got := c.list(); !reflect.DeepEqual(got, want) {
				t.Errorf("counted %v\nwant %v", got, want)
			}
			// The session survives a timed-out call.
			if got, err := h.Call(ctx, "crm__lookup_customer", `{"name":"Grace Hopper"}`); err != nil || got != "C10001" {
				t.Errorf("after the timeout: %q, %v", got, err)
			}
		})
	}
}

// The tool list follows notifications/tools/list_changed.
func TestListChanged(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			srv := httpServer(t, "crm")
			if transport == "stdio" {
				srv, _ = stdioServer(t, "crm")
			}
			h, _, _ := run(t, srv)
			if got := names(h, "crm/late_tool"); got != nil {
				t.Fatalf("late_tool before it was added: %v", got)
			}
			if _, err := h.Call(t.Context(), "crm__add_tool", `{}`); err != nil {
				t.Fatal(err)
			}
			eventually(t, "late_tool to be listed", func() bool { return len(names(h, "crm/late_tool")) == 1 })
			if got, err := h.Call(t.Context(), "crm__late_tool", `{}`); err != nil || got != "late" {
				t.Errorf("late_tool = %q, %v", got, err)
			}
		})
	}
}

// A stdio server that exits is started again; its env reaches it and its
// secrets never reach the log (its stderr is logged at debug level).
func TestRestartsStdioServer(t *testing.T) {
	srv, starts := stdioServer(t, "crm")
	h, logs, c := run(t, srv)
	if got, err := h.Call(t.Context(), "crm__secret", `{}`); err != nil || got != "secret="+secret {
		t.Errorf("secret = %q, %v", got, err)
	}
	if _, err := h.Call(t.Context(), "crm__crash", `{}`); err == nil {
		t.Error("crash answered")
	}
	eventually(t, "the server to be started again", func() bool {
		got, err := h.Call(t.Context(), "crm__starts", `{}`)
		return err == nil && got == "2"
	})
	if b, _ := os.ReadFile(starts); strings.Count(string(b), "\n") != 2 {
		t.Errorf("starts file: %q", b)
	}
	for _, want := range []string{`"msg":"mcp: server went away; restarting it"`, `"line":"mcptest: serving on stdio with secret ****"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	if got := c.list(); len(got) < 2 || got[1] != "crm/crash/failed" {
		t.Errorf("counted %v", got)
	}
}

// A server that cannot be reached leaves its tools out (WARN) while the
// others work; it is connected once it comes up.
func TestUnreachableServer(t *testing.T) {
	down := httptest.NewServer(mcptest.Handler())
	url := down.URL
	down.Close()
	missing := tools.Server{Name: "gone", Command: []string{filepath.Join(t.TempDir(), "no-such-binary")}, Env: map[string]string{"TOKEN": secret}}
	h, logs, c := run(t, tools.Server{Name: "crm", URL: url, Headers: map[string]string{"X-Api-Key": secret}, Timeout: 2 * time.Second}, missing, httpServer(t, "ok"))
	if got := names(h, "crm", "gone"); got != nil {
		t.Errorf("tools of unreachable servers: %v", got)
	}
	if got := names(h, "ok/fail"); !reflect.DeepEqual(got, []string{"ok__fail"}) {
		t.Errorf("the reachable server's tools: %v", got)
	}
	if _, err := h.Call(t.Context(), "crm__lookup_customer", `{}`); err == nil || !strings.HasPrefix(err.Error(), "server crm is not available: ") {
		t.Errorf("call to a down server: %v", err)
	}
	if got := c.list(); !reflect.DeepEqual(got, []string{"crm/lookup_customer/unavailable"}) {
		t.Errorf("counted %v", got)
	}
	for _, want := range []string{`"level":"WARN","msg":"mcp: server unreachable; its agents go without its tools","component":"mcp","server":"crm"`, `"server":"gone"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
}

func TestProbe(t *testing.T) {
	h, err := tools.New([]tools.Server{httpServer(t, "crm"), {Name: "gone", Command: []string{filepath.Join(t.TempDir(), "nope")}}}, tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := h.Probe(t.Context())
	if len(got) != 2 || got[0].Server != "crm" || got[0].Err != nil || got[1].Server != "gone" || got[1].Err == nil {
		t.Fatalf("probe = %+v", got)
	}
	var lookup tools.ToolInfo
	for _, ti := range got[0].Tools {
		if ti.Tool == "lookup_customer" {
			lookup = ti
		}
	}
	if lookup != (tools.ToolInfo{Name: "crm__lookup_customer", Tool: "lookup_customer", Description: "Finds a customer's id by name."}) {
		t.Errorf("lookup_customer = %+v", lookup)
	}
}

// The cost conclave adds per tool call, the tool's own time excluded (the
// tool answers at once): the SDK's JSON-RPC round trip over each transport
// plus the hub's look-up and result handling, and listing an agent's
// tools for a request.
func BenchmarkCall(b *testing.B) {
	for _, transport := range []string{"stdio", "http"} {
		b.Run(transport, func(b *testing.B) {
			h := benchHub(b, transport)
			b.ReportAllocs()
			for b.Loop() {
				if got, err := h.Call(b.Context(), "crm__lookup_customer", `{"name":"Ada Lovelace"}`); err != nil || got != "C45653" {
					b.Fatalf("call = %q, %v", got, err)
				}
			}
		})
	}
}

func BenchmarkTools(b *testing.B) {
	h := benchHub(b, "http")
	b.ReportAllocs()
	for b.Loop() {
		if n := len(h.Tools([]string{"crm"})); n < 4 {
			b.Fatalf("%d tools", n)
		}
	}
}

// benchHub runs a hub connected to mcptest over transport until the
// benchmark ends.
func benchHub(b *testing.B, transport string) *tools.Hub {
	b.Helper()
	h, err := tools.New([]tools.Server{benchServer(b, transport)}, tools.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	<-h.Started()
	if len(h.Tools([]string{"crm"})) == 0 {
		b.Fatal("server not connected")
	}
	return h
}

func benchServer(b *testing.B, transport string) tools.Server {
	b.Helper()
	if transport == "http" {
		srv := httptest.NewServer(mcptest.Handler())
		b.Cleanup(srv.Close)
		return tools.Server{Name: "crm", URL: srv.URL, Timeout: 5 * time.Second}
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	return tools.Server{Name: "crm", Command: []string{exe}, Env: mcptest.StdioEnvFor(filepath.Join(b.TempDir(), "starts")), Timeout: 5 * time.Second}
}

// An HTTP server that goes away and comes back (a new process on the same
// address, which knows nothing of the old session) is connected again.
func TestHTTPServerComesBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	first := &http.Server{Handler: mcptest.Handler()}
	go first.Serve(ln)
	h, logs, _ := run(t, tools.Server{Name: "crm", URL: "http://" + addr, Timeout: 2 * time.Second})
	if got, err := h.Call(t.Context(), "crm__lookup_customer", `{"name":"Ada Lovelace"}`); err != nil || got != "C45653" {
		t.Fatalf("before: %q, %v", got, err)
	}
	first.Close()

	var ln2 net.Listener
	eventually(t, "the address to be free again", func() bool {
		ln2, err = net.Listen("tcp", addr)
		return err == nil
	})
	second := &http.Server{Handler: mcptest.Handler()}
	go second.Serve(ln2)
	t.Cleanup(func() { second.Close() })
	eventually(t, "a call to succeed against the new server", func() bool {
		got, err := h.Call(t.Context(), "crm__lookup_customer", `{"name":"Ada Lovelace"}`)
		return err == nil && got == "C45653"
	})
	if strings.Count(logs.String(), `"msg":"mcp: connected"`) < 2 {
		t.Errorf("not connected again:\n%s", logs)
	}
}

// headerSeen records, per request, whether the secret header came along.
type headerSeen struct {
	mu       sync.Mutex
	requests int
	withKey  int
}

func (h *headerSeen) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.requests++
		if strings.Contains(r.Header.Get("Authorization"), secret) {
			h.withKey++
		}
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *headerSeen) counts() (requests, withKey int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests, h.withKey
}

// A server's headers go only to its configured origin: an MCP host that
// redirects (307) every request to a second loopback origin, itself a
// working MCP server, is not followed there, and the second origin never
// sees the header — nor any request. A redirect within the origin is
// followed, the headers with it.
func TestHeadersStayWithTheirOrigin(t *testing.T) {
	other := &headerSeen{}
	second := httptest.NewServer(other.wrap(mcptest.Handler()))
	t.Cleanup(second.Close)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, second.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(first.Close)

	same := &headerSeen{}
	mux := http.NewServeMux()
	mux.Handle("/real", same.wrap(mcptest.Handler()))
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/real", http.StatusTemporaryRedirect)
	})
	within := httptest.NewServer(mux)
	t.Cleanup(within.Close)

	header := map[string]string{"Authorization": "Bearer " + secret}
	h, logs, _ := run(t,
		tools.Server{Name: "moved", URL: first.URL + "/mcp", Headers: header, Timeout: 2 * time.Second},
		tools.Server{Name: "crm", URL: within.URL + "/mcp", Headers: header, Timeout: 2 * time.Second})

	if got := names(h, "moved"); got != nil {
		t.Errorf("the redirected server's tools: %v", got)
	}
	if _, err := h.Call(t.Context(), "moved__lookup_customer", `{"name":"Ada Lovelace"}`); err == nil || !strings.Contains(err.Error(), "another origin is refused") {
		t.Errorf("call through a cross-origin redirect: %v", err)
	}
	if n, withKey := other.counts(); n != 0 || withKey != 0 {
		t.Errorf("the second origin saw %d requests, %d with the header", n, withKey)
	}
	if !strings.Contains(logs.String(), "another origin is refused") {
		t.Errorf("the log does not say why:\n%s", logs)
	}

	if got, err := h.Call(t.Context(), "crm__lookup_customer", `{"name":"Ada Lovelace"}`); err != nil || got != "C45653" {
		t.Fatalf("through a same-origin redirect: %q, %v", got, err)
	}
	if n, withKey := same.counts(); n == 0 || withKey != n {
		t.Errorf("the same origin saw %d requests, %d with the header", n, withKey)
	}
}

// oneToolServer serves, over Streamable HTTP, an MCP server with one tool
// that answers answer.
func oneToolServer(t *testing.T, name, tool, answer string) tools.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "one", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: tool, Description: "Answers " + answer + "."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return tools.Server{Name: name, URL: srv.URL, Timeout: 5 * time.Second}
}

// A function name maps to exactly one (server, tool): "crm___x" is server
// crm_'s tool x when only it lists x, not server crm's tool _x; when both
// list such a tool the name is nobody's — not offered, not called.
func TestToolNamesMapExactly(t *testing.T) {
	t.Run("the server that lists the tool", func(t *testing.T) {
		h, _, c := run(t, httpServer(t, "crm"), oneToolServer(t, "crm_", "lookup_customer", "from crm_"))
		if got, err := h.Call(t.Context(), "crm___lookup_customer", `{}`); err != nil || got != "from crm_" {
			t.Fatalf("crm___lookup_customer = %q, %v", got, err)
		}
		if got, err := h.Call(t.Context(), "crm__lookup_customer", `{"name":"Ada Lovelace"}`); err != nil || got != "C45653" {
			t.Fatalf("crm__lookup_customer = %q, %v", got, err)
		}
		if got, want := c.list(), []string{"crm_/lookup_customer/ok", "crm/lookup_customer/ok"}; !reflect.DeepEqual(got, want) {
			t.Errorf("counted %v, want %v", got, want)
		}
	})
	t.Run("two servers give one name", func(t *testing.T) {
		h, logs, _ := run(t, oneToolServer(t, "crm", "_x", "from crm"), oneToolServer(t, "crm_", "x", "from crm_"))
		if got := names(h, "crm", "crm_"); got != nil {
			t.Errorf("offered %v, want nothing", got)
		}
		if got, err := h.Call(t.Context(), "crm___x", `{}`); err == nil {
			t.Errorf("crm___x = %q, want an error", got)
		}
		if !strings.Contains(logs.String(), "two servers' tools have this name") {
			t.Errorf("no warning:\n%s", logs)
		}
	})
}

// A server's URL query values and, with SecretArgs, its arguments are
// masked in its errors and logs, like its env and header values.
func TestURLAndArgumentsMasked(t *testing.T) {
	down := httptest.NewServer(mcptest.Handler())
	base := down.URL
	down.Close()
	servers := []tools.Server{
		{Name: "down", URL: base + "/mcp?token=" + secret, Timeout: 2 * time.Second},
		{Name: "gone", Command: []string{filepath.Join(t.TempDir(), "no-such-binary"), "--token", secret}, SecretArgs: true, Timeout: 2 * time.Second},
		// A server that writes its arguments to its stderr, which is logged.
		{Name: "echo", Command: []string{"/bin/sh", "-c", `echo "my args: $*" >&2; exit 3`, "sh", "--token", secret}, SecretArgs: true, Timeout: 2 * time.Second},
	}
	h, logs, _ := run(t, servers...)
	waitLogged(t, logs, "the echo server's stderr", func(s string) bool { return strings.Contains(s, "my args: ") })
	for _, name := range []string{"down__x", "gone__x", "echo__x"} {
		if _, err := h.Call(t.Context(), name, `{}`); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: %v", name, err)
		}
	}
	p, err := tools.New(servers, tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Probe(t.Context()) {
		if r.Err == nil || strings.Contains(r.Err.Error(), secret) {
			t.Errorf("probe of %s: %v", r.Server, r.Err)
		}
	}
	if !strings.Contains(logs.String(), "token=****") || !strings.Contains(logs.String(), "my args: **** ****") {
		t.Errorf("the log does not show the masked URL:\n%s", logs)
	}
}
