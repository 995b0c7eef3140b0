package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// A turn runs in agents/turn (turn.Runner): an Input value in, a Result
// value out, no store and no Slack. The engine's side of a turn is here:
// the runner given the conversation's log and place, the turn's one log
// line, its report and trace once it ended, its failure and its notice.

// runner is the turn runner of the loaded conversation.
func (c *convo) runner() turn.Runner {
	r := c.e.turns
	r.Log = c.log
	r.Place = turn.Place{Conversation: c.conv.ID, Channel: c.conv.Channel, ThreadTS: c.conv.ThreadTS}
	return r
}

// done logs the turn's one line and reports it; it returns the turn's
// finished trace when traces are kept.
func (s turnStep) done(t *turn.Turn) (memory.TurnTrace, bool) {
	c := s.c
	t.Report.Duration = c.e.now().Sub(t.Started)
	r := t.Report
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
	tr, ok := c.e.tracer.finishTrace(t, c.msgs, c.log)
	if c.e.deps.OnTurn != nil {
		c.e.deps.OnTurn(r)
	}
	if c.e.deps.Working != nil {
		c.e.deps.Working.TurnEnded(s.work(t))
	}
	return tr, ok
}

// failed records a failed turn in its report; the step then posts a ⚠️
// notice in the thread (errors.notify = "thread"), never stored as a
// message. A cancelled context or a lost lock is not a failure: the turn
// stays to be run again, by this replica or another, and failed returns
// why it stopped.
func failed(ctx context.Context, t *turn.Turn, err error) error {
	if ctx.Err() != nil || errors.Is(err, memory.ErrLockLost) {
		t.Report.Outcome = "cancelled"
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	t.Report.Outcome = "failed"
	t.Report.Err = err
	return nil
}

// turnNotice is a turn's ⚠️ notice, to post when notices go to the thread or
// its reply was streamed there (the step applied its markers first).
func (s turnStep) turnNotice(t *turn.Turn, reason string) (pendingPost, bool) {
	c := s.c
	_, streamed := c.m.Read().Streamed(t.ID)
	if c.e.opts.Notify != NotifyThread && !streamed {
		return pendingPost{}, false
	}
	if t.Trace != nil {
		t.Trace.Notice = reason
	}
	text := fmt.Sprintf("⚠️ %s could not answer: %s (ref %s)", t.Agent.Name, reason, t.ID)
	return pendingPost{PostID: t.ID + "-notice", Turn: t.ID, Agent: t.Agent.EnsDomain, Text: text, Notice: true}, true
}

// mentionUsers lists the paired Slack users of the human agents a reply
// names.
func (c *convo) mentionUsers(ctx context.Context, text, self string) []string {
	var users []string
	for _, n := range c.Mentions(text) {
		if n == self || c.Agents[n].Role != ens.RoleHuman {
			continue
		}
		u, err := pairedUser(ctx, c.e.pairings, n)
		if err != nil {
			c.log.Warn("paired user of a human agent", slog.String(logAgent, n), slog.Any(logError, err))
		}
		if u != "" {
			users = append(users, u)
		}
	}
	return users
}

// maxKnownSessions bounds .KnownSessions: the keys an expert is offered
// when it chooses one.
const maxKnownSessions = 50
