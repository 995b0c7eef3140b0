package agents_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// TestFeedbackButtons: which posts carry 👍/👎 buttons, by slack.feedback.
// Threading messages and notices never do.
func TestFeedbackButtons(t *testing.T) {
	cases := []struct {
		mode string
		want []bool // by post: Elen's call, Cora's threading message, Cora's answer, Elen's answer
	}{
		{agents.FeedbackAnswers, []bool{false, false, false, true}},
		{agents.FeedbackAll, []bool{true, false, true, true}},
		{agents.FeedbackOff, []bool{false, false, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			r := newRig(t, func(r *rig) { r.opts.Feedback = tc.mode })
			r.model.on(elen, templates.PromptDefault, cora+", is C1 covered?", "Yes, Ada: C1 is covered.")
			r.model.on(cora, templates.PromptContextNotFound, threading("C1", "Looking C1 up."))
			r.model.on(cora, templates.PromptContextFound, "C1 is covered.")
			root := r.send("", "U1", "Ada", "Is C1 covered?")
			r.settle()
			posts := r.chat.posts
			if len(posts) != len(tc.want) {
				t.Fatalf("%d posts, want %d: %q", len(posts), len(tc.want), r.chat.texts())
			}
			for i, want := range tc.want {
				if got := posts[i].Feedback != ""; got != want {
					t.Errorf("post %d %q: buttons %v, want %v", i+1, posts[i].Text, got, want)
				}
			}
			if ref := posts[3].Feedback; ref != "" {
				got, err := agents.ParseFeedbackRef(ref)
				want := agents.FeedbackRef{Conversation: agents.ConversationID(team, chanA, root.TS), Turn: posts[3].TurnID, Agent: elen, Role: "facilitator"}
				if err != nil || got != want {
					t.Errorf("ParseFeedbackRef = %+v, %v; want %+v", got, err, want)
				}
			}
		})
	}
}

// TestRecordFeedback: a press is recorded on its turn and reported; bad
// references and values are refused with a reason.
func TestRecordFeedback(t *testing.T) {
	var reported []string
	r := newRig(t)
	r.e = r.engine(fakePrompts{}, func(d *agents.Deps) {
		d.Traces = tracedTurn{r.store, "conv-1-t2"}
		d.OnFeedback = func(agent, role, value, _ string) { reported = append(reported, agent+" "+role+" "+value) }
	})
	ref := agents.FeedbackRef{Conversation: "conv-1", Turn: "conv-1-t2", Agent: elen, Role: "facilitator"}.String()
	ctx := context.Background()
	if err := r.e.RecordFeedback(ctx, ref, "U1", agents.FeedbackNegative); err != nil {
		t.Fatal(err)
	}
	kept, err := r.store.Traces(ctx, "conv-1")
	if err != nil || len(kept.Feedback) != 1 || kept.Feedback[0] != (memory.Feedback{TurnID: "conv-1-t2", User: "U1", Value: "negative", At: r.clock.Now()}) {
		t.Errorf("feedback kept = %+v, %v", kept.Feedback, err)
	}
	if len(reported) != 1 || reported[0] != elen+" facilitator negative" {
		t.Errorf("reported = %q", reported)
	}
	for _, tc := range []struct{ name, ref, value, msg string }{
		{"not a reference", "fb1|x", agents.FeedbackPositive, `"fb1|x" is not a feedback reference`},
		{"another block", "b1", agents.FeedbackPositive, `"b1" is not a feedback reference`},
		{"value", ref, "meh", `"meh": feedback is positive or negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.e.RecordFeedback(ctx, tc.ref, "U1", tc.value)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want %q", err, tc.msg)
			}
		})
	}
	noLog := newRig(t)
	if err := noLog.e.RecordFeedback(ctx, ref, "U1", agents.FeedbackPositive); !errors.Is(err, agents.ErrNoTraceLog) {
		t.Errorf("without a trace store: %v", err)
	}
}

// tracedTurn is a trace log whose conversations also hold a trace of turn.
type tracedTurn struct {
	agents.TraceLog
	turn string
}

func (l tracedTurn) Traces(ctx context.Context, convID string) (memory.Traces, error) {
	kept, err := l.TraceLog.Traces(ctx, convID)
	kept.Turns = append(kept.Turns, memory.TurnTrace{TurnID: l.turn, Body: []byte("{}")})
	return kept, err
}

// TestFeedbackCountsOnce: a person's repeated press is recorded but not
// reported again, a change is reported with the rating it replaces, and
// a press on a turn without a trace is ignored.
func TestFeedbackCountsOnce(t *testing.T) {
	var reported []string
	r := newRig(t)
	r.e = r.engine(fakePrompts{}, func(d *agents.Deps) {
		d.Traces = tracedTurn{r.store, "conv-1-t2"}
		d.OnFeedback = func(_, _, value, previous string) { reported = append(reported, previous+">"+value) }
	})
	ctx := context.Background()
	ref := agents.FeedbackRef{Conversation: "conv-1", Turn: "conv-1-t2", Agent: elen, Role: "facilitator"}.String()
	for _, press := range []struct{ user, value string }{
		{"U1", agents.FeedbackPositive}, {"U1", agents.FeedbackPositive}, {"U1", agents.FeedbackPositive},
		{"U1", agents.FeedbackNegative}, {"U2", agents.FeedbackNegative}, {"U2", agents.FeedbackNegative},
	} {
		if err := r.e.RecordFeedback(ctx, ref, press.user, press.value); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{">positive", "positive>negative", ">negative"}; !slices.Equal(reported, want) {
		t.Errorf("reported %q, want %q", reported, want)
	}
	untraced := agents.FeedbackRef{Conversation: "conv-1", Turn: "conv-1-t9", Agent: elen, Role: "facilitator"}.String()
	if err := r.e.RecordFeedback(ctx, untraced, "U1", agents.FeedbackPositive); !errors.Is(err, agents.ErrNoTurnTrace) {
		t.Errorf("a turn without a trace: %v, want ErrNoTurnTrace", err)
	}
	kept, err := r.store.Traces(ctx, "conv-1")
	if err != nil || len(kept.Feedback) != 2 {
		t.Errorf("feedback kept = %+v, %v; want one per person on the traced turn", kept.Feedback, err)
	}
	if len(reported) != 3 {
		t.Errorf("the untraced press was reported: %q", reported)
	}
}
