package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/internal/redact"
	"github.com/conclavehq/conclave/memory"
)

// runTrace prints the turn traces of one conversation, found by a Slack
// permalink, "C…/<thread_ts>" or its id.
func runTrace(ctx context.Context, args []string, e env) error {
	fs := newFlags("trace", e)
	load := configFlag(fs, e)
	turn := fs.String("turn", "", "print this turn's requests exactly as sent, and the responses")
	asJSON := fs.Bool("json", false, "print each turn's trace as one JSON line")
	ref, rest := positional(args, "turn", "config")
	if err := parseFlags(fs, rest, e); err != nil {
		return err
	}
	if ref == "" {
		return fmt.Errorf("%w: trace needs a Slack link, C…/<thread_ts>, a conversation id or a turn (see conclave trace --help)", errUsage)
	}
	if r, err := parseTraceRef(ref); err == nil && r.turn != "" && *turn == "" {
		*turn = r.turn // a notice's reference: that turn, in detail
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	store, err := openRedis(ctx, "trace", cfg, " (type /trace in conclave chat instead)")
	if err != nil {
		return err
	}
	defer store.Close()
	traces, err := findTraces(ctx, store, ref)
	if err != nil {
		return err
	}
	switch {
	case *turn != "":
		i := slices.IndexFunc(traces, func(t agents.Trace) bool { return t.TurnID == *turn })
		if i < 0 {
			return fmt.Errorf("trace: no turn %q in conversation %s", *turn, traces[0].Conversation)
		}
		return writeTurnDetail(escapingWriter{e.stdout}, traces[i])
	case *asJSON:
		enc := json.NewEncoder(e.stdout)
		for _, t := range traces {
			if err := enc.Encode(t); err != nil {
				return err
			}
		}
		return nil
	}
	for i, t := range traces {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		writeTurnBlock(escapingWriter{e.stdout}, t)
	}
	writeTraceTotal(e.stdout, traces)
	return nil
}

// escapingWriter is w with control characters escaped (ESC as \x1b),
// line breaks and tabs kept: a trace holds what models and tools wrote,
// and a terminal must not run their escape sequences.
type escapingWriter struct{ w io.Writer }

func (e escapingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, escapeControls(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escapeControls writes each control character of s (Unicode Cc, but
// line feed and tab, and the bidirectional overrides that reorder what a
// terminal shows) as a Go escape.
func escapeControls(s string) string {
	escape := func(r rune) bool {
		return r != '\n' && r != '\t' && (unicode.IsControl(r) || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069)
	}
	if strings.IndexFunc(s, escape) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !escape(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// costOf is a turn's cost as the tokens line ends with it ("" unpriced).
func costOf(usd *float64) string {
	if usd == nil {
		return ""
	}
	return fmt.Sprintf(", $%.6f", *usd)
}

// writeTraceTotal ends the turns with their sum; the cost when every
// turn with tokens has one.
func writeTraceTotal(w io.Writer, traces []agents.Trace) {
	var in, out int64
	calls := 0
	var cost float64
	priced := true
	for _, t := range traces {
		in += t.InputTokens
		out += t.OutputTokens
		calls += len(t.Calls)
		if t.CostUSD != nil {
			cost += *t.CostUSD
		} else if t.InputTokens+t.OutputTokens > 0 {
			priced = false
		}
	}
	total := ""
	if priced && in+out > 0 {
		total = costOf(&cost)
	}
	fmt.Fprintf(w, "\ntotal     %d turn(s), %d in, %d out, %d model call(s)%s\n", len(traces), in, out, calls, total)
}

// positional takes the first argument that is neither a flag nor the
// value of one of the flags named, so that the reference may come before
// or after the flags.
func positional(args []string, valued ...string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if isFlag(a) {
			name := strings.TrimLeft(a, "-")
			if slices.Contains(valued, name) {
				i++ // its value
			}
			continue
		}
		return a, append(slices.Clone(args[:i]), args[i+1:]...)
	}
	return "", args
}

// traceRef is what a reference names: a thread, a conversation, or a
// turn of a conversation known by the start of its id.
type traceRef struct{ channel, threadTS, conversation, idPrefix, turn string }

var (
	permalinkPath = regexp.MustCompile(`^/archives/([CGD][A-Z0-9]+)/p(\d{10})(\d{6})$`)
	threadRef     = regexp.MustCompile(`^([CGD][A-Z0-9]+)/(\d{10}\.\d{6})$`)
	// turnRef is a turn as a ⚠️ notice names it: the first eight
	// characters of its conversation's id, -t and its number.
	turnRef = regexp.MustCompile(`^([0-9a-f]{8})-t[1-9][0-9]*$`)
)

// traceFinder finds the conversations whose id starts with a prefix (both
// stores do); a turn reference needs it.
type traceFinder interface {
	TraceConversations(ctx context.Context, idPrefix string) ([]string, error)
}

// parseTraceRef reads a Slack permalink (a reply's names its thread in
// thread_ts), "C…/<thread_ts>" or a conversation id.
func parseTraceRef(ref string) (traceRef, error) {
	ref = strings.TrimSpace(ref)
	if strings.HasPrefix(ref, "https://") || strings.HasPrefix(ref, "http://") {
		u, err := url.Parse(ref)
		if err != nil {
			return traceRef{}, fmt.Errorf("trace: %q is not a Slack link: %w", ref, err)
		}
		m := permalinkPath.FindStringSubmatch(u.Path)
		if m == nil || !strings.HasSuffix(u.Hostname(), ".slack.com") {
			return traceRef{}, fmt.Errorf("trace: %q is not a Slack message link (https://<workspace>.slack.com/archives/C…/p…)", ref)
		}
		r := traceRef{channel: m[1], threadTS: m[2] + "." + m[3]}
		if ts := u.Query().Get("thread_ts"); ts != "" {
			r.threadTS = ts
		}
		return r, nil
	}
	if m := threadRef.FindStringSubmatch(ref); m != nil {
		return traceRef{channel: m[1], threadTS: m[2]}, nil
	}
	if _, err := uuid.Parse(ref); err == nil {
		return traceRef{conversation: ref}, nil
	}
	if m := turnRef.FindStringSubmatch(strings.ToLower(ref)); m != nil {
		return traceRef{idPrefix: m[1], turn: strings.ToLower(ref)}, nil
	}
	return traceRef{}, fmt.Errorf("trace: %q is neither a Slack link, C…/<thread_ts>, a conversation id nor a turn (a9355e42-t3)", ref)
}

// conversationOf is the one conversation with traces whose id starts
// with prefix.
func conversationOf(ctx context.Context, log agents.TraceLog, prefix string) (string, error) {
	f, ok := log.(traceFinder)
	if !ok {
		return "", errors.New("this store cannot find a conversation by its id's start; give the conversation id")
	}
	ids, err := f.TraceConversations(ctx, prefix)
	switch {
	case err != nil:
		return "", err
	case len(ids) == 0:
		return "", errors.New("no traces kept for a conversation starting " + prefix + " (traces are kept for trace.retention, when trace.enabled)")
	case len(ids) > 1:
		return "", fmt.Errorf("%d conversations start %s: give the conversation id (%s)", len(ids), prefix, strings.Join(ids, ", "))
	}
	return ids[0], nil
}

// findTraces reads the traces a reference leads to; none is an error
// saying what was looked for.
func findTraces(ctx context.Context, log agents.TraceLog, ref string) ([]agents.Trace, error) {
	r, err := parseTraceRef(ref)
	if err != nil {
		return nil, err
	}
	what := "conversation " + r.conversation
	if r.idPrefix != "" {
		what = "turn " + r.turn
		if r.conversation, err = conversationOf(ctx, log, r.idPrefix); err != nil {
			return nil, fmt.Errorf("trace: %s: %w", what, err)
		}
	}
	if r.conversation == "" {
		what = "thread " + r.channel + "/" + r.threadTS
		r.conversation, err = log.TraceRef(ctx, r.channel, r.threadTS)
		if errors.Is(err, memory.ErrNotFound) {
			return nil, fmt.Errorf("trace: no traces kept for %s (a reply's link leads to its thread only with its thread_ts; traces are kept for trace.retention)", what)
		}
		if err != nil {
			return nil, err
		}
	}
	traces, err := agents.ReadTraces(ctx, log, r.conversation)
	if err != nil {
		return nil, err
	}
	if len(traces) == 0 {
		return nil, fmt.Errorf("trace: no traces kept for %s (traces are kept for trace.retention, when trace.enabled)", what)
	}
	return traces, nil
}

func fmtMS(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

// writeTurnBlock prints one turn as an aligned block: who and what, its
// tokens, where its time went (the slowest step marked), its prompts,
// tool calls, posts and feedback.
func writeTurnBlock(w io.Writer, t agents.Trace) {
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-9s %s\n", label, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(w, "turn %s  %s (%s)  %s  %s\n", t.TurnID, t.Agent, t.Role, cmp.Or(t.Phase, "-"), t.Outcome)
	line("started", "%s  on %s", t.Started.UTC().Format("2006-01-02 15:04:05Z"), cmp.Or(t.Replica, "-"))
	in, out := 0, 0
	for _, c := range t.Calls {
		if c.Response != nil {
			in += c.Response.PromptTokens
			out += c.Response.CompletionTokens
		}
	}
	line("tokens", "%d in, %d out, %d model call(s)%s", in, out, len(t.Calls), costOf(t.CostUSD))
	tm := t.Timings
	steps := []struct {
		name string
		ms   int64
	}{{"queued", tm.QueuedMS}, {"render", tm.RenderMS}, {"model", tm.ModelMS}, {"tools", tm.ToolsMS}, {"post", tm.PostMS}}
	slowest := 0
	for i, s := range steps {
		if s.ms > steps[slowest].ms {
			slowest = i
		}
	}
	parts := []string{"total " + fmtMS(tm.TotalMS)}
	for i, s := range steps {
		p := s.name + " " + fmtMS(s.ms)
		if i == slowest && s.ms > 0 {
			p += " ◀"
		}
		parts = append(parts, p)
	}
	line("timings", "%s", strings.Join(parts, "  "))
	var prompts []string
	for _, p := range t.Prompts {
		s := p.Prompt + " " + p.File
		if p.Hash != "" {
			s += " (" + p.Hash[:min(12, len(p.Hash))] + ")"
		}
		prompts = append(prompts, s)
	}
	if len(prompts) > 0 {
		line("prompts", "%s", strings.Join(prompts, ", "))
	}
	if t.PromptsCommit != "" {
		line("commit", "%s (the config repository's)", t.PromptsCommit)
	}
	for _, c := range t.Calls {
		if c.Error != "" {
			line("error", "%s (after %s)", c.Error, fmtMS(c.DurationMS))
		}
	}
	for _, tl := range t.Tools {
		line("tool", "%s %s → %s in %s: %s", tl.Name, tl.Arguments, tl.Outcome, fmtMS(tl.DurationMS), oneLine(tl.Result, 80))
	}
	if t.Notice != "" {
		line("notice", "%s", t.Notice)
	}
	if len(t.Posted) > 0 {
		line("posted", "%s", strings.Join(t.Posted, ", "))
	}
	for _, f := range t.Feedback {
		line("feedback", "%s %s by %s at %s", feedbackMark(f.Value), f.Value, f.User, f.At.UTC().Format("2006-01-02 15:04Z"))
	}
}

func feedbackMark(value string) string {
	if value == "negative" {
		return "👎"
	}
	return "👍"
}

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + " …"
	}
	return s
}

// writeTurnDetail prints a turn's requests exactly as they were sent,
// each followed by its response.
func writeTurnDetail(w io.Writer, t agents.Trace) error {
	fmt.Fprintf(w, "# turn %s  %s (%s)  %s  %s\n", t.TurnID, t.Agent, t.Role, t.Phase, t.Outcome)
	for i, c := range t.Calls {
		fmt.Fprintf(w, "# request %d\n%s\n", i+1, c.Request)
		var resp any = c.Response
		if c.Response == nil {
			resp = map[string]string{"error": c.Error}
		}
		body, err := json.MarshalIndent(resp, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "# response %d (%s)\n%s\n", i+1, fmtMS(c.DurationMS), body)
	}
	return nil
}

// traceOf answers /trace in conclave chat: the last turn of a
// conversation, or with all every turn, as conclave trace prints them.
func traceOf(log agents.TraceLog) func(ctx context.Context, w io.Writer, convID string, all bool) error {
	return func(ctx context.Context, w io.Writer, convID string, all bool) error {
		traces, err := findTraces(ctx, log, convID)
		if err != nil {
			return err
		}
		if !all {
			traces = traces[len(traces)-1:]
		}
		for i, t := range traces {
			if i > 0 {
				fmt.Fprintln(w)
			}
			writeTurnBlock(escapingWriter{w}, t)
		}
		return nil
	}
}

// recorder is a model that writes each request and its response to a
// directory (conclave chat --record), numbered in the order they were
// made.
type recorder struct {
	agents.Model
	dir  string
	mask *redact.Masker // the configuration's secrets, masked in every file
	mu   sync.Mutex
	n    int
}

// recordTo wraps m so that it records to dir, which it creates, with
// mask's secrets masked. A dir that already holds files is refused unless
// force: two runs' files would mix, numbered alike.
func recordTo(dir string, m agents.Model, mask *redact.Masker, force bool) (agents.Model, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 && !force {
		return nil, fmt.Errorf("chat: --record: %s is not empty (%d file(s)); name a new directory, or add --force to write over it", dir, len(entries))
	}
	if err := os.MkdirAll(dir, 0o750); err != nil { // #nosec G703 -- the directory the operator named with --record
		return nil, fmt.Errorf("chat: --record: %w", err)
	}
	return &recorder{Model: m, dir: dir, mask: mask}, nil
}

// Complete implements agents.Model.
func (r *recorder) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	resp, err := r.Model.Complete(ctx, req)
	r.mu.Lock()
	r.n++
	n := r.n
	r.mu.Unlock()
	rec := struct {
		Agent    string          `json:"agent"`
		Role     string          `json:"role"`
		Phase    string          `json:"phase"`
		Request  json.RawMessage `json:"request"`
		Response any             `json:"response"`
	}{Agent: req.Agent, Role: req.Role, Phase: req.Prompt, Request: resp.Sent}
	if len(rec.Request) == 0 {
		// Not sent: the body as the client would have sent it.
		if c, ok := r.Model.(interface {
			RequestBody(llm.Request) (string, []byte, error)
		}); ok {
			_, rec.Request, _ = c.RequestBody(req)
		}
	}
	if len(rec.Request) == 0 {
		rec.Request = json.RawMessage("null")
	}
	if err != nil {
		rec.Response = map[string]string{"error": err.Error()}
	} else {
		rec.Response = struct {
			Content          string         `json:"content"`
			ToolCalls        []llm.ToolCall `json:"tool_calls,omitempty"`
			FinishReason     string         `json:"finish_reason"`
			Model            string         `json:"model"`
			PromptTokens     int            `json:"prompt_tokens"`
			CompletionTokens int            `json:"completion_tokens"`
		}{resp.Content, resp.ToolCalls, resp.FinishReason, resp.Model, resp.PromptTokens, resp.CompletionTokens}
	}
	body, merr := json.MarshalIndent(rec, "", "  ")
	if merr == nil {
		name := fmt.Sprintf("%03d-%s-%s.json", n, recordName(req.Agent), recordName(req.Prompt))
		merr = os.WriteFile(filepath.Join(r.dir, name), append(r.mask.Bytes(body), '\n'), 0o600)
	}
	if merr != nil && err == nil {
		err = fmt.Errorf("chat: --record: %w", merr)
	}
	return resp, err
}

// recordName is an agent's name (its ENS name's first label) or a phase,
// safe in a file name.
func recordName(s string) string {
	first, _, _ := strings.Cut(s, ".")
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, strings.ToLower(cmp.Or(first, "unknown")))
}
