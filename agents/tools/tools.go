// Package tools connects conclave to MCP servers and gives agents their
// tools: it keeps one client session per configured server (stdio or
// Streamable HTTP, with github.com/modelcontextprotocol/go-sdk), restarts a
// server that goes away with backoff, follows tools/list_changed, and runs
// the calls a model asks for. The engine reaches it through agents.Toolbox.
package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/internal/redact"
)

// Separator joins a server's name and a tool's name into the function name
// the model sees: "crm__lookup_customer".
const Separator = "__"

// DefaultTimeout bounds a tool call (and a connection attempt) when a
// server sets no timeout.
const DefaultTimeout = 30 * time.Second

// Outcomes of a call, the outcome label of conclave_tool_calls_total.
const (
	OutcomeOK          = "ok"          // the tool answered
	OutcomeError       = "error"       // the tool answered with isError
	OutcomeTimeout     = "timeout"     // no answer within the server's timeout
	OutcomeFailed      = "failed"      // the call failed (connection lost, protocol error, bad arguments)
	OutcomeUnavailable = "unavailable" // the server is not connected
	OutcomeUnknown     = "unknown"     // no such tool
	OutcomeCanceled    = "canceled"    // the turn ended first
)

// ServerNameRE is what a server's name may be; it must not contain
// Separator either.
var ServerNameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

// functionNameRE is what OpenAI accepts as a function name.
var functionNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Server is one [[mcp.servers]] entry, its "$NAME" values already read
// from the environment.
type Server struct {
	Name    string
	Command []string          // stdio: the program and its arguments …
	Env     map[string]string // … and its whole environment (nothing else is inherited)
	URL     string            // Streamable HTTP endpoint (exactly one of Command and URL)
	Headers map[string]string // HTTP: sent with every request
	Timeout time.Duration     // per call; DefaultTimeout when zero
	// SecretArgs marks Command's arguments as secrets (secret_args): they
	// are masked wherever the server's errors and logs could quote them.
	SecretArgs bool
}

// Options are the hub's collaborators and pacing.
type Options struct {
	Logger *slog.Logger // nil: discard
	// OnCall is told each call's server, tool and outcome (metrics).
	OnCall func(server, tool, outcome string)
	// HTTPClient carries Streamable HTTP sessions; nil: a plain client.
	HTTPClient *http.Client
	// MinBackoff and MaxBackoff pace reconnections: the wait starts at
	// MinBackoff (0.5 s), doubles after each failure, up to MaxBackoff
	// (30 s), and starts again after a session that stayed up MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxResultBytes bounds one message read from a server: an HTTP
	// answer, a streamed event, a stdio line (tools.max_result_bytes;
	// DefaultMaxResultBytes when zero). A call whose answer passes it
	// fails with "result too large".
	MaxResultBytes int64
}

// Hub holds the sessions with every configured server. Build it with New,
// keep it connected with Run; Tools and Call are safe for concurrent use.
type Hub struct {
	servers []*server
	opts    Options
	log     *slog.Logger
	started chan struct{} // closed once every server had its first attempt
	warned  sync.Map      // selections and names already warned about
}

// server is one configured server and its current session.
type server struct {
	cfg    Server
	redact *strings.Replacer // hides env and header values in errors
	limit  int64             // Options.MaxResultBytes
	over   atomic.Bool       // a read passed limit since the last call ended

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []*mcp.Tool // sorted by name
	defs    []llm.Tool  // tools as the model sees them, same order; nil Name when unusable
	err     error       // why it is not connected
	changed chan struct{}
}

// New checks the servers and returns a hub; it starts nothing. Errors name
// the server.
func New(servers []Server, opts Options) (*Hub, error) {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.MinBackoff = cmp.Or(opts.MinBackoff, 500*time.Millisecond)
	opts.MaxBackoff = cmp.Or(opts.MaxBackoff, 30*time.Second)
	opts.MaxResultBytes = cmp.Or(opts.MaxResultBytes, DefaultMaxResultBytes)
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	h := &Hub{opts: opts, log: opts.Logger.With(slog.String("component", "mcp")), started: make(chan struct{})}
	var errs []error
	seen := map[string]bool{}
	for _, s := range servers {
		if err := check(s, seen); err != nil {
			errs = append(errs, fmt.Errorf("mcp: server %q: %w", s.Name, err))
			continue
		}
		s.Timeout = cmp.Or(s.Timeout, DefaultTimeout)
		h.servers = append(h.servers, &server{cfg: s, redact: redactor(s), limit: opts.MaxResultBytes, err: errors.New("not connected yet"), changed: make(chan struct{}, 1)})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return h, nil
}

func check(s Server, seen map[string]bool) error {
	switch {
	case !ServerNameRE.MatchString(s.Name):
		return errors.New("name must be [a-z0-9_-]+")
	case strings.Contains(s.Name, Separator):
		return fmt.Errorf("name must not contain %q (it joins server and tool names)", Separator)
	case seen[s.Name]:
		return errors.New("name is used twice")
	case (len(s.Command) > 0) == (s.URL != ""):
		return errors.New("needs exactly one of command and url")
	case len(s.Command) > 0 && s.Command[0] == "":
		return errors.New("command is empty")
	case s.URL != "" && len(s.Env) > 0:
		return errors.New("env is for stdio servers (command); an HTTP server takes headers")
	case len(s.Command) > 0 && len(s.Headers) > 0:
		return errors.New("headers are for HTTP servers (url); a stdio server takes env")
	case s.Timeout < 0:
		return errors.New("timeout must not be negative")
	}
	seen[s.Name] = true
	return nil
}

// redactor replaces what of a server may be a secret — the values of its
// env and headers, its arguments when SecretArgs, and its URL's user-info,
// query values and path keys — wherever its errors could quote them.
func redactor(s Server) *strings.Replacer {
	var values []string
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			values = append(values, v)
		}
	}
	if s.SecretArgs && len(s.Command) > 1 {
		values = append(values, s.Command[1:]...)
	}
	return strings.NewReplacer(append(redact.URLPairs(s.URL), redact.ValuePairs(values...)...)...)
}

// Started is closed once every server has been tried once (connected or
// not), so a caller can wait for the tools before serving.
func (h *Hub) Started() <-chan struct{} { return h.started }

// Run connects every server and keeps it connected until ctx ends: a
// server that cannot be reached or goes away (a stdio server that exits)
// is tried again with backoff, its agents going without its tools
// meanwhile. It returns nil when ctx ends, after closing the sessions.
func (h *Hub) Run(ctx context.Context) error {
	var wg, first sync.WaitGroup
	for _, s := range h.servers {
		first.Add(1)
		wg.Go(func() { h.keep(ctx, s, first.Done) })
	}
	first.Wait()
	close(h.started)
	wg.Wait()
	return nil
}

// keep connects s again whenever its session ends, until ctx ends.
func (h *Hub) keep(ctx context.Context, s *server, tried func()) {
	log := h.log.With(slog.String("server", s.cfg.Name))
	wait := h.opts.MinBackoff
	for {
		sess, err := h.connect(ctx, s)
		if tried != nil {
			tried()
			tried = nil
		}
		if ctx.Err() != nil {
			if sess != nil {
				_ = sess.Close()
			}
			return
		}
		if err != nil {
			s.set(nil, nil, err)
			log.Warn("mcp: server unreachable; its agents go without its tools", slog.String("error", s.clean(err)), slog.Duration("retry_in", wait))
		} else {
			log.Info("mcp: connected", slog.Int("tools", len(s.list())))
			up := time.Now()
			h.serve(ctx, s, sess, log)
			if ctx.Err() != nil {
				return
			}
			if time.Since(up) >= h.opts.MaxBackoff {
				wait = h.opts.MinBackoff
			}
			log.Warn("mcp: server went away; restarting it", slog.Duration("retry_in", wait))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, h.opts.MaxBackoff)
	}
}

// serve holds a live session until it ends (or ctx does), listing the
// tools again whenever the server says they changed.
func (h *Hub) serve(ctx context.Context, s *server, sess *mcp.ClientSession, log *slog.Logger) {
	ended := make(chan struct{})
	go func() { _ = sess.Wait(); close(ended) }()
	defer func() {
		s.set(nil, nil, errors.New("the session ended"))
		_ = sess.Close() // it may have ended already; there is nothing more to do
		<-ended
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ended:
			return
		case <-s.changed:
			lctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			tools, err := listTools(lctx, sess)
			cancel()
			if err != nil {
				log.Warn("mcp: listing tools after a change failed", slog.String("error", s.clean(err)))
				continue
			}
			s.set(sess, tools, nil)
			log.Info("mcp: tools changed", slog.Int("tools", len(tools)))
		}
	}
}

// connect opens a session with s and lists its tools, within s's timeout.
func (h *Hub) connect(ctx context.Context, s *server) (*mcp.ClientSession, error) {
	sess, tools, err := dial(ctx, s, h.opts.HTTPClient, h.log)
	if err != nil {
		return nil, err
	}
	s.set(sess, tools, nil)
	return sess, nil
}

// dial connects to s and lists its tools.
func dial(ctx context.Context, s *server, hc *http.Client, log *slog.Logger) (*mcp.ClientSession, []*mcp.Tool, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "conclave", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	sess, err := client.Connect(cctx, s.transport(ctx, hc, log), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	tools, err := listTools(cctx, sess)
	if err != nil {
		_ = sess.Close()
		return nil, nil, err
	}
	return sess, tools, nil
}

func listTools(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, t)
	}
	slices.SortFunc(tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return tools, nil
}

// set records s's session and tools, and what the model is shown of them
// (built once per list, not per request).
func (s *server) set(sess *mcp.ClientSession, tools []*mcp.Tool, err error) {
	defs := make([]llm.Tool, len(tools))
	for i, t := range tools {
		defs[i] = llm.Tool{Name: s.cfg.Name + Separator + t.Name, Description: description(t), Parameters: schema(t)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session, s.tools, s.defs, s.err = sess, tools, defs, err
}

func (s *server) definitions() []llm.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.defs
}

func (s *server) list() []*mcp.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

func (s *server) current() (*mcp.ClientSession, []*mcp.Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session, s.tools, s.err
}

// clean is an error's text without the server's secrets.
func (s *server) clean(err error) string { return s.redact.Replace(err.Error()) }

func (h *Hub) server(name string) *server {
	for _, s := range h.servers {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

// Tools implements agents.Toolbox: the tools a selection names, from the
// servers connected now, in the order of the selection, without repeats.
func (h *Hub) Tools(selection []string) []llm.Tool {
	var out []llm.Tool
	seen := map[string]bool{}
	for _, entry := range selection {
		name, only, _ := strings.Cut(entry, "/")
		s := h.server(name)
		if s == nil {
			h.warnOnce("selection:"+entry, "mcp: tools names a server that is not configured", slog.String("entry", entry))
			continue
		}
		for _, def := range s.definitions() {
			if only != "" && def.Name != name+Separator+only {
				continue
			}
			if !functionNameRE.MatchString(def.Name) {
				h.warnOnce("name:"+def.Name, "mcp: tool skipped: its name is not a valid function name ([a-zA-Z0-9_-], at most 64)", slog.String("tool", def.Name))
				continue
			}
			if seen[def.Name] {
				continue
			}
			if s, _ := h.lookup(def.Name); s == nil {
				h.warnOnce("ambiguous:"+def.Name, "mcp: tool skipped: two servers' tools have this name", slog.String("tool", def.Name))
				continue
			}
			seen[def.Name] = true
			out = append(out, def)
		}
	}
	return out
}

func (h *Hub) warnOnce(key, msg string, attrs ...slog.Attr) {
	if _, loaded := h.warned.LoadOrStore(key, true); !loaded {
		h.log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
	}
}

func description(t *mcp.Tool) string {
	return cmp.Or(t.Description, t.Title, t.Name)
}

func schema(t *mcp.Tool) json.RawMessage {
	if t.InputSchema == nil {
		return nil
	}
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil
	}
	return b
}

// Call implements agents.Toolbox: it runs the tool name ("server__tool")
// with JSON arguments within the server's timeout and returns its text.
// Errors are short reasons for the model; they never carry the server's
// env or header values.
func (h *Hub) Call(ctx context.Context, name, arguments string) (string, error) {
	s, tool := h.lookup(name)
	if s == nil {
		h.count("", "", OutcomeUnknown)
		return "", fmt.Errorf("no tool named %q", name)
	}
	text, outcome, err := s.call(ctx, tool, arguments)
	h.count(s.cfg.Name, tool, outcome)
	return text, err
}

// lookup finds the server and tool of a function name, exactly: the one
// server whose listed tool it names. No server name holds the separator
// (New refuses it), yet "crm_" + "__" + "x" and "crm" + "__" + "_x" are
// still one name; a name two servers' tools give is nobody's (Tools never
// offers it). A name no listed tool gives is taken apart at its first
// separator, so the error can say which server is down.
func (h *Hub) lookup(name string) (*server, string) {
	var found *server
	var tool string
	for _, s := range h.servers {
		t, ok := strings.CutPrefix(name, s.cfg.Name+Separator)
		if !ok || !slices.ContainsFunc(s.list(), func(l *mcp.Tool) bool { return l.Name == t }) {
			continue
		}
		if found != nil {
			return nil, ""
		}
		found, tool = s, t
	}
	if found != nil {
		return found, tool
	}
	server, t, ok := strings.Cut(name, Separator)
	if s := h.server(server); ok && t != "" && s != nil {
		return s, t
	}
	return nil, ""
}

func (h *Hub) count(server, tool, outcome string) {
	if h.opts.OnCall != nil {
		h.opts.OnCall(server, tool, outcome)
	}
}

func (s *server) call(ctx context.Context, tool, arguments string) (string, string, error) {
	sess, tools, cerr := s.current()
	if sess == nil {
		return "", OutcomeUnavailable, fmt.Errorf("server %s is not available: %s", s.cfg.Name, s.redact.Replace(cerr.Error()))
	}
	if !slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == tool }) {
		return "", OutcomeUnknown, fmt.Errorf("server %s has no tool %q", s.cfg.Name, tool)
	}
	args := json.RawMessage(cmp.Or(strings.TrimSpace(arguments), "{}"))
	if !json.Valid(args) {
		return "", OutcomeFailed, errors.New("the arguments are not valid JSON")
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	res, err := sess.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if s.over.Swap(false) && err != nil {
		return "", OutcomeFailed, errResultTooLarge
	}
	switch {
	case err == nil && res.IsError:
		return "", OutcomeError, errors.New(cmp.Or(resultText(res), "the tool reported an error"))
	case err == nil:
		return resultText(res), OutcomeOK, nil
	case ctx.Err() != nil:
		return "", OutcomeCanceled, ctx.Err()
	case cctx.Err() != nil:
		return "", OutcomeTimeout, fmt.Errorf("no answer within %s", s.cfg.Timeout)
	default:
		return "", OutcomeFailed, fmt.Errorf("the call failed: %s", s.clean(err))
	}
}

// resultText is what the model reads of a result: its text content, other
// content named by kind, or the structured content as JSON.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, "[image]")
		case *mcp.AudioContent:
			parts = append(parts, "[audio]")
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", c.URI))
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else {
				parts = append(parts, "[resource]")
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}
