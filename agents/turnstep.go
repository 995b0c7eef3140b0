package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// turnStep carries one turn out for the step: it asks the machine
// whether and how the turn runs, gathers the turn's input, runs the
// turn's function (turn.Runner), and feeds what the turn produced into
// the machine and the conversation, its posts last (convo.deliver).
type turnStep struct {
	c   *convo
	run turn.Runner
	// description is the channel's description, gathered before a turn
	// runs (describe) for its input.
	description string
}

// input is what a turn of agent a reads of the conversation as it
// stands, gathered and converted at the engine's edge: the thread, the
// identities it names (resolved now), what the state says of the
// exchange and the channel's description. The step adds what the kind
// of turn reads besides.
func (s turnStep) input(ctx context.Context, a ens.Agent) turn.Input {
	c := s.c
	s.gather(ctx, a)
	st := c.m.Read()
	return turn.Input{
		Agent: a, Thread: threadOf(c.msgs), Team: &c.Team, Description: s.description,
		Participants: st.Participants(), Notes: st.Notes(), ExchangeStart: st.ExchangeStart(), Acknowledged: st.Acknowledgements(),
	}
}

// sessionTurn runs a turn of t's agent in the memory session key of
// namespace ns, with the session's entries from other conversations in
// its input; its reply is shown while it is written, mentioning whom it
// calls unless the conversation concludes.
func (s turnStep) sessionTurn(ctx context.Context, t *turn.Turn, ns, key, prompt string) (turn.Result, error) {
	entries, err := otherConversations(ctx, s.c.e.sessions, s.c.conv.ID, ns, key)
	if err != nil {
		return turn.Result{}, err
	}
	in := s.input(ctx, t.Agent)
	in.Entries = entries
	show := s.shower(t, prompt, !s.c.m.Read().Concluding())
	in.Show = showing(show)
	res, err := s.run.Session(ctx, t, in, key, prompt)
	s.shown(show)
	return res, err
}

// turns is the turn step of the loaded conversation.
func (c *convo) turns() turnStep { return turnStep{c: c, run: c.runner()} }

// noticeOverload posts the one ⚠️ of an overload (until the queue has
// room again), as the facilitator when there is one.
func (s turnStep) noticeOverload(ctx context.Context) {
	c := s.c
	name := c.overloaded
	c.overloaded = ""
	if !c.m.OverloadNotice() {
		return
	}
	if c.Facilitator != "" {
		name = c.Facilitator
	}
	a, _ := c.agent(ctx, name)
	t := s.run.NewTurn(c.m.TurnID(), a, "")
	s.notify(ctx, t, fmt.Sprintf("this conversation is overloaded (%d turns waiting); write again once they are answered", c.m.Read().Queued()))
}

// finish logs and reports a turn, and hands its trace to the next commit.
func (s turnStep) finish(t *turn.Turn) {
	if tr, ok := s.done(t); ok {
		s.c.traces = append(s.c.traces, tr)
	}
	person, name := exchangePerson(s.c.m.Read().SinceReopen(), s.c.conv, s.c.msgs)
	s.c.usage = append(s.c.usage, turnUsage(t, s.c.conv.Channel, person, name)...)
}

// apply feeds what a turn produced so far into the machine: the history
// notes of the tools it used.
func (s turnStep) apply(r turn.Result) {
	for _, n := range r.Notes {
		s.c.m.AddNote(n.Text, n.At, false)
	}
}

// post makes a reply of turn t (prepared by the turn) through the
// outbox; the time it took goes in the turn's trace.
func (s turnStep) post(ctx context.Context, t *turn.Turn, a ens.Agent, postID, text string, p pendingPost) error {
	p.Turn = t.ID
	p, ok := s.prepare(ctx, a, postID, text, p)
	if !ok {
		return nil
	}
	began := s.c.e.now()
	err := s.c.deliver(ctx, p)
	if tr := t.Trace; tr != nil {
		took := s.c.e.now().Sub(began)
		tr.Timings.PostMS += took.Milliseconds()
		tr.Posts = append(tr.Posts, turn.Span{Began: began, Took: took})
	}
	return err
}

// notify posts a turn's ⚠️ notice through the outbox. One that cannot be
// posted now stays pending there; a lost lock leaves it to the next
// holder, which must not see it twice.
func (s turnStep) notify(ctx context.Context, t *turn.Turn, reason string) {
	p, ok := s.turnNotice(t, reason)
	if !ok {
		return
	}
	if err := s.c.deliver(ctx, p); err != nil {
		s.c.log.Warn("post a failure notice", slog.String(logTurn, t.ID), slog.Any(logError, err))
	}
}

// failed records a failed turn and posts its notice; it returns why the
// turn stopped when it is to be run again (failed).
func (s turnStep) failed(ctx context.Context, t *turn.Turn, err error) error {
	if stop := failed(ctx, t, err); stop != nil {
		return stop
	}
	s.notify(ctx, t, turn.NoticeReason(err))
	return nil
}

// couldNotAnswer records that a named agent cannot answer, and why, in a
// history line never posted, which wakes the facilitator at once: it can
// ask someone else or tell the person.
func (s turnStep) couldNotAnswer(agent, reason string) {
	s.c.m.AddNote(fmt.Sprintf("(%s could not answer: %s)", agent, reason), s.c.e.now(), true)
}

// call runs the first queued turn: an expert or clone answering the
// message that named it, unless its call timed out while waiting or it is
// at its turn cap.
func (s turnStep) call(ctx context.Context) error {
	c := s.c
	q := c.m.Read().FirstQueued()
	now := c.e.now()
	a, registered := c.Agents[q.Agent]
	if !registered {
		a = ens.Agent{Name: firstLabel(q.Agent), EnsDomain: q.Agent, Role: ens.RoleExpert}
	}
	t := s.run.NewTurn(q.ID, a, "")
	t.Report.Wait = now.Sub(q.Queued)
	s.working(t)
	defer s.finish(t)
	endCall := func() {
		c.m.EndCall(q, c.e.now())
		c.react(ctx)
	}
	switch c.m.Admit(q, registered, now) {
	case conversation.NotServed:
		endCall()
		s.couldNotAnswer(q.Agent, "it is no longer served in this channel")
		t.Report.Outcome = "failed"
		t.Report.Err = errors.New("agent no longer served in this channel")
		return nil
	case conversation.CallExpired:
		endCall()
		c.m.AddNote(fmt.Sprintf("(%s did not answer: timeout)", q.Agent), c.e.now(), true)
		t.Report.Outcome = "timeout"
		return nil
	case conversation.AtCap:
		endCall()
		reason := fmt.Sprintf("it reached its limit of %d turns in this conversation", c.e.opts.MaxTurnsPerAgent)
		s.couldNotAnswer(q.Agent, reason)
		t.Report.Outcome = "skipped"
		if c.m.CapNotice(q.Agent) {
			s.notify(ctx, t, reason)
		}
		return nil
	}
	c.m.StartTurn(q.Agent)
	s.description = describe(ctx, c)

	var text, unanswered string
	var meta map[string]string
	var err error
	if a.Role == ens.RoleClone {
		// A clone answers on its human's group session.
		ns, key, _ := c.sessionOf(a)
		var res turn.Result
		res, err = s.sessionTurn(ctx, t, ns, key, templates.PromptDefault)
		s.apply(res)
		text = res.Text
	} else {
		text, meta, unanswered, err = s.expert(ctx, t)
	}
	if err != nil && ctx.Err() != nil {
		return s.failed(ctx, t, err) // to be run again: the call goes on
	}
	endCall()
	if err != nil {
		if err := s.failed(ctx, t, err); err != nil {
			return err
		}
		s.couldNotAnswer(q.Agent, turn.NoticeReason(err))
		return nil
	}
	if unanswered != "" {
		s.couldNotAnswer(q.Agent, unanswered)
	}
	if strings.TrimSpace(text) == "" {
		t.Report.Outcome = "empty"
	}
	return s.post(ctx, t, a, t.ID, text, pendingPost{Meta: meta})
}

// expert runs an expert: context-found when it is bound; otherwise
// threading (context-not-found), then, once bound, context-found in the
// same turn, after posting the threading message. unanswered says why an
// expert left unbound cannot answer (no key found, or its policy refused
// a new session); it is empty when the expert answered or asked for the
// key in its message.
func (s turnStep) expert(ctx context.Context, t *turn.Turn) (text string, meta map[string]string, unanswered string, err error) {
	c, a := s.c, t.Agent
	ns := c.expertNamespace(a.EnsDomain)
	if key := c.m.Read().Binding(a.EnsDomain); key != "" {
		res, err := s.sessionTurn(ctx, t, ns, key, templates.PromptContextFound)
		s.apply(res)
		return res.Text, nil, "", err
	}
	// Its sessions, most recent first: all are matched against the key
	// it writes, the first maxKnownSessions offered.
	recent, err := c.e.sessions.RecentSessions(ctx, ns, 0)
	if err != nil {
		return "", nil, "", fmt.Errorf("list sessions of %s: %w", a.EnsDomain, err)
	}
	in := s.input(ctx, a)
	in.Known = recent[:min(len(recent), maxKnownSessions)]
	in.Sessions = slices.Sorted(slices.Values(recent))
	res, err := s.run.Threading(ctx, t, in)
	s.apply(res)
	th := res.Threading
	if err != nil {
		return "", nil, "", err
	}
	if th.Key == "" {
		return th.Text, th.Meta, th.Unanswered, nil
	}
	c.bind(ctx, a, th.Key)
	meta = th.Meta
	if th.Text != "" {
		// A threading message that cannot be posted now stays first in
		// the outbox; the answer goes after it.
		if err := s.post(ctx, t, a, t.ID+"-threading", th.Text, pendingPost{Meta: meta}); err != nil {
			return "", nil, "", err
		}
		meta = nil // recorded on the threading message
	}
	res, err = s.sessionTurn(ctx, t, ns, th.Key, templates.PromptContextFound)
	s.apply(res)
	return res.Text, meta, "", err
}

// facilitator runs the facilitator's turn over the whole thread. A reply
// holding :end: asks for the conclusion; what is left of it is posted
// first.
func (s turnStep) facilitator(ctx context.Context) error {
	c := s.c
	f := c.Agents[c.Facilitator]
	s.description = describe(ctx, c)
	t := s.run.NewTurn(c.turnIDFor(f.EnsDomain, templates.PromptDefault), f, templates.PromptDefault)
	s.working(t)
	defer s.finish(t)
	in := s.input(ctx, f)
	show := s.shower(t, templates.PromptDefault, true)
	in.Show = showing(show)
	// Messages that arrive during the turn are routed after it and wake
	// the facilitator again.
	wake := c.m.StartFacilitator()
	res, err := s.run.Facilitator(ctx, t, in)
	s.shown(show)
	s.apply(res)
	text, prompt := res.Text, res.Prompt
	if err != nil && ctx.Err() != nil {
		return s.failed(ctx, t, err) // to be run again: the messages keep their reaction
	}
	c.m.FacilitatorDone(wake, c.e.now())
	c.react(ctx)
	if err != nil {
		return s.failed(ctx, t, err)
	}
	rest, hadEnd := turn.StripEnd(text)
	if hadEnd && c.callsAgents(rest, f.EnsDomain) {
		// A call beats an :end: in the same reply: the agent answers first.
		c.log.Info("the facilitator's reply calls an agent and holds :end:; the :end: is ignored", slog.String(logTurn, t.ID))
		hadEnd = false
	}
	if !hadEnd {
		if why := c.stalled(rest, f.EnsDomain, c.m.Read().Recent(), c.m.Read().AgentTurns(), c.e.opts.MaxTurnsPerAgent); why != "" {
			return s.stall(ctx, t, why)
		}
		c.m.Book().Remember(rest)
	}
	if hadEnd {
		// :end: always concludes (SPEC §14.2); conclude may close silently.
		c.m.RequestConclude(&concludeRequest{Reason: concludeByEnd, EndReply: text, PrevPrompt: prompt})
		c.react(ctx)
		if !turn.HasWords(rest) {
			rest = "" // a lone signature ("🧭 :end:") is not worth a post
		}
	}
	if strings.TrimSpace(rest) == "" {
		t.Report.Outcome = "empty"
	}
	return s.post(ctx, t, f, t.ID, rest, pendingPost{EndReply: hadEnd})
}

// conclude runs the facilitator's conclude prompt once. The conversation
// is concluded even when the turn fails.
func (s turnStep) conclude(ctx context.Context) error {
	c := s.c
	r, _ := c.m.Read().Conclude()
	f, ok := c.Agents[c.Facilitator]
	if !ok {
		c.m.Concluded(c.e.now(), false, false)
		c.react(ctx)
		return nil
	}
	s.description = describe(ctx, c)
	t := s.run.NewTurn(c.turnIDFor(f.EnsDomain, templates.PromptConclude), f, templates.PromptConclude)
	s.working(t)
	defer s.finish(t)
	in := s.input(ctx, f)
	in.Conclude = turn.Conclude{Reason: concludeReasons[r.Reason], ByEnd: r.Reason == concludeByEnd,
		EndReply: r.EndReply, PrevPrompt: r.PrevPrompt, EndTS: r.EndTS}
	show := s.shower(t, templates.PromptConclude, false)
	in.Show = showing(show)
	res, err := s.run.Conclusion(ctx, t, in)
	s.shown(show)
	s.apply(res)
	text := res.Text
	if err != nil && ctx.Err() != nil {
		t.Report.Outcome = "cancelled"
		return ctx.Err()
	}
	// A conclusion without words (only :end:, emoji or white space) closes
	// silently: nothing is posted, the root still gets its ✅.
	rest, _ := turn.StripEnd(text)
	silent := err == nil && !turn.HasWords(rest)
	c.m.Concluded(c.e.now(), true, silent)
	c.react(ctx)
	c.log.Info("conversation concluded", slog.String("reason", r.Reason), slog.Bool("silent", silent))
	if err != nil {
		return s.failed(ctx, t, err)
	}
	if silent {
		t.Report.Outcome = "empty"
		return nil
	}
	return s.post(ctx, t, f, t.ID, text, pendingPost{Conclusion: true})
}

// refuse concludes the conversation without a model call, a daily budget
// of scope being spent, and gives the budget's notice once per
// conversation and day: in the thread, or, for a person's budget, to
// that person alone once the step commits.
func (s turnStep) refuse(ctx context.Context, scope, person string) error {
	c := s.c
	now := c.e.now()
	if !c.m.Read().Concluding() {
		// A conclusion already asked for (by :end:) keeps its trigger,
		// whose working reaction concluded takes off.
		c.m.RequestConclude(&concludeRequest{Reason: concludeByBudget})
	}
	c.m.Concluded(now, true, false)
	c.react(ctx)
	c.log.Info("conversation concluded", slog.String("reason", concludeByBudget), slog.String("scope", scope))
	key := "budget:" + scope + ":" + memory.UsageDay(now)
	if !c.m.Book().Notice(key) {
		return nil
	}
	name := c.Facilitator
	if name == "" && len(c.Names) > 0 {
		name = c.Names[0]
	}
	if scope == budgetPerson {
		c.notices = append(c.notices, notice{user: person, agent: name, text: budgetNotice(scope)})
		return nil
	}
	id := c.m.TurnID()
	return c.deliver(ctx, pendingPost{PostID: id + "-budget", Turn: id, Agent: name, Text: budgetNotice(scope), Notice: true})
}
