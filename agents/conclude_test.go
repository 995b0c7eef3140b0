package agents

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/templates"
)

func TestPersonEndDuringRunningTurn(t *testing.T) {
	r := newRig(t)
	var root Event
	r.model.hook = func(req llm.Request) {
		if req.Agent == cora && req.Prompt == templates.PromptContextFound {
			r.send(root.TS, "U1", "Alice", "never mind, thanks :end:")
		}
	}
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.model.on(cora, templates.PromptContextFound, "Claim C1 is open; "+paul+" knows the policy.")
	root = r.send("", "U1", "Alice", cora+" is claim C1 open?")
	r.settle()
	want := []string{"Cora: Claim C1 is open; " + paul + " knows the policy.", "Elen: elen ok"}
	if got := r.chat.texts(); !slices.Equal(got, want) {
		t.Errorf("posts %q, want %q", got, want)
	}
	if n := len(r.model.calls(paul, "")); n != 0 {
		t.Errorf("paul ran %d times; the conclusion cancels queued turns", n)
	}
	if n := len(r.model.calls(elen, templates.PromptDefault)); n != 0 {
		t.Errorf("the facilitator ran default %d times; a person's :end: goes straight to conclude", n)
	}
	concludes := r.model.calls(elen, templates.PromptConclude)
	if len(concludes) != 1 || !strings.Contains(lastUser(concludes[0]), "count=3|") {
		t.Fatalf("conclude turns %d (%q), want one seeing root, reply and :end:", len(concludes), contents(concludes[0]))
	}
	st := r.state(root.TS)
	if st.Status != statusConcluded || len(st.Queue) != 0 || r.chat.anyReaction("hourglass_flowing_sand") {
		t.Errorf("status %q, queue %+v, working reaction left %v", st.Status, st.Queue, r.chat.anyReaction("hourglass_flowing_sand"))
	}
}

func TestEndReplyAndConclusionPosts(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Channels = []ChannelConfig{{ID: chanA, Agents: []string{elen, cora, tina}}}
	})
	r.pair("UT", tina)
	r.model.on(elen, templates.PromptDefault, "All clear. Bye.\n:end:")
	r.model.on(elen, templates.PromptConclude, "Summary: "+cora+" and "+tina+" follow up.")
	root := r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()
	want := []string{"Elen: All clear. Bye.", "Elen: Summary: " + cora + " and " + tina + " follow up."}
	if got := r.chat.texts(); !slices.Equal(got, want) {
		t.Fatalf("posts %q, want %q", got, want)
	}
	if m := r.chat.posts[1].Mention; len(m) != 0 {
		t.Errorf("the conclusion mentions %q; names in a conclusion call nobody", m)
	}
	if n := len(r.model.calls(cora, "")); n != 0 {
		t.Errorf("a name in the conclusion triggered %d turns", n)
	}
	st := r.state(root.TS)
	if len(st.Calls) != 0 || len(st.Queue) != 0 || st.Status != statusConcluded {
		t.Errorf("state after the conclusion: calls %+v, queue %+v, status %q", st.Calls, st.Queue, st.Status)
	}
	conclude := r.model.calls(elen, templates.PromptConclude)[0]
	// Only the :end: reply itself, sent verbatim second to last, holds it.
	if i := indexOf(conclude, "All clear. Bye."); i >= 0 && i != len(conclude.Messages)-2 {
		t.Errorf("the posted remainder of the :end: reply is in the conclude history:\n%s", strings.Join(contents(conclude), "\n"))
	}
	n := len(conclude.Messages)
	if conclude.Messages[n-2] != (llm.Message{Role: llm.RoleAssistant, Content: "All clear. Bye.\n:end:"}) {
		t.Errorf("the :end: reply is not sent verbatim: %q", conclude.Messages[n-2])
	}
}

func TestFailedConcludeStillConcludes(t *testing.T) {
	r := newRig(t)
	r.model.on(elen, templates.PromptDefault, ":end:")
	r.model.on(elen, templates.PromptConclude, &llm.Error{Status: 503, Reason: llm.ReasonServer, Attempts: 3})
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	posts := r.chat.texts()
	if len(posts) != 1 || !strings.HasPrefix(posts[0], "Elen: ⚠️ Elen could not answer: the model endpoint returned HTTP 503 (ref ") {
		t.Errorf("posts %q, want one ⚠️ notice", posts)
	}
	if st := r.state(root.TS); st.Status != statusConcluded || !r.chat.reacted(root.TS, "white_check_mark") {
		t.Errorf("status %q, ✅ %v", st.Status, r.chat.reacted(root.TS, "white_check_mark"))
	}
}

func TestRestartKeepsBindingsAndGroup(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Channels = []ChannelConfig{{ID: chanA, Agents: []string{elen, cora, twin}}}
		r.opts.MaxTurnsPerAgent = 1
	})
	r.pair("UT", tina)
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.model.on(elen, templates.PromptDefault, ":end:")
	root := r.send("", "UT", "Tina", cora+" claim C1, please")
	r.settle()
	before := r.state(root.TS)
	if before.Status != statusConcluded || before.Bindings[cora] != "C1" || before.Group == "" || before.Turns != 2 {
		t.Fatalf("before the restart: status %q, bindings %v, group %q, turns %d", before.Status, before.Bindings, before.Group, before.Turns)
	}
	r.send(root.TS, "U1", "Alice", cora+" one more thing")
	r.settle()
	after := r.state(root.TS)
	if after.Bindings[cora] != "C1" || after.Group != before.Group {
		t.Errorf("after the restart: bindings %v, group %q (was %q)", after.Bindings, after.Group, before.Group)
	}
	if n := len(r.model.calls(cora, templates.PromptContextNotFound)); n != 1 {
		t.Errorf("cora threaded %d times; the binding should survive the restart", n)
	}
	if n := len(r.model.calls(cora, templates.PromptContextFound)); n != 2 {
		t.Errorf("cora answered %d times, want 2: the per-agent counter resets at a restart", n)
	}
	if after.Turns != 2 || after.Status != statusOpen {
		t.Errorf("after the restart: turns %d, status %q; want 2, open", after.Turns, after.Status)
	}
}

func TestInactivityClock(t *testing.T) {
	t.Run("timeout 0 is off", func(t *testing.T) {
		r := newRig(t, func(r *rig) { r.opts.Timeout = 0 })
		root := r.send("", "U1", "Alice", "hello")
		r.settle()
		r.clock.Advance(7 * 24 * time.Hour)
		r.settle()
		if st := r.state(root.TS); st.Status != statusOpen || len(r.model.calls(elen, templates.PromptConclude)) != 0 {
			t.Errorf("status %q with the inactivity conclusion off", st.Status)
		}
	})
	t.Run("not while a call is pending", func(t *testing.T) {
		r := newRig(t, func(r *rig) {
			r.opts.Channels = []ChannelConfig{{ID: chanA, Agents: []string{elen, tina}}}
			r.opts.CallTimeout = 30 * time.Minute
		})
		r.model.on(elen, templates.PromptDefault, tina+" can you confirm?")
		root := r.send("", "U1", "Alice", "Is the claim approved?")
		r.settle()
		r.clock.Advance(20 * time.Minute)
		r.settle()
		if st := r.state(root.TS); st.Status != statusOpen || len(st.Calls) != 1 {
			t.Errorf("concluded while a call was pending: status %q, calls %+v", st.Status, st.Calls)
		}
		r.clock.Advance(10 * time.Minute) // the call times out; the facilitator runs
		r.settle()
		if n := len(r.model.calls(elen, templates.PromptDefault)); n != 2 {
			t.Errorf("facilitator turns %d, want 2", n)
		}
		r.clock.Advance(10 * time.Minute)
		r.settle()
		if st := r.state(root.TS); st.Status != statusConcluded {
			t.Errorf("status %q after the timeout", st.Status)
		}
	})
	t.Run("from the end of the last turn", func(t *testing.T) {
		r := newRig(t, longLock)
		r.model.hook = func(req llm.Request) {
			if req.Prompt == templates.PromptDefault {
				r.clock.Advance(8 * time.Minute)
			}
		}
		root := r.send("", "U1", "Alice", "hello")
		r.settle()
		r.clock.Advance(5 * time.Minute) // 13 minutes after the message, 5 after the turn
		r.settle()
		if st := r.state(root.TS); st.Status != statusOpen {
			t.Fatalf("concluded %s after the turn ended", 5*time.Minute)
		}
		r.clock.Advance(5 * time.Minute)
		r.settle()
		if st := r.state(root.TS); st.Status != statusConcluded {
			t.Errorf("status %q 10 minutes after the turn ended", st.Status)
		}
	})
}

func TestGuardsCount(t *testing.T) {
	t.Run("failed turns count", func(t *testing.T) {
		r := newRig(t, func(r *rig) { r.opts.MaxTurnsPerAgent = 1 })
		r.model.on(cora, templates.PromptContextNotFound, errors.New("boom"))
		root := r.send("", "U1", "Alice", cora+" hello")
		r.settle()
		r.send(root.TS, "U1", "Alice", cora+" again")
		r.settle()
		if n := len(r.model.calls(cora, "")); n != 1 {
			t.Errorf("cora's model calls = %d; its failed turn should count toward its cap", n)
		}
		if st := r.state(root.TS); st.Turns != 3 {
			t.Errorf("turns %d, want 3 (cora's failed turn and two facilitator turns)", st.Turns)
		}
	})
	t.Run("max_turns concludes at once", func(t *testing.T) {
		r := newRig(t, func(r *rig) { r.opts.MaxTurns = 1 })
		root := r.send("", "U1", "Alice", "hello")
		r.settle()
		st := r.state(root.TS)
		if st.Status != statusConcluded || st.Turns != 1 || len(r.model.calls(elen, templates.PromptConclude)) != 1 {
			t.Errorf("status %q, turns %d, conclude turns %d", st.Status, st.Turns, len(r.model.calls(elen, templates.PromptConclude)))
		}
	})
}

func TestGuardConclusionIsDueAtOnce(t *testing.T) {
	st := &convState{Status: statusOpen, Turns: 3, LastActivity: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	now := st.LastActivity.Add(time.Minute)
	if got := st.Deadline(now, 10*time.Minute, 3, true); !got.Equal(now) {
		t.Errorf("deadline at the turn cap = %v, want now (%v)", got, now)
	}
	if got := st.Deadline(now, 10*time.Minute, 4, true); !got.Equal(st.LastActivity.Add(10 * time.Minute)) {
		t.Errorf("deadline under the cap = %v, want the inactivity deadline", got)
	}
}

// In a reopened thread, a facilitator reply that is only :end: runs the
// conclusion, and a conclusion that is only :end: closes the thread again
// silently: ✅ back, no post. Once an expert answered the follow-up, a
// reply of only a signature and :end: asks for the conclusion and posts
// nothing before it. Outside a reopened thread, :end: alone concludes as
// always.
func TestAcknowledgementClosesSilently(t *testing.T) {
	r := newRig(t)
	r.model.on(elen, templates.PromptDefault, ":end:", " :end: ", cora+" and claim C2?", "🧭 :end:")
	r.model.on(cora, templates.PromptContextNotFound, threading("C2", ""))
	r.model.on(cora, templates.PromptContextFound, "C2 is covered.")
	r.model.on(elen, templates.PromptConclude, "Summary.", " :end: ", "Follow-up answer.")
	root := r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()
	if st := r.state(root.TS); st.Status != statusConcluded || len(r.model.calls(elen, templates.PromptConclude)) != 1 {
		t.Fatalf("a first :end: alone did not conclude: status %q", st.Status)
	}

	r.send(root.TS, "U1", "Alice", "thanks!")
	r.settle()
	st := r.state(root.TS)
	if st.Status != statusConcluded || st.Reopened || !r.chat.reacted(root.TS, "white_check_mark") {
		t.Errorf("after thanks: status %q, reopened %v, ✅ %v", st.Status, st.Reopened, r.chat.reacted(root.TS, "white_check_mark"))
	}
	if n := len(r.model.calls(elen, templates.PromptConclude)); n != 2 {
		t.Errorf("%d conclude turns after thanks, want 2", n)
	}
	if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: Summary."}) {
		t.Errorf("posts after thanks %q", got)
	}

	r.send(root.TS, "U1", "Alice", "And claim C2?")
	r.settle()
	if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: Summary.", "Elen: " + cora + " and claim C2?", "Cora: C2 is covered.", "Elen: Follow-up answer."}) {
		t.Errorf("posts after the follow-up %q, want the call, the answer and the new conclusion alone", got)
	}
	if st := r.state(root.TS); st.Status != statusConcluded || !r.chat.reacted(root.TS, "white_check_mark") {
		t.Errorf("after the follow-up: status %q", st.Status)
	}
}
