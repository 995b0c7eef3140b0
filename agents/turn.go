package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// runner runs the turns of a loaded conversation. A turn is a function
// from what it needs — the view, the prompts, the model, the tools and
// the memory sessions it reads — to what it produced, held in its turn:
// the posts to make (prepared, not made), history notes, the session it
// chose, stream markers, its report and its trace. It changes nothing of
// the conversation, the machine or the store (but for a streamed reply's
// marker, committed beside the state as last committed: stream.go); the
// step (conversation.go) feeds what a turn produced into the machine and
// carries it out.
type runner struct {
	deps turnPorts // the ports a turn uses, each on its own
	opts *Options  // the engine's options
	now  func() time.Time
	// cpu: a call to the outside runs with the worker's CPU token given
	// back meanwhile (cpuTokens.off).
	cpu      cpuTokens
	pairings Pairings                  // whom a reply's mentions reach
	patterns map[string]*regexp.Regexp // the experts' session patterns

	log      *slog.Logger         // the conversation's
	conv     *memory.Conversation // State as last committed: a stream's marker is committed over it
	lock     memory.Lock          // what a stream's commits prove
	msgs     *[]memory.Message    // the thread, in ts order
	st       conversation.Reader  // the state, read only
	roster   *roster              // the channel's agents
	sessions Sessions             // the memory sessions a turn reads
	marks    committer            // where a streamed reply's marker is committed
	replies  replyPoster          // where a streamed reply is shown
	tracer   turnTracer           // what makes the turns' traces
}

// turnPorts are the engine's ports a turn uses, each on its own: the
// runner holds no Deps.
type turnPorts struct {
	Model        Model
	Prompts      func() Prompts
	Tools        Toolbox
	OnTurn       func(r TurnReport)
	Working      Working
	StreamTicker func(d time.Duration) (<-chan time.Time, func())
}

// portsOfTurn takes a turn's ports out of the engine's Deps.
func portsOfTurn(d *Deps) turnPorts {
	return turnPorts{Model: d.Model, Prompts: d.Prompts, Tools: d.Tools, OnTurn: d.OnTurn, Working: d.Working, StreamTicker: d.StreamTicker}
}

// runner is the turn runner of the loaded conversation.
func (c *convo) runner() runner {
	return runner{
		deps: portsOfTurn(&c.e.deps), opts: &c.e.opts, now: c.e.now, cpu: c.e.cpu, pairings: c.e.pairings,
		patterns: c.e.patterns,
		log:      c.log, conv: &c.conv, lock: c.lock, msgs: &c.msgs, st: c.m.Read(),
		roster: &c.roster, sessions: c.e.sessions, marks: c.e.convs, replies: c.e.deps.Chat,
		tracer: turnTracer{opts: &c.e.opts, deps: tracePorts{Model: c.e.deps.Model, Tracer: c.e.deps.Tracer, CaptureContent: c.e.deps.CaptureContent}, conv: &c.conv, msgs: &c.msgs, now: c.e.now, log: c.log},
	}
}

// view is the conversation as a turn's input gives it, for its prompts.
func (c runner) view(in turn.Input) view {
	return view{roster: c.roster, conv: *c.conv, msgs: in.Thread, st: c.st, opts: c.opts, description: in.Description, log: c.log}
}

// turnRun is one agent producing (or failing to produce) one reply.
type turnRun struct {
	id      string
	agent   ens.Agent
	prompts Prompts // one prompt set for the whole turn
	report  TurnReport
	started time.Time
	// deadline ends its model calls (real time: contexts run on it).
	deadline time.Time
	stream   *streamer // while its reply is streamed
	trace    *Trace    // nil when traces are off
	fit      *fitting  // what its last request was built from

	// What the turn produced beyond its posts, for the step to feed
	// into the machine (convo.apply): history notes, and the markers of
	// the messages its replies were streamed in.
	notes    []turn.Note
	streamed map[string]turn.StreamMark
	// toolResults are the results of the tools it ran: a threading key
	// may be written there instead of in the messages (turn.KeyWritten).
	toolResults []string
}

func (c runner) newTurn(id string, a ens.Agent, phase string) *turnRun {
	t := &turnRun{
		id:      id,
		agent:   a,
		prompts: c.deps.Prompts(),
		started: c.now(),
		// Real time: contexts run on it.
		deadline: time.Now().Add(c.opts.TurnTimeout),
		report: TurnReport{
			Conversation: c.conv.ID,
			TurnID:       id,
			Agent:        a.EnsDomain,
			Role:         string(a.Role),
			Phase:        phase,
			Outcome:      "ok",
		},
	}
	t.trace = c.tracer.newTrace(t)
	return t
}

// done logs the turn's one line and reports it; it returns the turn's
// finished trace when traces are kept.
func (c runner) done(t *turnRun) (memory.TurnTrace, bool) {
	t.report.Duration = c.now().Sub(t.started)
	r := t.report
	attrs := []any{
		slog.String(logTurn, r.TurnID), slog.String(logAgent, r.Agent), slog.String(logRole, r.Role),
		slog.String(logPhase, r.Phase), slog.String(logOutcome, r.Outcome),
		slog.Duration("wait", r.Wait), slog.Duration("duration", r.Duration),
		slog.Int("prompt_tokens", r.PromptTokens), slog.Int("completion_tokens", r.CompletionTokens),
	}
	if r.ToolCalls > 0 {
		attrs = append(attrs, slog.Int("tool_calls", r.ToolCalls))
	}
	if r.Err != nil {
		attrs = append(attrs, slog.Any(logError, r.Err))
		c.log.Warn("turn", attrs...)
	} else {
		c.log.Info("turn", attrs...)
	}
	tr, ok := c.tracer.finishTrace(t)
	if c.deps.OnTurn != nil {
		c.deps.OnTurn(r)
	}
	if c.deps.Working != nil {
		c.deps.Working.TurnEnded(c.work(t))
	}
	return tr, ok
}

// build renders and fits one request of a turn.
func (c runner) build(t *turnRun, prompt string, data templates.Data, history, tail []HistoryMessage) (llm.Request, error) {
	began := c.now()
	defer func() { t.tracePrompts(prompt, c.now().Sub(began)) }()
	tp := TurnPrompt{
		Agent:           t.agent,
		Prompt:          prompt,
		Data:            data,
		History:         history,
		Tail:            tail,
		AgentProfile:    c.opts.Agents[t.agent.EnsDomain].LLMProfile,
		MaxInputTokens:  c.opts.MaxInputTokens,
		MaxMessageChars: c.opts.MaxMessageChars,
	}
	req, info, err := BuildRequest(t.prompts, c.deps.Model, tp)
	t.fit = &fitting{prompt: tp, budget: info.Budget}
	for _, w := range info.Warnings {
		c.log.Warn(w, slog.String(logAgent, t.agent.EnsDomain), slog.String(logPhase, prompt))
	}
	if info.Dropped > 0 {
		c.log.Info("history cut to the input budget", slog.String(logAgent, t.agent.EnsDomain),
			slog.Int("dropped", info.Dropped), slog.Int("budget", info.Budget))
	}
	t.report.Phase = prompt
	if err == nil {
		req.Tools = toolsFor(c.deps.Tools, c.opts, t.agent.EnsDomain, info.Tools)
	}
	return req, err
}

// ask calls the model, and the tools it calls, within what is left of the
// turn's deadline (Options.TurnTimeout from its start). A partial reply is
// marked (turn.MarkCut).
func (c runner) ask(ctx context.Context, t *turnRun, req llm.Request) (string, error) {
	resp, err := c.askResponse(ctx, t, req)
	if err != nil {
		return "", err
	}
	return turn.MarkCut(c.opts.Mask, resp), nil
}

// askResponse is ask, answering the model's response as it came.
func (c runner) askResponse(ctx context.Context, t *turnRun, req llm.Request) (llm.Response, error) {
	mctx, cancel := context.WithDeadline(ctx, t.deadline)
	defer cancel()
	resp, err := c.completeFitting(mctx, t, req)
	if err != nil && ctx.Err() == nil && mctx.Err() != nil {
		err = fmt.Errorf("%w (%s): %w", turn.ErrTurnDeadline, c.opts.TurnTimeout, err)
	}
	return resp, err
}

// failed records a failed turn in its report; the step then posts a ⚠️
// notice in the thread (errors.notify = "thread"), never stored as a
// message. A cancelled context or a lost lock is not a failure: the turn
// stays to be run again, by this replica or another, and failed returns
// why it stopped.
func (c runner) failed(ctx context.Context, t *turnRun, err error) error {
	if ctx.Err() != nil || errors.Is(err, memory.ErrLockLost) {
		t.report.Outcome = "cancelled"
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	t.report.Outcome = "failed"
	t.report.Err = err
	return nil
}

// notice is a turn's ⚠️ notice, to post when notices go to the thread or
// its reply was streamed there (the step applied its markers first).
func (c runner) notice(t *turnRun, reason string) (pendingPost, bool) {
	_, streamed := c.st.Streamed(t.id)
	if c.opts.Notify != NotifyThread && !streamed {
		return pendingPost{}, false
	}
	if t.trace != nil {
		t.trace.Notice = reason
	}
	text := fmt.Sprintf("⚠️ %s could not answer: %s (ref %s)", t.agent.Name, reason, t.id)
	return pendingPost{PostID: t.id + "-notice", Turn: t.id, Agent: t.agent.EnsDomain, Text: text, Notice: true}, true
}

// mentionUsers lists the paired Slack users of the human agents a reply
// names.
func (c runner) mentionUsers(ctx context.Context, text, self string) []string {
	var users []string
	for _, n := range findMentions(text, c.roster.forms) {
		if n == self || c.roster.agents[n].Role != ens.RoleHuman {
			continue
		}
		u, err := pairedUser(ctx, c.pairings, n)
		if err != nil {
			c.log.Warn("paired user of a human agent", slog.String(logAgent, n), slog.Any(logError, err))
		}
		if u != "" {
			users = append(users, u)
		}
	}
	return users
}

// threading asks an unbound expert which memory session the messages
// that name it are about (context-not-found), reads its reply and
// chooses the session by its policy. in.Known is .KnownSessions.
func (c runner) threading(ctx context.Context, t *turnRun, in turn.Input) (turnResult, error) {
	th, err := c.readThreading(ctx, t, in)
	return t.result(turnResult{Text: th.Text, Threading: th}), err
}

// readThreading asks and reads the threading request (threading).
func (c runner) readThreading(ctx context.Context, t *turnRun, in turn.Input) (turn.Threading, error) {
	a := t.agent
	v := c.view(in)
	visible := v.visibleTo(a)
	data := v.data(ctx, a, visible, "", len(visible))
	data.KnownSessions = in.Known
	req, err := c.build(t, templates.PromptContextNotFound, data, v.history(ctx, a, visible, false), nil)
	if err != nil {
		return turn.Threading{}, err
	}
	resp, err := c.askResponse(ctx, t, req)
	if err == nil && resp.Truncated() {
		// A cut reply is asked again, not repaired: a repaired cut
		// would bind half a key.
		c.log.Info("threading reply cut by the length limit; asking again", slog.String(logAgent, a.EnsDomain))
		resp, err = c.askResponse(ctx, t, req)
		if err == nil && resp.Truncated() {
			c.log.Warn("threading reply cut by the length limit twice; the expert stays unbound", slog.String(logAgent, a.EnsDomain))
			return turn.Threading{Meta: map[string]string{"threading": turn.ThreadingFailed},
				Unanswered: "its reply was cut by the model's length limit"}, nil
		}
	}
	if err != nil {
		return turn.Threading{}, err
	}
	raw := turn.MarkCut(c.opts.Mask, resp)
	reply, outcome, perr := turn.ParseThreading(raw)
	if perr != nil {
		c.log.Info("threading reply unreadable; retrying", slog.String(logAgent, a.EnsDomain), slog.Any(logError, perr))
		retry := req
		retry.Messages = append(slices.Clone(req.Messages),
			llm.Message{Role: llm.RoleAssistant, Content: raw},
			llm.Message{Role: llm.RoleUser, Content: turn.ThreadingReminder})
		raw, err = c.ask(ctx, t, retry)
		if err != nil {
			return turn.Threading{}, err
		}
		reply, outcome, perr = turn.ParseThreading(raw)
		if perr != nil {
			c.log.Warn("threading reply unreadable twice; posting it as it is", slog.String(logAgent, a.EnsDomain), slog.Any(logError, perr))
			return turn.Threading{Text: raw, Meta: map[string]string{"threading": turn.ThreadingFailed}}, nil
		}
	}
	c.log.Info("threading reply read", slog.String(logAgent, a.EnsDomain), slog.String(logTurn, t.id),
		slog.String("outcome", outcome), slog.String("key", reply.Session))
	ps := turn.PlaceholdersOf(req.Messages[len(req.Messages)-1].Content) // the rendered context-not-found
	if turn.IsPlaceholder(reply.Message, ps.Message) {
		c.log.Info("threading message repeats the template's placeholder; not posted", slog.String(logAgent, a.EnsDomain))
		reply.Message = ""
	}
	th := turn.Threading{Text: reply.Message, Meta: map[string]string{"threading": outcome}}
	wrote := reply.Session
	var why string
	reply.Session, why = turn.CheckKey(reply.Session, ps, c.patterns[a.EnsDomain])
	if why != "" && why != turn.KeyHasSpaces {
		c.log.Warn("threading key refused", slog.String(logAgent, a.EnsDomain), slog.String("key", wrote), slog.String("why", why))
		if reply.Message == "" {
			th.Text, th.Unanswered = "", fmt.Sprintf("its key %q was refused: %s", wrote, why)
			return th, nil
		}
	}
	// A key the expert already has is bound only when the messages it
	// sees or its tools' results write it (SPEC §14.2): a model must not
	// "correct" C45654 to a known C45653.
	written := func(key string) bool {
		texts := slices.Clone(t.toolResults)
		for _, m := range visible {
			texts = append(texts, m.Text)
		}
		return turn.KeyWritten(key, texts)
	}
	var key, refused string
	if why == turn.KeyHasSpaces {
		// A phrase may still name a session the expert has (matching
		// ignores blanks); it never starts one.
		key, refused, err = c.chooseSession(ctx, a, wrote, false, written)
		if err == nil && key == "" {
			c.log.Warn("threading key refused", slog.String(logAgent, a.EnsDomain), slog.String("key", wrote), slog.String("why", why))
			refused = fmt.Sprintf("its key %q was refused: %s", wrote, why)
		}
	} else {
		key, refused, err = c.chooseSession(ctx, a, reply.Session, true, written)
	}
	switch {
	case err != nil:
		return turn.Threading{}, err
	case refused != "":
		th.Unanswered = refused
	case key == "" && strings.TrimSpace(reply.Message) == "":
		th.Text, th.Unanswered = "", "it found no memory key in the messages that name it"
	}
	th.Key = key
	return th, nil
}

// chooseSession matches a threading key against the expert's sessions and
// applies its new-session policy (mayStart false: no new session). "" leaves the expert unbound; refused
// then says why when the policy refused a new session, or when the session
// matched is not written where the expert could read it (written false).
func (c runner) chooseSession(ctx context.Context, a ens.Agent, key string, mayStart bool, written func(string) bool) (session, refused string, err error) {
	if key == "" {
		return "", "", nil
	}
	ns := expertNamespace(c.opts, c.conv.Channel, a.EnsDomain)
	existing, err := c.sessions.Sessions(ctx, ns)
	if err != nil {
		return "", "", fmt.Errorf("list sessions of %s: %w", ns, err)
	}
	match, kind, score := turn.MatchSession(key, existing, c.opts.MatchThreshold)
	if match != "" {
		if kind != turn.MatchExact {
			c.log.Info("session matched", slog.String(logAgent, a.EnsDomain), slog.String("key", key),
				slog.String("session", match), slog.String("match", kind), slog.Float64("score", score))
		}
		if !written(match) {
			c.log.Warn("known key not written in the messages nor a tool result; refused", slog.String(logAgent, a.EnsDomain),
				slog.String("key", key), slog.String("session", match))
			return "", fmt.Sprintf("its key %q is one it knows, but no message nor tool result writes it", match), nil
		}
		return match, "", nil
	}
	if !mayStart {
		return "", "", nil
	}
	s := c.opts.Agents[a.EnsDomain]
	switch s.SessionPolicy {
	case SessionNever:
		c.log.Info("no session matches and the policy creates none", slog.String(logAgent, a.EnsDomain), slog.String("key", key))
		return "", fmt.Sprintf("it has no memory for %q and may not start one", key), nil
	case SessionPattern:
		if re := c.patterns[a.EnsDomain]; re == nil || !re.MatchString(key) {
			c.log.Info("new session refused by session_pattern", slog.String(logAgent, a.EnsDomain), slog.String("key", key))
			return "", fmt.Sprintf("it has no memory for %q, and %q is not a key it may start one for", key, key), nil
		}
	}
	return key, "", nil
}

// maxKnownSessions bounds .KnownSessions: the keys an expert is offered
// when it chooses one.
const maxKnownSessions = 50

// sessionTurn runs prompt for an agent with the memory session key: the
// session's entries from other conversations (in.Entries), then what it
// sees of this thread.
func (c runner) sessionTurn(ctx context.Context, t *turnRun, in turn.Input, key, prompt string) (turnResult, error) {
	a := t.agent
	v := c.view(in)
	visible := v.visibleTo(a)
	data := v.data(ctx, a, visible, key, len(visible))
	history := turn.AppendSessionHistory(make([]turn.HistoryMessage, 0, len(in.Entries)+len(visible)), in.Entries)
	history = append(history, v.history(ctx, a, visible, false)...)
	req, err := c.build(t, prompt, data, history, nil)
	if err != nil {
		return t.result(turnResult{}), err
	}
	text, err := c.askStreamed(ctx, t, req, !c.st.Concluding())
	return t.result(turnResult{Text: text}), err
}

// facilitator runs the facilitator's default prompt over the whole
// thread (START, BODY, or after a restart). It returns the reply and the
// prompt it answered (what a conclusion asked for by :end: replays).
func (c runner) facilitator(ctx context.Context, t *turnRun, in turn.Input) (turnResult, error) {
	v := c.view(in)
	data := v.data(ctx, t.agent, v.msgs, c.conv.ID, len(v.msgs))
	req, err := c.build(t, templates.PromptDefault, data, v.history(ctx, t.agent, v.msgs, true), nil)
	if err != nil {
		return t.result(turnResult{}), err
	}
	text, err := c.askStreamed(ctx, t, req, true)
	return t.result(turnResult{Text: text, Prompt: req.Messages[len(req.Messages)-1].Content}), err
}

// conclusion runs the facilitator's conclude prompt: the thread (without
// the :end: reply), then the previous phase prompt and the :end: reply
// when there was one.
func (c runner) conclusion(ctx context.Context, t *turnRun, in turn.Input) (turnResult, error) {
	r := in.Conclude
	v := c.view(in)
	var msgs []turn.Message
	for _, m := range v.msgs {
		if r.EndTS == "" || m.TS != r.EndTS {
			msgs = append(msgs, m)
		}
	}
	var tail []HistoryMessage
	if r.ByEnd {
		tail = []HistoryMessage{
			{Role: llm.RoleUser, Content: r.PrevPrompt},
			{Role: llm.RoleAssistant, Content: r.EndReply},
		}
	}
	data := v.data(ctx, t.agent, msgs, c.conv.ID, len(msgs)+len(tail))
	data.ConcludeReason = r.Reason
	req, err := c.build(t, templates.PromptConclude, data, v.history(ctx, t.agent, msgs, true), tail)
	if err != nil {
		return t.result(turnResult{}), err
	}
	text, err := c.askStreamed(ctx, t, req, false)
	return t.result(turnResult{Text: text}), err
}
