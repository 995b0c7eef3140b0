package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// Which posts carry feedback buttons (slack.feedback).
const (
	// FeedbackAnswers: the last post of each facilitator reply to the
	// people (one that calls no agent) and of each conclusion.
	FeedbackAnswers = "answers"
	FeedbackAll     = "all" // every agent reply
	FeedbackOff     = "off"
)

// Values of a press.
const (
	FeedbackPositive = "positive"
	FeedbackNegative = "negative"
)

// feedbackPrefix starts a feedback reference; the transport carries the
// reference with the buttons (Reply.Feedback) and hands it back with a
// press.
const feedbackPrefix = "fb1|"

// FeedbackRef is the turn a post's buttons rate.
type FeedbackRef struct {
	Conversation, Turn, Agent, Role string
}

func (r FeedbackRef) String() string {
	return feedbackPrefix + strings.Join([]string{r.Conversation, r.Turn, r.Agent, r.Role}, "|")
}

// ParseFeedbackRef reads what FeedbackRef.String wrote.
func ParseFeedbackRef(s string) (FeedbackRef, error) {
	rest, ok := strings.CutPrefix(s, feedbackPrefix)
	parts := strings.Split(rest, "|")
	if !ok || len(parts) != 4 || parts[0] == "" || parts[1] == "" {
		return FeedbackRef{}, fmt.Errorf("agents: %q is not a feedback reference", s)
	}
	return FeedbackRef{Conversation: parts[0], Turn: parts[1], Agent: parts[2], Role: parts[3]}, nil
}

// feedbackFor is the reference a post's buttons carry, "" when it gets
// none: notices and threading messages never do; slack.feedback says
// which replies do.
func (s turnStep) feedbackFor(a ens.Agent, p pendingPost) string {
	c := s.c
	if p.Notice || p.Turn == "" || p.PostID != p.Turn {
		return "" // a notice, or a threading message (<turn>-threading)
	}
	switch c.e.opts.Feedback {
	case FeedbackAll:
	case FeedbackAnswers:
		if a.Role != ens.RoleFacilitator || !p.Conclusion && s.callsAgent(p.Text) {
			return ""
		}
	default:
		return ""
	}
	return FeedbackRef{Conversation: c.conv.ID, Turn: p.Turn, Agent: a.EnsDomain, Role: string(a.Role)}.String()
}

// callsAgent reports whether a reply names an agent other than a human
// one: it is then a call, not an answer to the people.
func (s turnStep) callsAgent(text string) bool {
	c := s.c
	for _, n := range c.Mentions(text) {
		if c.Agents[n].Role != ens.RoleHuman {
			return true
		}
	}
	return false
}

// Errors of RecordFeedback.
var (
	ErrFeedbackValue = errors.New("feedback is positive or negative")
	ErrNoTraceLog    = errors.New("feedback is not kept (no trace store)")
	// ErrNoTurnTrace: the turn rated has no trace (trace.enabled off,
	// expired, or a made-up reference); the press is ignored.
	ErrNoTurnTrace = errors.New("the turn has no trace")
)

// RecordFeedback records a person's press of a post's feedback button
// on the trace of the turn its reference names (a second press by the
// same person replaces the first) and reports a new or changed rating
// (Deps.OnFeedback), so that a person's rating counts once. A press on a
// turn without a trace is ignored (ErrNoTurnTrace).
func (e *Engine) RecordFeedback(ctx context.Context, ref, user, value string) error {
	r, err := ParseFeedbackRef(ref)
	if err != nil {
		return err
	}
	if value != FeedbackPositive && value != FeedbackNegative {
		return fmt.Errorf("agents: %q: %w", value, ErrFeedbackValue)
	}
	if e.deps.Traces == nil {
		return ErrNoTraceLog
	}
	kept, err := e.deps.Traces.Traces(ctx, r.Conversation)
	if err != nil {
		return fmt.Errorf("agents: feedback on %s: %w", r.Turn, err)
	}
	if !slices.ContainsFunc(kept.Turns, func(t memory.TurnTrace) bool { return t.TurnID == r.Turn }) {
		return fmt.Errorf("agents: feedback on %s: %w", r.Turn, ErrNoTurnTrace)
	}
	previous := ""
	for _, f := range kept.Feedback {
		if f.TurnID == r.Turn && f.User == user {
			previous = f.Value
		}
	}
	if err := e.deps.Traces.RecordFeedback(ctx, r.Conversation, memory.Feedback{TurnID: r.Turn, User: user, Value: value, At: e.now()}); err != nil {
		return fmt.Errorf("agents: feedback on %s: %w", r.Turn, err)
	}
	if e.deps.OnFeedback != nil && previous != value {
		e.deps.OnFeedback(r.Agent, r.Role, value, previous)
	}
	return nil
}
