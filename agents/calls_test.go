package agents_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// longLock keeps the conversation lock through turns that move the fake
// clock by minutes.
func longLock(r *rig) { r.opts.LockTTL = 24 * time.Hour }

func TestNeverTriggeredByOwnMessage(t *testing.T) {
	r := newRig(t)
	r.model.on(elen, templates.PromptDefault, "I am "+elen+"; "+cora+" please look.", "Thanks.")
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.model.on(cora, templates.PromptContextFound, "Here is "+cora+" with the answer.")
	r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()
	if n := len(r.model.calls(cora, "")); n != 2 {
		t.Errorf("cora's model calls = %d, want 2 (one turn: threading and context-found)", n)
	}
	if n := len(r.model.calls(elen, templates.PromptDefault)); n != 2 {
		t.Errorf("facilitator turns = %d, want 2 (start, then after cora)", n)
	}
}

func TestUnknownNameNotices(t *testing.T) {
	tests := []struct {
		name       string
		channel    []string
		user, bot  string
		text       string
		wantNotice []string // "user text"
	}{
		{name: "person", user: "U1", text: "ask zed.acme.137.protocol6022.eth",
			wantNotice: []string{"U1 zed.acme.137.protocol6022.eth is not an agent of this channel, so it was not called."}},
		{name: "human agent", user: "UT", text: "ask @bob.eth",
			wantNotice: []string{"UT bob.eth is not an agent of this channel, so it was not called."}},
		{name: "another app's bot", bot: "B1", text: "ask zed.acme.137.protocol6022.eth"},
		{name: "not an attempted shape", user: "U1", text: "ask bob.eth or zed.acme.x.protocol6022.eth"},
		{name: "registered but unresolvable", user: "U1", channel: []string{elen, cora, ghost}, text: "ask " + ghost,
			wantNotice: []string{"U1 " + ghost + " is an agent of this channel but could not be resolved right now, so it was not called."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, func(r *rig) {
				if tt.channel != nil {
					r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: tt.channel}}
				}
			})
			r.pair("UT", tina)
			root := r.send("", "U9", "Zoe", "hello")
			r.settle()
			for range 2 { // once per name per conversation
				ev := agents.Event{ID: "Ev" + r.nextTS(), Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS,
					UserID: tt.user, BotID: tt.bot, UserName: "X", Text: tt.text, Raw: tt.text}
				if err := handle(context.Background(), r.e, ev); err != nil {
					t.Fatal(err)
				}
				r.settle()
			}
			var got []string
			for _, e := range r.chat.ephemeral {
				got = append(got, strings.TrimPrefix(e, chanA+" "))
			}
			if !slices.Equal(got, tt.wantNotice) {
				t.Errorf("notices %q, want %q", got, tt.wantNotice)
			}
		})
	}
}

func TestCallTimeouts(t *testing.T) {
	t.Run("a turn waiting to start past call_timeout", func(t *testing.T) {
		r := newRig(t, longLock)
		r.model.hook = func(req llm.Request) {
			if req.Agent == cora && req.Prompt == templates.PromptContextFound {
				r.clock.Advance(4 * time.Minute) // cora runs long; paul waits
			}
		}
		r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
		r.model.on(cora, templates.PromptContextFound, "Claim C1 is open.")
		r.send("", "U1", "Alice", cora+" and "+paul+": is claim C1 covered?")
		r.settle()
		if n := len(r.model.calls(paul, "")); n != 0 {
			t.Errorf("paul ran %d times after waiting past call_timeout", n)
		}
		fac := r.model.calls(elen, templates.PromptDefault)
		if len(fac) != 1 {
			t.Fatalf("facilitator turns = %d, want 1", len(fac))
		}
		if indexOf(fac[0], "("+paul+" did not answer: timeout)") < 0 {
			t.Errorf("no timeout note for paul:\n%s", strings.Join(contents(fac[0]), "\n"))
		}
		// cora's turn ran past call_timeout: its reply still counts.
		if indexOf(fac[0], "Cora ("+cora+"): Claim C1 is open.") < 0 || indexOf(fac[0], cora+" did not answer") >= 0 {
			t.Errorf("cora's late reply is not in the facilitator's history:\n%s", strings.Join(contents(fac[0]), "\n"))
		}
		for _, p := range r.chat.texts() {
			if strings.Contains(p, "did not answer") {
				t.Errorf("a note was posted: %q", p)
			}
		}
	})
	t.Run("a human agent answering after the timeout", func(t *testing.T) {
		r := newRig(t, func(r *rig) {
			r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{elen, tina}}}
		})
		r.pair("UT", tina)
		r.model.on(elen, templates.PromptDefault, tina+" can you confirm?")
		root := r.send("", "U1", "Alice", "Is the claim approved?")
		r.settle()
		r.clock.Advance(3 * time.Minute)
		r.settle()
		r.send(root.TS, "UT", "Tina", "Sorry, late: confirmed.")
		r.settle()
		fac := r.model.calls(elen, templates.PromptDefault)
		if len(fac) != 3 {
			t.Fatalf("facilitator turns = %d, want 3 (start, timeout, late answer)", len(fac))
		}
		if indexOf(fac[2], "Tina ("+tina+"): Sorry, late: confirmed.") < 0 {
			t.Errorf("the late answer is not in the facilitator's history")
		}
	})
}

func TestWorkingReaction(t *testing.T) {
	const hourglass = "hourglass_flowing_sand"
	t.Run("held by the root until the facilitator starts", func(t *testing.T) {
		r := newRig(t)
		var root agents.Event
		seen := map[string]bool{}
		r.model.hook = func(req llm.Request) {
			seen[req.Agent+"|"+req.Prompt] = r.reacted(root.TS, hourglass)
		}
		r.model.on(cora, templates.PromptContextNotFound, threading("", "Which claim?"))
		root = r.send("", "U1", "Alice", cora+" is my claim covered?")
		r.settle()
		if !seen[cora+"|"+templates.PromptContextNotFound] || !seen[elen+"|"+templates.PromptDefault] {
			t.Errorf("the root did not carry the working reaction during every turn it triggered: %v", seen)
		}
		if r.chat.anyReaction(hourglass) {
			t.Error("a working reaction was left behind")
		}
	})
	t.Run("a second message naming a waiting agent", func(t *testing.T) {
		r := newRig(t, func(r *rig) { r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{cora, paul}}} })
		var third agents.Event
		during := false
		r.model.hook = func(req llm.Request) {
			if req.Agent == cora {
				during = r.reacted(third.TS, hourglass)
			}
		}
		root := r.send("", "U1", "Alice", paul+" first")
		r.send(root.TS, "U1", "Alice", cora+" one")
		third = r.send(root.TS, "U1", "Alice", cora+" two")
		r.settle()
		if n := len(r.model.calls(cora, "")); n != 1 {
			t.Fatalf("cora turns = %d, want 1", n)
		}
		if !during {
			t.Error("a message naming cora did not carry the working reaction during cora's turn")
		}
		if r.chat.anyReaction(hourglass) {
			t.Error("a working reaction was left behind")
		}
	})
	t.Run("a person's :end: while the conclusion runs", func(t *testing.T) {
		r := newRig(t)
		var end agents.Event
		during := false
		r.model.hook = func(req llm.Request) {
			if req.Prompt == templates.PromptConclude {
				during = r.reacted(end.TS, hourglass)
			}
		}
		root := r.send("", "U1", "Alice", "hello")
		r.settle()
		end = r.send(root.TS, "U1", "Alice", "thanks :end:")
		r.settle()
		if !during || r.chat.anyReaction(hourglass) {
			t.Errorf("reaction during the conclusion %v; left behind %v", during, r.chat.anyReaction(hourglass))
		}
	})
}

func TestQueueOrder(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{cora, paul, twin}}}
	})
	root := r.send("", "U1", "Alice", paul+" and "+cora+", please")
	r.send(root.TS, "U1", "Alice", twin+" and "+paul+" too")
	r.settle()
	var got []string
	for _, c := range r.model.calls("", "") {
		if len(got) == 0 || got[len(got)-1] != c.Agent {
			got = append(got, c.Agent)
		}
	}
	if want := []string{paul, cora, twin}; !slices.Equal(got, want) {
		t.Errorf("turn order %q, want %q", got, want)
	}
}

func TestMessageKinds(t *testing.T) {
	tests := []struct {
		subtype, bot string
		wantWake     bool
	}{
		{subtype: "", wantWake: true},
		{subtype: "thread_broadcast", wantWake: true},
		{subtype: "file_share", wantWake: true},
		{subtype: "me_message", wantWake: true},
		{subtype: "bot_message", bot: "B1"},
		{subtype: "", bot: "B1"},
	}
	for _, tt := range tests {
		t.Run(tt.subtype+"/"+tt.bot, func(t *testing.T) {
			r := newRig(t)
			root := r.send("", "U1", "Alice", "hello")
			r.settle()
			ev := agents.Event{ID: "EvK", Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS, UserID: "U2", BotID: tt.bot,
				Subtype: tt.subtype, UserName: "Bob", Text: "more [file: a.pdf]", Raw: "more"}
			if err := handle(context.Background(), r.e, ev); err != nil {
				t.Fatal(err)
			}
			r.settle()
			if got := len(r.model.calls(elen, templates.PromptDefault)) == 2; got != tt.wantWake {
				t.Errorf("woke the facilitator: %v, want %v", got, tt.wantWake)
			}
		})
	}
}

func TestAdoptionLoadsTheLastReplies(t *testing.T) {
	r := newRig(t)
	old := "1600000000.000100"
	bot := agents.Event{ID: "EvB", Team: team, Channel: chanA, TS: old, BotID: "B1", UserName: "CI", Text: "deploy failed; " + cora + " is on call"}
	if err := handle(context.Background(), r.e, bot); err != nil {
		t.Fatal(err)
	}
	// Written before the adopting reply: content, so its :end: ends nothing.
	r.send(old, "U1", "Alice", "what broke? :end:")
	r.send(old, "U1", "Alice", cora+" can you look?")
	r.settle()
	if r.chat.historyLimit != 0 {
		t.Errorf("history loaded although the root is stored")
	}
	fac := r.model.calls(elen, templates.PromptDefault)
	if n := len(r.model.calls(cora, "")); n != 1 || len(fac) != 1 {
		t.Fatalf("cora turns %d, facilitator turns %d; want 1 and 1", n, len(fac))
	}
	r2 := newRig(t)
	r2.send("1600000000.000200", "U1", "Alice", cora+" can you look?")
	r2.settle()
	if r2.chat.historyLimit != 50 {
		t.Errorf("adoption loaded %d replies, want the last 50", r2.chat.historyLimit)
	}
}

func TestResolvePendingRechecksLock(t *testing.T) {
	r := newRig(t)
	other := r.engine(fakePrompts{})
	r.chat.failPost = 1 // the first post fails: the reply stays pending
	root := r.send("", "U1", "Alice", "hello")
	r.chat.afterFind = func() {
		// The holder settling the pending reply loses its lock while it
		// looks; another replica takes over and settles the reply.
		r.clock.Advance(time.Minute)
		other.Process(context.Background(), agents.ConversationID(team, chanA, root.TS), "")
	}
	r.settle()
	r.clock.Advance(time.Second) // past the first backoff (at most 1 s)
	r.settle()
	if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: elen ok"}) {
		t.Errorf("posts %q, want exactly one", got)
	}
	var stored []memory.Message
	for _, m := range r.messages(root.TS) {
		if m.Kind == agents.KindAgent {
			stored = append(stored, m)
		}
	}
	if len(stored) != 1 {
		t.Errorf("stored replies %d, want 1", len(stored))
	}
}
