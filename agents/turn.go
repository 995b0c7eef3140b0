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

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// runner runs the turns of a loaded conversation, each from its prompt to
// its pending post: an expert's or a clone's call (callTurn), the
// facilitator's turn (facilitatorTurn) and the conclusion (concludeTurn).
// It holds what a turn uses of the engine (ports, options, clock, and the
// few engine services it calls, as functions), what it reads of the
// conversation, and the pieces of the conversation a turn changes: the
// machine (which turn, and its outcome), the session binds, the outbox its
// posts go through, and the stream markers in the state.
type runner struct {
	deps *Deps    // the ports: model, prompts, tools, store, chat, OnTurn
	opts *Options // the engine's options
	now  func() time.Time
	// cpu: a call to the outside runs with the worker's CPU token given
	// back meanwhile (cpuTokens.off).
	cpu          cpuTokens
	pairedUser   func(ctx context.Context, agent string) (string, error)
	toolsFor     func(agent string, fromSettings *[]string) []llm.Tool
	patterns     map[string]*regexp.Regexp // the experts' session patterns
	streamTicker func() (<-chan time.Time, func())

	log    *slog.Logger         // the conversation's
	conv   *memory.Conversation // State as last committed: a stream's marker is committed over it
	lock   memory.Lock          // what a stream's commits prove
	msgs   *[]memory.Message    // the thread, in ts order
	st     *convState           // read, but for the stream markers (Streamed)
	m      *machine             // the state machine over st
	roster *roster              // the channel's agents
	posts  poster               // the step, which carries the turn's posts and notices out
	binds  sessionBinds         // the conversation's memory sessions
	react  func(ctx context.Context)
	// turnID is the id of a facilitator's turn running a prompt (turnIDFor).
	turnID func(agent, prompt string) string
	// addTrace hands a finished turn's trace to the step's next commit;
	// live are the traces of the turns running, by turn id (tracing).
	addTrace func(memory.TurnTrace)
	live     map[string]*Trace
}

// sessionBinds is what a turn asks of the conversation's memory
// sessions (session.go).
type sessionBinds interface {
	// expertNamespace is whose memory an expert's sessions are in.
	expertNamespace(name string) string
	// sessionOf is the session an expert or clone reads and appends to.
	sessionOf(a ens.Agent) (namespace, key string, ok bool)
	// bind binds an expert to a session.
	bind(ctx context.Context, a ens.Agent, key string)
	// otherConversations reads a session's entries from other conversations.
	otherConversations(ctx context.Context, namespace, key string) ([]memory.SessionEntry, error)
}

// poster is what a turn asks of the step for its posts: commit one as
// pending, make it, and route what was made (convo.deliver).
type poster interface {
	deliver(ctx context.Context, p pendingPost) error
}

// runner is the turn runner of the loaded conversation.
func (c *convo) runner() runner {
	return runner{
		deps: &c.e.deps, opts: &c.e.opts, now: c.e.now, cpu: c.e.cpu, pairedUser: c.e.PairedUser,
		toolsFor: c.e.toolsFor, patterns: c.e.patterns, streamTicker: c.e.streamTicker,
		log: c.log, conv: &c.conv, lock: c.lock, msgs: &c.msgs, st: c.st, m: c.m,
		roster: &c.roster, posts: c, binds: c, react: c.react, turnID: c.turnIDFor,
		addTrace: func(t memory.TurnTrace) { c.traces = append(c.traces, t) }, live: c.e.liveTraces(),
	}
}

// view is the conversation as it stands, for a turn's prompts.
func (c runner) view() view {
	return view{roster: c.roster, conv: *c.conv, msgs: *c.msgs, st: c.st, opts: c.opts, chat: c.deps.Chat, log: c.log}
}

// turn is one agent producing (or failing to produce) one reply.
type turn struct {
	id      string
	agent   ens.Agent
	prompts Prompts // one prompt set for the whole turn
	report  TurnReport
	started time.Time
	// deadline ends its model calls (real time: contexts run on it).
	deadline time.Time
	stream   *streamer // while its reply is streamed
	trace    *Trace    // nil when traces are off
}

func (c runner) newTurn(id string, a ens.Agent, phase string) *turn {
	t := &turn{
		id:       id,
		agent:    a,
		prompts:  c.deps.Prompts(),
		started:  c.now(),
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
	t.trace = c.newTrace(t)
	return t
}

// done logs the turn's one line and reports it.
func (c runner) done(t *turn) {
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
	c.finishTrace(t)
	if c.deps.OnTurn != nil {
		c.deps.OnTurn(r)
	}
}

// build renders and fits one request of a turn.
func (c runner) build(t *turn, prompt string, data templates.Data, history, tail []HistoryMessage) (llm.Request, error) {
	began := c.now()
	defer func() { t.tracePrompts(prompt, c.now().Sub(began)) }()
	req, info, err := BuildRequest(t.prompts, c.deps.Model, TurnPrompt{
		Agent:           t.agent,
		Prompt:          prompt,
		Data:            data,
		History:         history,
		Tail:            tail,
		AgentProfile:    c.opts.Agents[t.agent.EnsDomain].LLMProfile,
		MaxInputTokens:  c.opts.MaxInputTokens,
		MaxMessageChars: c.opts.MaxMessageChars,
	})
	for _, w := range info.Warnings {
		c.log.Warn(w, slog.String(logAgent, t.agent.EnsDomain), slog.String(logPhase, prompt))
	}
	if info.Dropped > 0 {
		c.log.Info("history cut to the input budget", slog.String(logAgent, t.agent.EnsDomain),
			slog.Int("dropped", info.Dropped), slog.Int("budget", info.Budget))
	}
	t.report.Phase = prompt
	if err == nil {
		req.Tools = c.toolsFor(t.agent.EnsDomain, info.Tools)
	}
	return req, err
}

// errTurnDeadline: a turn's model calls outlasted Options.TurnTimeout.
var errTurnDeadline = errors.New("the turn passed its deadline")

// ask calls the model, and the tools it calls, within what is left of the
// turn's deadline (Options.TurnTimeout from its start). A reply cut by the
// token limit is marked with " …".
func (c runner) ask(ctx context.Context, t *turn, req llm.Request) (string, error) {
	mctx, cancel := context.WithDeadline(ctx, t.deadline)
	defer cancel()
	resp, err := c.complete(mctx, t, req)
	if err != nil && ctx.Err() == nil && mctx.Err() != nil {
		err = fmt.Errorf("%w (%s): %w", errTurnDeadline, c.opts.TurnTimeout, err)
	}
	if err != nil {
		return "", err
	}
	text := resp.Content
	if resp.Truncated() && strings.TrimSpace(text) != "" {
		text = strings.TrimRight(text, " \n\t") + " …"
	}
	return text, nil
}

// failed records a failed turn: a ⚠️ notice in the thread (errors.notify =
// "thread"), never stored as a message. A cancelled context or a lost lock
// is not a failure: the turn stays to be run again, by this replica or
// another.
func (c runner) failed(ctx context.Context, t *turn, err error) error {
	if ctx.Err() != nil || errors.Is(err, memory.ErrLockLost) {
		t.report.Outcome = "cancelled"
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	t.report.Outcome = "failed"
	t.report.Err = err
	// The notice gives a reason class; the error itself, which may quote
	// an upstream body, a URL or a host, is logged with the turn (done).
	c.notify(ctx, t, noticeReason(err))
	return nil
}

// notify posts a ⚠️ notice through the outbox. One that cannot be posted
// now stays pending there; a lost lock leaves it to the next holder, which
// must not see it twice.
func (c runner) notify(ctx context.Context, t *turn, reason string) {
	if c.opts.Notify != NotifyThread && !c.streamedFor(t.id) {
		return
	}
	if t.trace != nil {
		t.trace.Notice = reason
	}
	text := fmt.Sprintf("⚠️ %s could not answer: %s (ref %s)", t.agent.Name, reason, t.id)
	p := pendingPost{PostID: t.id + "-notice", Turn: t.id, Agent: t.agent.EnsDomain, Text: text, Notice: true}
	if err := c.posts.deliver(ctx, p); err != nil {
		c.log.Warn("post a failure notice", slog.String(logTurn, t.id), slog.Any(logError, err))
	}
}

// mentionUsers lists the paired Slack users of the human agents a reply
// names.
func (c runner) mentionUsers(ctx context.Context, text, self string) []string {
	var users []string
	for _, n := range findMentions(text, c.roster.forms) {
		if n == self || c.roster.agents[n].Role != ens.RoleHuman {
			continue
		}
		u, err := c.pairedUser(ctx, n)
		if err != nil {
			c.log.Warn("paired user of a human agent", slog.String(logAgent, n), slog.Any(logError, err))
		}
		if u != "" {
			users = append(users, u)
		}
	}
	return users
}

// callTurn runs the first queued turn: an expert or clone answering the
// message that named it, unless its call timed out while waiting or it is
// at its turn cap.
func (c runner) callTurn(ctx context.Context) error {
	q := c.st.Queue[0]
	now := c.now()
	a, registered := c.roster.agents[q.Agent]
	if !registered {
		a = ens.Agent{Name: firstLabel(q.Agent), EnsDomain: q.Agent, Role: ens.RoleExpert}
	}
	t := c.newTurn(q.ID, a, "")
	t.report.Wait = now.Sub(q.Queued)
	defer c.done(t)
	endCall := func() {
		c.m.endCall(q, c.now())
		c.react(ctx)
	}
	switch c.m.admit(q, registered, now) {
	case notServed:
		endCall()
		c.couldNotAnswer(q.Agent, "it is no longer served in this channel")
		t.report.Outcome = "failed"
		t.report.Err = errors.New("agent no longer served in this channel")
		return nil
	case callExpired:
		endCall()
		c.m.addNote(fmt.Sprintf("(%s did not answer: timeout)", q.Agent), c.now(), true)
		t.report.Outcome = "timeout"
		return nil
	case atCap:
		endCall()
		reason := fmt.Sprintf("it reached its limit of %d turns in this conversation", c.opts.MaxTurnsPerAgent)
		c.couldNotAnswer(q.Agent, reason)
		t.report.Outcome = "skipped"
		if c.m.capNotice(q.Agent) {
			c.notify(ctx, t, reason)
		}
		return nil
	}
	c.m.startTurn(q.Agent)

	var text, unanswered string
	var meta map[string]string
	var err error
	if a.Role == ens.RoleClone {
		text, err = c.cloneTurn(ctx, t)
	} else {
		text, meta, unanswered, err = c.expertTurn(ctx, t)
	}
	if err != nil && ctx.Err() != nil {
		return c.failed(ctx, t, err) // to be run again: the call goes on
	}
	endCall()
	if err != nil {
		if err := c.failed(ctx, t, err); err != nil {
			return err
		}
		c.couldNotAnswer(q.Agent, noticeReason(err))
		return nil
	}
	if unanswered != "" {
		c.couldNotAnswer(q.Agent, unanswered)
	}
	if strings.TrimSpace(text) == "" {
		t.report.Outcome = "empty"
	}
	return c.post(ctx, a, t.id, text, pendingPost{Turn: t.id, Meta: meta})
}

// expertTurn runs an expert: context-found when it is bound; otherwise
// threading (context-not-found), then, once bound, context-found in the
// same turn, after posting the threading message. unanswered says why an
// expert left unbound cannot answer (no key found, or its policy refused
// a new session); it is empty when the expert answered or asked for the
// key in its message.
func (c runner) expertTurn(ctx context.Context, t *turn) (text string, meta map[string]string, unanswered string, err error) {
	a := t.agent
	if key := c.st.Bindings[a.EnsDomain]; key != "" {
		text, err := c.contextFound(ctx, t, key)
		return text, nil, "", err
	}
	visible := c.view().visibleTo(a)
	data := c.view().data(ctx, a, visible, "", len(visible))
	if data.KnownSessions, err = c.deps.Store.RecentSessions(ctx, c.binds.expertNamespace(a.EnsDomain), maxKnownSessions); err != nil {
		return "", nil, "", fmt.Errorf("list sessions of %s: %w", a.EnsDomain, err)
	}
	req, err := c.build(t, templates.PromptContextNotFound, data, c.view().history(ctx, a, visible, false), nil)
	if err != nil {
		return "", nil, "", err
	}
	raw, err := c.ask(ctx, t, req)
	if err != nil {
		return "", nil, "", err
	}
	reply, outcome, perr := parseThreading(raw)
	if perr != nil {
		c.log.Info("threading reply unreadable; retrying", slog.String(logAgent, a.EnsDomain), slog.Any(logError, perr))
		retry := req
		retry.Messages = append(slices.Clone(req.Messages),
			llm.Message{Role: llm.RoleAssistant, Content: raw},
			llm.Message{Role: llm.RoleUser, Content: threadingReminder})
		raw, err = c.ask(ctx, t, retry)
		if err != nil {
			return "", nil, "", err
		}
		reply, outcome, perr = parseThreading(raw)
		if perr != nil {
			c.log.Warn("threading reply unreadable twice; posting it as it is", slog.String(logAgent, a.EnsDomain), slog.Any(logError, perr))
			return raw, map[string]string{"threading": threadingFailed}, "", nil
		}
	}
	c.log.Info("threading reply read", slog.String(logAgent, a.EnsDomain), slog.String(logTurn, t.id),
		slog.String("outcome", outcome), slog.String("key", reply.Session))
	meta = map[string]string{"threading": outcome}
	key, refused, err := c.chooseSession(ctx, a, reply.Session)
	switch {
	case err != nil:
		return "", nil, "", err
	case refused != "":
		return reply.Message, meta, refused, nil
	case key == "" && strings.TrimSpace(reply.Message) == "":
		return "", meta, "it found no memory key in the messages that name it", nil
	case key == "":
		return reply.Message, meta, "", nil
	}
	c.binds.bind(ctx, a, key)
	if reply.Message != "" {
		// A threading message that cannot be posted now stays first in
		// the outbox; the answer goes after it.
		if err := c.post(ctx, a, t.id+"-threading", reply.Message, pendingPost{Turn: t.id, Meta: meta}); err != nil {
			return "", nil, "", err
		}
		meta = nil // recorded on the threading message
	}
	text, err = c.contextFound(ctx, t, key)
	return text, meta, "", err
}

// chooseSession matches a threading key against the expert's sessions and
// applies its new-session policy. "" leaves the expert unbound; refused
// then says why when the policy refused a new session.
func (c runner) chooseSession(ctx context.Context, a ens.Agent, key string) (session, refused string, err error) {
	if key == "" {
		return "", "", nil
	}
	ns := c.binds.expertNamespace(a.EnsDomain)
	existing, err := c.deps.Store.Sessions(ctx, ns)
	if err != nil {
		return "", "", fmt.Errorf("list sessions of %s: %w", ns, err)
	}
	match, kind, score := matchSession(key, existing, c.opts.MatchThreshold)
	if match != "" {
		if kind != matchExact {
			c.log.Info("session matched", slog.String(logAgent, a.EnsDomain), slog.String("key", key),
				slog.String("session", match), slog.String("match", kind), slog.Float64("score", score))
		}
		return match, "", nil
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

// couldNotAnswer records that a named agent cannot answer, and why, in a
// history line never posted, which wakes the facilitator at once: it can
// ask someone else or tell the person.
func (c runner) couldNotAnswer(agent, reason string) {
	c.m.addNote(fmt.Sprintf("(%s could not answer: %s)", agent, reason), c.now(), true)
}

// contextFound answers as a bound expert.
func (c runner) contextFound(ctx context.Context, t *turn, key string) (string, error) {
	return c.sessionTurn(ctx, t, c.binds.expertNamespace(t.agent.EnsDomain), key, templates.PromptContextFound)
}

// cloneTurn answers as a clone, on its human's group session.
func (c runner) cloneTurn(ctx context.Context, t *turn) (string, error) {
	ns, key, _ := c.binds.sessionOf(t.agent)
	return c.sessionTurn(ctx, t, ns, key, templates.PromptDefault)
}

// sessionTurn runs prompt for an agent with a memory session: the
// session's entries from other conversations, then what it sees of this
// thread.
func (c runner) sessionTurn(ctx context.Context, t *turn, namespace, key, prompt string) (string, error) {
	a := t.agent
	entries, err := c.binds.otherConversations(ctx, namespace, key)
	if err != nil {
		return "", err
	}
	visible := c.view().visibleTo(a)
	data := c.view().data(ctx, a, visible, key, len(visible))
	history := append(sessionHistory(entries), c.view().history(ctx, a, visible, false)...)
	req, err := c.build(t, prompt, data, history, nil)
	if err != nil {
		return "", err
	}
	return c.askStreamed(ctx, t, req, c.st.Conclude == nil)
}

// facilitatorTurn runs the facilitator's default prompt over the whole
// thread (START, BODY, or after a restart). A reply holding :end: asks for
// the conclusion; what is left of it is posted first.
func (c runner) facilitatorTurn(ctx context.Context) error {
	f := c.roster.agents[c.roster.facilitator]
	t := c.newTurn(c.turnID(f.EnsDomain, templates.PromptDefault), f, templates.PromptDefault)
	defer c.done(t)
	// Messages that arrive during the turn are routed after it and wake
	// the facilitator again.
	wake := c.m.startFacilitator()

	data := c.view().data(ctx, f, *c.msgs, c.conv.ID, len(*c.msgs))
	req, err := c.build(t, templates.PromptDefault, data, c.view().history(ctx, f, *c.msgs, true), nil)
	var text string
	if err == nil {
		text, err = c.askStreamed(ctx, t, req, true)
	}
	if err != nil && ctx.Err() != nil {
		return c.failed(ctx, t, err) // to be run again: the messages keep their reaction
	}
	c.m.facilitatorDone(wake, c.now())
	c.react(ctx)
	if err != nil {
		return c.failed(ctx, t, err)
	}
	rest, hadEnd := stripEnd(text)
	if hadEnd {
		r := &concludeRequest{Reason: concludeByEnd, EndReply: text, PrevPrompt: req.Messages[len(req.Messages)-1].Content}
		// In a reopened thread, a reply without words acknowledges
		// ("thanks"): the machine decides whether it closes silently.
		closed := c.m.facilitatorEnd(!hasWords(rest), r)
		c.react(ctx)
		if closed {
			c.log.Info("conversation closed again without a conclusion")
			t.report.Outcome = "empty"
			return nil
		}
		if !hasWords(rest) {
			rest = "" // a lone signature ("🧭 :end:") is not worth a post
		}
	}
	if strings.TrimSpace(rest) == "" {
		t.report.Outcome = "empty"
	}
	return c.post(ctx, f, t.id, rest, pendingPost{Turn: t.id, EndReply: hadEnd})
}

// concludeTurn runs the facilitator's conclude prompt once: the thread
// (without the :end: reply), then the previous phase prompt and the :end:
// reply when there was one. The conversation is concluded even when the
// turn fails.
func (c runner) concludeTurn(ctx context.Context) error {
	r := c.st.Conclude
	f, ok := c.roster.agents[c.roster.facilitator]
	if !ok {
		c.m.concluded(c.now(), false)
		c.react(ctx)
		return nil
	}
	t := c.newTurn(c.turnID(f.EnsDomain, templates.PromptConclude), f, templates.PromptConclude)
	defer c.done(t)
	var msgs []memory.Message
	for _, m := range *c.msgs {
		if r.EndTS == "" || m.TS != r.EndTS {
			msgs = append(msgs, m)
		}
	}
	var tail []HistoryMessage
	if r.Reason == concludeByEnd {
		tail = []HistoryMessage{
			{Role: llm.RoleUser, Content: r.PrevPrompt},
			{Role: llm.RoleAssistant, Content: r.EndReply},
		}
	}
	data := c.view().data(ctx, f, msgs, c.conv.ID, len(msgs)+len(tail))
	data.ConcludeReason = concludeReasons[r.Reason]
	req, err := c.build(t, templates.PromptConclude, data, c.view().history(ctx, f, msgs, true), tail)
	var text string
	if err == nil {
		text, err = c.askStreamed(ctx, t, req, false)
	}
	if err != nil && ctx.Err() != nil {
		t.report.Outcome = "cancelled"
		return ctx.Err()
	}
	c.m.concluded(c.now(), true)
	c.react(ctx)
	c.log.Info("conversation concluded", slog.String("reason", r.Reason))
	if err != nil {
		return c.failed(ctx, t, err)
	}
	if strings.TrimSpace(text) == "" {
		t.report.Outcome = "empty"
	}
	return c.post(ctx, f, t.id, text, pendingPost{Turn: t.id, Conclusion: true})
}
