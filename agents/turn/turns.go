package turn

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// Threading asks an unbound expert which memory session the messages
// that name it are about (context-not-found), reads its reply and
// chooses the session by its policy. in.Known is .KnownSessions.
func (r Runner) Threading(ctx context.Context, t *Turn, in Input) (Result, error) {
	th, err := r.readThreading(ctx, t, in)
	return t.result(Result{Text: th.Text, Threading: th}), err
}

// readThreading asks and reads the threading request (Threading), then
// chooses the session its key names.
func (r Runner) readThreading(ctx context.Context, t *Turn, in Input) (Threading, error) {
	a := t.Agent
	v := r.view(in)
	visible := v.visibleTo(a)
	data := v.data(a, visible, "", len(visible))
	data.KnownSessions = in.Known
	req, err := r.build(t, templates.PromptContextNotFound, data, v.history(a, visible, false), nil)
	if err != nil {
		return Threading{}, err
	}
	reply, outcome, failed, err := r.askThreading(ctx, t, req)
	if err != nil || failed != nil {
		return *failed, err
	}
	r.Log.Info("threading reply read", slog.String(logAgent, a.EnsDomain), slog.String(logTurn, t.ID),
		slog.String("outcome", outcome), slog.String("key", reply.Session))
	ps := PlaceholdersOf(req.Messages[len(req.Messages)-1].Content) // the rendered context-not-found
	if IsPlaceholder(reply.Message, ps.Message) {
		r.Log.Info("threading message repeats the template's placeholder; not posted", slog.String(logAgent, a.EnsDomain))
		reply.Message = ""
	}
	th := Threading{Text: reply.Message, Meta: map[string]string{"threading": outcome}}
	r.bindKey(t, in, visible, reply, ps, &th)
	return th, nil
}

// askThreading asks the threading request and reads its reply: a reply
// cut by the length limit is asked again, not repaired (a repaired cut
// would bind half a key); an unreadable one is asked again with a
// reminder. failed is the threading's outcome when the reply could not
// be read at all (the expert stays unbound, or the reply is posted as it
// is).
func (r Runner) askThreading(ctx context.Context, t *Turn, req llm.Request) (reply ThreadingReply, outcome string, failed *Threading, err error) {
	a := t.Agent
	fail := func(th Threading, e error) (ThreadingReply, string, *Threading, error) {
		return ThreadingReply{}, "", &th, e
	}
	resp, err := r.askResponse(ctx, t, req)
	if err == nil && resp.Truncated() {
		r.Log.Info("threading reply cut by the length limit; asking again", slog.String(logAgent, a.EnsDomain))
		resp, err = r.askResponse(ctx, t, req)
		if err == nil && resp.Truncated() {
			r.Log.Warn("threading reply cut by the length limit twice; the expert stays unbound", slog.String(logAgent, a.EnsDomain))
			return fail(Threading{Meta: map[string]string{"threading": ThreadingFailed},
				Unanswered: "its reply was cut by the model's length limit"}, nil)
		}
	}
	if err != nil {
		return fail(Threading{}, err)
	}
	raw := MarkCut(r.Config.Mask, resp)
	reply, outcome, perr := ParseThreading(raw)
	if perr == nil {
		return reply, outcome, nil, nil
	}
	r.Log.Info("threading reply unreadable; retrying", slog.String(logAgent, a.EnsDomain), slog.Any(logError, perr))
	retry := req
	retry.Messages = append(slices.Clone(req.Messages),
		llm.Message{Role: llm.RoleAssistant, Content: raw},
		llm.Message{Role: llm.RoleUser, Content: ThreadingReminder})
	if raw, err = r.ask(ctx, t, retry); err != nil {
		return fail(Threading{}, err)
	}
	if reply, outcome, perr = ParseThreading(raw); perr != nil {
		r.Log.Warn("threading reply unreadable twice; posting it as it is", slog.String(logAgent, a.EnsDomain), slog.Any(logError, perr))
		return fail(Threading{Text: raw, Meta: map[string]string{"threading": ThreadingFailed}}, nil)
	}
	return reply, outcome, nil, nil
}

// bindKey checks the key of a threading reply and chooses the session it
// names (chooseSession), or says in th why the expert cannot answer.
func (r Runner) bindKey(t *Turn, in Input, visible []Message, reply ThreadingReply, ps Placeholders, th *Threading) {
	a := t.Agent
	wrote := reply.Session
	var why string
	reply.Session, why = CheckKey(reply.Session, ps, r.Config.Agents[a.EnsDomain].Pattern)
	if why != "" && why != KeyHasSpaces {
		r.Log.Warn("threading key refused", slog.String(logAgent, a.EnsDomain), slog.String("key", wrote), slog.String("why", why))
		if reply.Message == "" {
			th.Text, th.Unanswered = "", fmt.Sprintf("its key %q was refused: %s", wrote, why)
			return
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
		return KeyWritten(key, texts)
	}
	var key, refused string
	if why == KeyHasSpaces {
		// A phrase may still name a session the expert has (matching
		// ignores blanks); it never starts one.
		key, refused = r.chooseSession(a, wrote, in.Sessions, false, written)
		if key == "" {
			r.Log.Warn("threading key refused", slog.String(logAgent, a.EnsDomain), slog.String("key", wrote), slog.String("why", why))
			refused = fmt.Sprintf("its key %q was refused: %s", wrote, why)
		}
	} else {
		key, refused = r.chooseSession(a, reply.Session, in.Sessions, true, written)
	}
	switch {
	case refused != "":
		th.Unanswered = refused
	case key == "" && strings.TrimSpace(reply.Message) == "":
		th.Text, th.Unanswered = "", "it found no memory key in the messages that name it"
	}
	th.Key = key
}

// chooseSession matches a threading key against the expert's sessions
// and applies its new-session policy (mayStart false: no new session). ""
// leaves the expert unbound; refused then says why when the policy
// refused a new session, or when the session matched is not written where
// the expert could read it (written false).
func (r Runner) chooseSession(a ens.Agent, key string, existing []string, mayStart bool, written func(string) bool) (session, refused string) {
	if key == "" {
		return "", ""
	}
	match, kind, score := MatchSession(key, existing, r.Config.MatchThreshold)
	if match != "" {
		if kind != MatchExact {
			r.Log.Info("session matched", slog.String(logAgent, a.EnsDomain), slog.String("key", key),
				slog.String("session", match), slog.String("match", kind), slog.Float64("score", score))
		}
		if !written(match) {
			r.Log.Warn("known key not written in the messages nor a tool result; refused", slog.String(logAgent, a.EnsDomain),
				slog.String("key", key), slog.String("session", match))
			return "", fmt.Sprintf("its key %q is one it knows, but no message nor tool result writes it", match)
		}
		return match, ""
	}
	if !mayStart {
		return "", ""
	}
	s := r.Config.Agents[a.EnsDomain]
	switch s.SessionPolicy {
	case SessionNever:
		r.Log.Info("no session matches and the policy creates none", slog.String(logAgent, a.EnsDomain), slog.String("key", key))
		return "", fmt.Sprintf("it has no memory for %q and may not start one", key)
	case SessionPattern:
		if re := s.Pattern; re == nil || !re.MatchString(key) {
			r.Log.Info("new session refused by session_pattern", slog.String(logAgent, a.EnsDomain), slog.String("key", key))
			return "", fmt.Sprintf("it has no memory for %q, and %q is not a key it may start one for", key, key)
		}
	}
	return key, ""
}

// Session runs prompt for an agent with the memory session key: the
// session's entries from other conversations (in.Entries), then what it
// sees of this thread.
func (r Runner) Session(ctx context.Context, t *Turn, in Input, key, prompt string) (Result, error) {
	a := t.Agent
	v := r.view(in)
	visible := v.visibleTo(a)
	data := v.data(a, visible, key, len(visible))
	history := AppendSessionHistory(make([]HistoryMessage, 0, len(in.Entries)+len(visible)), in.Entries)
	history = append(history, v.history(a, visible, false)...)
	req, err := r.build(t, prompt, data, history, nil)
	if err != nil {
		return t.result(Result{}), err
	}
	text, err := r.askStreamed(ctx, t, req, in.Show)
	return t.result(Result{Text: text}), err
}

// Facilitator runs the facilitator's default prompt over the whole
// thread (START, BODY, or after a restart). It returns the reply and the
// prompt it answered (what a conclusion asked for by :end: replays).
func (r Runner) Facilitator(ctx context.Context, t *Turn, in Input) (Result, error) {
	v := r.view(in)
	data := v.data(t.Agent, v.msgs, r.Place.Conversation, len(v.msgs))
	req, err := r.build(t, templates.PromptDefault, data, v.history(t.Agent, v.msgs, true), nil)
	if err != nil {
		return t.result(Result{}), err
	}
	text, err := r.askStreamed(ctx, t, req, in.Show)
	return t.result(Result{Text: text, Prompt: req.Messages[len(req.Messages)-1].Content}), err
}

// Conclusion runs the facilitator's conclude prompt: the thread (without
// the :end: reply), then the previous phase prompt and the :end: reply
// when there was one.
func (r Runner) Conclusion(ctx context.Context, t *Turn, in Input) (Result, error) {
	q := in.Conclude
	v := r.view(in)
	var msgs []Message
	for _, m := range v.msgs {
		if q.EndTS == "" || m.TS != q.EndTS {
			msgs = append(msgs, m)
		}
	}
	var tail []HistoryMessage
	if q.ByEnd {
		tail = []HistoryMessage{
			{Role: llm.RoleUser, Content: q.PrevPrompt},
			{Role: llm.RoleAssistant, Content: q.EndReply},
		}
	}
	data := v.data(t.Agent, msgs, r.Place.Conversation, len(msgs)+len(tail))
	data.ConcludeReason = q.Reason
	req, err := r.build(t, templates.PromptConclude, data, v.history(t.Agent, msgs, true), tail)
	if err != nil {
		return t.result(Result{}), err
	}
	text, err := r.askStreamed(ctx, t, req, in.Show)
	return t.result(Result{Text: text}), err
}
