package agents_test

import (
	"context"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/templates"
)

func TestSettled(t *testing.T) {
	settled := func(r *rig, thread string) bool {
		t.Helper()
		ok, err := r.e.Settled(context.Background(), team, chanA, thread)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	t.Run("a thread never recorded", func(t *testing.T) {
		r := newRig(t)
		if !settled(r, "1700000000.000100") {
			t.Error("an unknown thread is not settled")
		}
	})
	t.Run("a message not routed yet, then answered", func(t *testing.T) {
		r := newRig(t)
		r.model.on(elen, templates.PromptDefault, "Welcome.")
		root := r.send("", "U1", "Alice", "Is claim C1 covered?")
		if settled(r, root.TS) {
			t.Error("settled before the message was routed")
		}
		r.settle()
		if !settled(r, root.TS) {
			t.Error("not settled once the facilitator answered (the inactivity deadline is not work)")
		}
		if st := r.state(root.TS); st.Status != agents.StatusOpen {
			t.Errorf("status %q, want the conversation still open", st.Status)
		}
	})
	t.Run("during every turn", func(t *testing.T) {
		r := newRig(t)
		r.model.on(elen, templates.PromptDefault, "Asking "+cora+".", "Done.")
		r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
		r.model.on(cora, templates.PromptContextFound, "Covered.")
		var root agents.Event
		var during []string
		r.model.hook = func(req llm.Request) {
			if settled(r, root.TS) {
				during = append(during, req.Agent+"/"+req.Prompt)
			}
		}
		root = r.send("", "U1", "Alice", "Is claim C1 covered?")
		r.settle()
		if len(during) > 0 {
			t.Errorf("settled while these model calls ran: %v", during)
		}
		if n := len(r.model.calls(cora, "")); n != 2 {
			t.Errorf("cora's model calls = %d, want 2: the expert's turn ran", n)
		}
		if !settled(r, root.TS) {
			t.Error("not settled after the facilitator's last reply")
		}
	})
	t.Run("a human agent's call pending", func(t *testing.T) {
		r := newRig(t, func(r *rig) {
			r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{elen, tina}}}
		})
		r.pair("UT", tina)
		r.model.on(elen, templates.PromptDefault, tina+" can you confirm?")
		root := r.send("", "U1", "Alice", "Is claim C1 covered?")
		r.settle()
		if len(r.state(root.TS).Calls) != 1 {
			t.Fatalf("calls = %+v, want the human agent called", r.state(root.TS).Calls)
		}
		if settled(r, root.TS) {
			t.Error("settled while a human agent's call is pending")
		}
	})
}

// An engine that shares its store with another conclave (conclave chat)
// sweeps only the conversations it owns.
func TestSweepOnlyWhatItOwns(t *testing.T) {
	for _, owns := range []bool{false, true} {
		r := newRig(t, func(r *rig) { r.opts.Owns = func(string) bool { return owns } })
		root := r.send("", "U1", "Alice", "hello")
		work := r.e.Sweep(context.Background(), 10)
		want := 0
		if owns {
			want = 1
		}
		if len(work) != want {
			t.Errorf("owns=%v: swept %d conversations, want %d", owns, len(work), want)
		}
		if owns && work[0] != agents.ConversationID(team, chanA, root.TS) {
			t.Error("swept another conversation")
		}
	}
}

// SettledButCalls waits for the turns, not for a human agent's answer.
func TestSettledButCalls(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{elen, tina}}}
	})
	r.pair("UT", tina)
	r.model.on(elen, templates.PromptDefault, tina+" can you confirm?")
	var during []bool
	var root agents.Event
	r.model.hook = func(llm.Request) {
		ok, err := r.e.SettledButCalls(context.Background(), team, chanA, root.TS)
		if err != nil {
			t.Error(err)
		}
		during = append(during, ok)
	}
	root = r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()
	if len(during) != 1 || during[0] {
		t.Errorf("settled during the facilitator's turn: %v", during)
	}
	if len(r.state(root.TS).Calls) != 1 {
		t.Fatalf("calls = %+v, want the human agent called", r.state(root.TS).Calls)
	}
	ok, err := r.e.SettledButCalls(context.Background(), team, chanA, root.TS)
	if err != nil || !ok {
		t.Errorf("SettledButCalls = %v, %v with only a human agent's call pending; want true", ok, err)
	}
	if ok, _ := r.e.Settled(context.Background(), team, chanA, root.TS); ok {
		t.Error("Settled answers true with a human agent's call pending")
	}
}
