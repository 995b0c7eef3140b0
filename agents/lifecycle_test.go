package agents_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// indexOf returns the index of the first request message containing s.
func indexOf(req llm.Request, s string) int {
	return slices.IndexFunc(req.Messages, func(m llm.Message) bool { return strings.Contains(m.Content, s) })
}

func TestExpertRecallsSessionAcrossConversations(t *testing.T) {
	r := newRig(t)
	r.model.on(cora, templates.PromptContextNotFound, threading("C45653", ""), threading("c45653", ""))
	r.model.on(cora, templates.PromptContextFound, "Noted: windshield damage on C45653.", "It was the windshield.")

	r.send("", "U1", "Alice", cora+" please log claim C45653: windshield damage.")
	r.settle()
	second := r.send("", "U2", "Bob", cora+" what happened on claim c45653?")
	r.settle()

	found := r.model.calls(cora, templates.PromptContextFound)
	if len(found) != 2 {
		t.Fatalf("context-found calls = %d, want 2", len(found))
	}
	req := found[1]
	if !strings.Contains(lastUser(req), "session=C45653|") {
		t.Errorf("second conversation not bound to the existing session: %q", lastUser(req))
	}
	old := indexOf(req, "please log claim C45653")
	oldReply := indexOf(req, "Noted: windshield damage")
	current := indexOf(req, "what happened on claim c45653?")
	if old < 0 || oldReply < 0 || current < 0 || !(old < oldReply && oldReply < current) {
		t.Fatalf("history order: first conversation %d, its reply %d, this thread %d:\n%s", old, oldReply, current, strings.Join(contents(req), "\n"))
	}
	if req.Messages[oldReply].Role != llm.RoleAssistant {
		t.Errorf("own earlier reply sent as %s", req.Messages[oldReply].Role)
	}
	n := 0
	for _, m := range req.Messages {
		if strings.Contains(m.Content, "what happened on claim c45653?") && !strings.HasPrefix(m.Content, templates.PromptContextFound) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("this thread's message appears %d times in the history, want 1", n)
	}
	if got := r.state(second.TS).Bindings[cora]; got != "C45653" {
		t.Errorf("binding = %q", got)
	}
}

func TestCloneAnswersWithHumanHistory(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{elen, twin}}}
	})
	ctx := context.Background()
	r.pair("UT", tina)
	r.send("", "UT", "Tina", "For the record: my favourite colour is teal.")
	r.settle()
	r.send("", "U1", "Alice", twin+" what is your favourite colour?")
	r.settle()

	calls := r.model.calls(twin, templates.PromptDefault)
	if len(calls) != 1 {
		t.Fatalf("clone turns = %d, want 1", len(calls))
	}
	// Both conversations have Tina's group, with the channel's facilitator:
	// she alone wrote the first before it was frozen, and the second names
	// her twin.
	group := agents.GroupSessionID([]string{elen, tina})
	req := calls[0]
	if !strings.Contains(lastUser(req), "session="+group+"|") {
		t.Errorf("clone session: %q, want %s", lastUser(req), group)
	}
	remembered := indexOf(req, "Tina ("+tina+"): For the record: my favourite colour is teal.")
	question := indexOf(req, "what is your favourite colour?")
	if remembered < 0 || question < 0 || remembered > question {
		t.Fatalf("the human's history is not before the question:\n%s", strings.Join(contents(req), "\n"))
	}
	entries, err := r.store.ReadSession(ctx, agents.CloneNamespace(&r.opts, tina, chanA), group, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || entries[len(entries)-1].Role != llm.RoleAssistant || entries[len(entries)-1].Content != "twin ok" {
		t.Errorf("the twin's reply is not appended to its human's session: %+v", entries)
	}
}

func TestRestart(t *testing.T) {
	tests := []struct {
		name        string
		user, bot   string
		wantRestart bool
	}{
		{name: "person", user: "U2", wantRestart: true},
		{name: "human agent", user: "UT", wantRestart: true},
		{name: "another app's bot", bot: "B9"},
		{name: "an agent", user: "agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.pair("UT", tina)
			r.model.on(elen, templates.PromptDefault, ":end:")
			root := r.send("", "U1", "Alice", "Is claim C1 covered?")
			r.settle()
			if st := r.state(root.TS); st.Status != agents.StatusConcluded || st.Turns != 1 {
				t.Fatalf("before: status %q, turns %d", st.Status, st.Turns)
			}
			ev := agents.Event{ID: "EvX", Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS,
				UserID: tt.user, BotID: tt.bot, UserName: "X", Text: "one more thing", Raw: "one more thing"}
			if tt.user == "agent" { // a late reply another replica posted
				conv := memory.Conversation{ID: agents.ConversationID(team, chanA, root.TS), Team: team, Channel: chanA, ThreadTS: root.TS}
				late := memory.Message{TS: ev.TS, Agent: cora, Kind: agents.KindAgent, Text: "one more thing", At: r.clock.Now()}
				if _, err := r.store.RecordMessage(context.Background(), conv, late, ""); err != nil {
					t.Fatal(err)
				}
			} else if err := handle(context.Background(), r.e, ev); err != nil {
				t.Fatal(err)
			}
			r.settle()
			st := r.state(root.TS)
			defaults := len(r.model.calls(elen, templates.PromptDefault))
			if tt.wantRestart {
				if st.Status != agents.StatusOpen || defaults != 2 || st.Turns != 1 || r.chat.reacted(root.TS, "white_check_mark") {
					t.Errorf("no restart: status %q, default turns %d, turns %d", st.Status, defaults, st.Turns)
				}
				if !strings.Contains(lastUser(r.model.calls(elen, templates.PromptDefault)[1]), "count=3|") {
					t.Errorf("restart turn does not see the whole thread: %q", lastUser(r.model.calls(elen, templates.PromptDefault)[1]))
				}
			} else if st.Status != agents.StatusConcluded || defaults != 1 || !r.chat.reacted(root.TS, "white_check_mark") {
				t.Errorf("restarted by %s: status %q, default turns %d", tt.name, st.Status, defaults)
			}
		})
	}
}

func TestUnregisteredMention(t *testing.T) {
	r := newRig(t)
	r.model.on(elen, templates.PromptDefault, "I will ask @carl.eth and nobody else.", "ok")
	root := r.send("", "U1", "Alice", "Ask zed.acme.137.protocol6022.eth and @bob.eth, or "+solo+".")
	r.settle()
	r.send(root.TS, "U1", "Alice", "Did zed.acme.137.6022.eth answer?")
	r.settle()
	want := []string{
		"C1 U1 zed.acme.137.protocol6022.eth is not an agent of this channel, so it was not called.",
		"C1 U1 bob.eth is not an agent of this channel, so it was not called.",
		"C1 U1 " + solo + " is not an agent of this channel, so it was not called.",
	}
	if !slices.Equal(r.chat.ephemeral, want) {
		t.Errorf("notices:\n%s\nwant:\n%s", strings.Join(r.chat.ephemeral, "\n"), strings.Join(want, "\n"))
	}
	if n := len(r.model.calls(solo, "")); n != 0 {
		t.Errorf("an agent not registered in the channel took %d turns", n)
	}
}

func TestMutualMentionsStoppedByGuards(t *testing.T) {
	tests := []struct {
		name          string
		maxTurns      int
		wantConcluded bool
	}{
		{name: "per-agent cap", maxTurns: 40},
		{name: "max turns", maxTurns: 5, wantConcluded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, func(r *rig) {
				r.opts.MaxTurnsPerAgent = 3
				r.opts.MaxTurns = tt.maxTurns
			})
			r.model.on(elen, templates.PromptDefault, "Over to you, "+cora+".")
			r.model.fallback = func(req llm.Request) (llm.Response, error) {
				switch {
				case req.Prompt == templates.PromptContextNotFound:
					return llm.Response{Content: threading("X1", "")}, nil
				case req.Agent == cora:
					return llm.Response{Content: "Ask " + paul + "."}, nil
				case req.Agent == paul:
					return llm.Response{Content: "Ask " + cora + "."}, nil
				}
				return llm.Response{Content: "Let us stop here."}, nil
			}
			root := r.send("", "U1", "Alice", "Who knows?")
			r.settle()
			st := r.state(root.TS)
			coraTurns, paulTurns := len(r.model.calls(cora, templates.PromptContextFound)), len(r.model.calls(paul, templates.PromptContextFound))
			if coraTurns > 3 || paulTurns > 3 {
				t.Errorf("turns past the per-agent cap: cora %d, paul %d", coraTurns, paulTurns)
			}
			if st.Turns > tt.maxTurns {
				t.Errorf("%d turns, max %d", st.Turns, tt.maxTurns)
			}
			if (st.Status == agents.StatusConcluded) != tt.wantConcluded {
				t.Errorf("status %q", st.Status)
			}
			if tt.wantConcluded {
				if n := len(r.model.calls(elen, templates.PromptConclude)); n != 1 {
					t.Errorf("conclude turns = %d", n)
				}
				return
			}
			var capped []string
			for _, p := range r.chat.texts() {
				if strings.Contains(p, "limit of 3 turns") {
					capped = append(capped, p)
				}
			}
			if len(capped) != 1 || !strings.HasPrefix(capped[0], "Cora: ⚠️ Cora could not answer: it reached its limit of 3 turns") {
				t.Errorf("cap notices: %q", capped)
			}
			if len(st.Queue) != 0 {
				t.Errorf("queue not empty: %+v", st.Queue)
			}
			last := r.model.calls(elen, templates.PromptDefault)
			if indexOf(last[len(last)-1], "("+cora+" could not answer: it reached its limit of 3 turns in this conversation)") < 0 {
				t.Error("the facilitator was not told the capped call failed")
			}
		})
	}
}

func TestThreadingRetryAndPolicies(t *testing.T) {
	tests := []struct {
		name      string
		policy    agents.AgentSettings
		replies   []any
		wantPosts []string
		wantBound string
		wantMeta  string
		wantRetry bool
	}{
		{
			name:      "retry succeeds",
			replies:   []any{"I think it is claim C1.", threading("C1", "")},
			wantPosts: []string{"Cora: cora ok"},
			wantBound: "C1",
			wantMeta:  agents.ThreadingOK,
			wantRetry: true,
		},
		{
			name:      "both fail",
			replies:   []any{"no idea", "still no idea"},
			wantPosts: []string{"Cora: still no idea"},
			wantMeta:  agents.ThreadingFailed,
			wantRetry: true,
		},
		{
			name:    "unbound and silent",
			replies: []any{threading("", "")},
		},
		{
			name:      "unbound asks",
			replies:   []any{threading("", "🔍 Which claim?")},
			wantPosts: []string{"Cora: 🔍 Which claim?"},
			wantMeta:  agents.ThreadingOK,
		},
		{
			name:      "repaired",
			replies:   []any{`{"session": "C7", "message": "On it",}`},
			wantPosts: []string{"Cora: On it", "Cora: cora ok"},
			wantBound: "C7",
			wantMeta:  agents.ThreadingRepaired,
		},
		{
			name:      "policy never",
			policy:    agents.AgentSettings{SessionPolicy: agents.SessionNever},
			replies:   []any{threading("C9", "Which claim do you mean?")},
			wantPosts: []string{"Cora: Which claim do you mean?"},
			wantMeta:  agents.ThreadingOK,
		},
		{
			name:      "pattern refuses",
			policy:    agents.AgentSettings{SessionPolicy: agents.SessionPattern, SessionPattern: `C\d+`},
			replies:   []any{threading("X9", "")},
			wantPosts: nil,
		},
		{
			name:      "pattern accepts",
			policy:    agents.AgentSettings{SessionPolicy: agents.SessionPattern, SessionPattern: `C\d+`},
			replies:   []any{threading("C9", "")},
			wantPosts: []string{"Cora: cora ok"},
			wantBound: "C9",
			wantMeta:  agents.ThreadingOK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, func(r *rig) {
				r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{cora}}}
				r.opts.Agents = map[string]agents.AgentSettings{cora: tt.policy}
			})
			r.model.on(cora, templates.PromptContextNotFound, tt.replies...)
			root := r.send("", "U1", "Alice", cora+" is my claim covered?")
			r.settle()
			if got := r.chat.texts(); !slices.Equal(got, tt.wantPosts) {
				t.Errorf("posts %q, want %q", got, tt.wantPosts)
			}
			if got := r.state(root.TS).Bindings[cora]; got != tt.wantBound {
				t.Errorf("bound to %q, want %q", got, tt.wantBound)
			}
			var meta string
			for _, m := range r.messages(root.TS) {
				if m.Kind == agents.KindAgent && m.Meta["threading"] != "" {
					meta = m.Meta["threading"]
				}
			}
			if meta != tt.wantMeta {
				t.Errorf("stored threading outcome %q, want %q", meta, tt.wantMeta)
			}
			calls := r.model.calls(cora, templates.PromptContextNotFound)
			if tt.wantRetry {
				if len(calls) != 2 {
					t.Fatalf("context-not-found calls = %d, want 2", len(calls))
				}
				first, retry := calls[0].Messages, calls[1].Messages
				n := len(first)
				if len(retry) != n+2 || !slices.Equal(retry[:n], first) ||
					retry[n] != (llm.Message{Role: llm.RoleAssistant, Content: tt.replies[0].(string)}) ||
					retry[n+1] != (llm.Message{Role: llm.RoleUser, Content: agents.ThreadingReminder}) {
					t.Errorf("retry request:\n%s", strings.Join(contents(calls[1]), "\n"))
				}
			} else if len(calls) != 1 {
				t.Errorf("context-not-found calls = %d, want 1", len(calls))
			}
		})
	}
}

func TestUnboundExpertThreadsAgain(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{cora}}}
	})
	r.model.on(cora, templates.PromptContextNotFound, threading("", "🔍 Which claim?"), threading("C3", ""))
	root := r.send("", "U1", "Alice", cora+" is my claim covered?")
	r.settle()
	r.send(root.TS, "U1", "Alice", cora+" claim C3")
	r.settle()
	if got := len(r.model.calls(cora, templates.PromptContextNotFound)); got != 2 {
		t.Errorf("context-not-found calls = %d, want 2", got)
	}
	if got := r.state(root.TS).Bindings[cora]; got != "C3" {
		t.Errorf("bound to %q", got)
	}
}

func TestDuplicateEvents(t *testing.T) {
	r := newRig(t)
	ev := r.send("", "U1", "Alice", "Is claim C1 covered?")
	ctx := context.Background()
	if err := handle(ctx, r.e, ev); err != nil { // a retry of the same event
		t.Fatal(err)
	}
	r.settle()
	again := ev
	again.ID = "EvOther" // the same message under another event id
	if err := handle(ctx, r.e, again); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if got := r.chat.texts(); len(got) != 1 {
		t.Errorf("posts %q, want one", got)
	}
	if n := len(r.model.calls(elen, "")); n != 1 {
		t.Errorf("model calls = %d, want 1", n)
	}
}

func TestModelAndTemplateFailures(t *testing.T) {
	t.Run("expert model error", func(t *testing.T) {
		r := newRig(t)
		r.model.on(cora, templates.PromptContextNotFound, &llm.Error{Status: 503, Reason: llm.ReasonServer, Attempts: 3})
		root := r.send("", "U1", "Alice", cora+" status of C1?")
		r.settle()
		posts := r.chat.texts()
		if len(posts) != 2 || !strings.HasPrefix(posts[0], "Cora: ⚠️ Cora could not answer: the model endpoint returned HTTP 503 (ref ") ||
			posts[1] != "Elen: elen ok" {
			t.Fatalf("posts %q", posts)
		}
		for _, m := range r.messages(root.TS) {
			if strings.Contains(m.Text, "⚠️") {
				t.Error("the notice was stored as a message")
			}
		}
		if indexOf(r.model.calls(elen, templates.PromptDefault)[0], "("+cora+" could not answer: the model endpoint returned HTTP 503)") < 0 {
			t.Error("no failure note in the facilitator's history")
		}
		if st := r.state(root.TS); st.Turns != 2 {
			t.Errorf("turns %d, want 2: a failed turn counts", st.Turns)
		}
		for _, p := range posts {
			if strings.Contains(p, "did not answer") || strings.Contains(p, "("+cora+" could not answer") {
				t.Error("the note was posted")
			}
		}
	})
	t.Run("empty reply after the client's retries", func(t *testing.T) {
		r := newRig(t)
		r.model.on(elen, templates.PromptDefault, fmt.Errorf("llm: elen default: %w", &llm.Error{Reason: llm.ReasonEmpty, Attempts: 4}))
		root := r.send("", "U1", "Alice", "hello")
		r.settle()
		r.send(root.TS, "U1", "Alice", "anyone?")
		r.settle()
		posts := r.chat.texts()
		if len(posts) != 2 || !strings.HasPrefix(posts[0], "Elen: ⚠️ Elen could not answer: the model endpoint returned an empty reply") ||
			posts[1] != "Elen: elen ok" {
			t.Errorf("posts %q: want a notice, then the conversation going on", posts)
		}
	})
	t.Run("notify log", func(t *testing.T) {
		r := newRig(t, func(r *rig) { r.opts.Notify = agents.NotifyLog })
		r.model.on(elen, templates.PromptDefault, errors.New("boom"))
		r.send("", "U1", "Alice", "hello")
		r.settle()
		if got := r.chat.texts(); len(got) != 0 {
			t.Errorf("posts %q, want none", got)
		}
	})
	t.Run("template error then recovery", func(t *testing.T) {
		r := newRig(t)
		prompts := fakePrompts{fail: map[string]error{elen: &templates.Error{File: "facilitator/default.tmpl", Line: 3, Message: "can't evaluate field Owner for a person"}}}
		r.e = r.engine(prompts)
		root := r.send("", "U1", "Alice", "hello")
		r.settle()
		delete(prompts.fail, elen)
		r.send(root.TS, "U1", "Alice", "anyone?")
		r.settle()
		posts := r.chat.texts()
		if len(posts) != 2 || !strings.Contains(posts[0], "could not answer: template error in facilitator/default.tmpl:3 (ref ") || posts[1] != "Elen: elen ok" {
			t.Errorf("posts %q", posts)
		}
	})
}

func TestHumanAgentCall(t *testing.T) {
	tests := []struct {
		name     string
		answer   bool
		wantNote bool
	}{
		{name: "answered", answer: true},
		{name: "timed out", wantNote: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, func(r *rig) {
				r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{elen, tina}}}
				r.opts.CallTimeout = 3 * time.Minute
			})
			r.pair("UT", tina)
			r.model.on(elen, templates.PromptDefault, tina+" can you confirm?")
			root := r.send("", "U1", "Alice", "Is the claim approved?")
			r.settle()
			if len(r.chat.posts) != 1 || !slices.Equal(r.chat.posts[0].Mention, []string{"UT"}) {
				t.Fatalf("the human agent's user is not mentioned: %+v", r.chat.posts)
			}
			r.send(root.TS, "U1", "Alice", "waiting…")
			r.settle()
			if n := len(r.model.calls(elen, templates.PromptDefault)); n != 1 {
				t.Fatalf("the facilitator ran %d times while the call was pending", n)
			}
			if tt.answer {
				r.send(root.TS, "UT", "Tina", "Confirmed.")
			} else {
				r.clock.Advance(3 * time.Minute)
			}
			r.settle()
			calls := r.model.calls(elen, templates.PromptDefault)
			if len(calls) != 2 {
				t.Fatalf("facilitator turns = %d, want 2", len(calls))
			}
			if got := indexOf(calls[1], "("+tina+" did not answer: timeout)") >= 0; got != tt.wantNote {
				t.Errorf("timeout note in history = %v, want %v", got, tt.wantNote)
			}
			if tt.answer && indexOf(calls[1], "Tina ("+tina+"): Confirmed.") < 0 {
				t.Error("the human agent's answer is not attributed to it")
			}
		})
	}
}

func TestTruncatedReply(t *testing.T) {
	r := newRig(t)
	r.model.on(elen, templates.PromptDefault, llm.Response{Content: "The answer is", FinishReason: "length"})
	r.send("", "U1", "Alice", "hello")
	r.settle()
	if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: The answer is …"}) {
		t.Errorf("posts %q", got)
	}
}

func TestTemplateData(t *testing.T) {
	r := newRig(t)
	r.pair("UT", tina)
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	r.send(root.TS, "UT", "Tina", "hi all")
	r.send(root.TS, "U2", "Bob", cora+" first question")
	r.settle()
	r.send(root.TS, "U1", "Alice", cora+" second question")
	r.settle()
	calls := r.model.calls(cora, templates.PromptContextNotFound)
	if len(calls) != 2 {
		t.Fatalf("cora turns = %d", len(calls))
	}
	want := "context-not-found|count=2|session=|initial=" + cora + " first question|latest=" + cora +
		" second question|members=Cora,Elen,Paul,Alice,Tina,Bob"
	if got := lastUser(calls[1]); got != want {
		t.Errorf("cora's prompt\n got %s\nwant %s", got, want)
	}
	fac := r.model.calls(elen, templates.PromptDefault)
	if got := lastUser(fac[0]); got != "default|count=1|session="+agents.ConversationID(team, chanA, root.TS)+"|initial=hello|latest=hello|members=Elen,Cora,Paul,Alice" {
		t.Errorf("facilitator's first prompt %s", got)
	}
}

// TestPostWaitsForItsBackoff: a post that failed is tried again only once
// its backoff is over (here Slack's Retry-After), even when the
// conversation is worked on before (a new message in the thread, a
// replica handed it): nothing else happens meanwhile, and then the post is
// made, before the new message's turn.
func TestPostWaitsForItsBackoff(t *testing.T) {
	r := newRig(t)
	var attempts int
	r.chat.beforePost = func() error {
		attempts++
		if attempts == 1 {
			return &agents.PostError{Err: errors.New("ratelimited"), RetryAfter: time.Minute}
		}
		return nil
	}
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	pending := r.state(root.TS).Outbox
	if len(pending) != 1 || pending[0].Attempts != 1 || attempts != 1 {
		t.Fatalf("after a failed post: %d attempts, outbox %+v; want the post pending after 1", attempts, pending)
	}
	due := pending[0].Next
	if wait := due.Sub(r.clock.Now()); wait != time.Minute {
		t.Fatalf("the post is due again in %v, want Slack's Retry-After (1m)", wait)
	}

	r.send(root.TS, "U1", "Alice", "still there?")
	r.e.Process(context.Background(), agents.ConversationID(team, chanA, root.TS), chanA)
	if attempts != 1 {
		t.Errorf("the post was tried %d times before its backoff was over, want once", attempts)
	}
	if n := len(r.model.calls(elen, "")); n != 1 {
		t.Errorf("%d facilitator turns while the post waits, want the first only", n)
	}

	r.clock.Advance(due.Sub(r.clock.Now()))
	r.settle()
	if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: elen ok", "Elen: elen ok"}) {
		t.Errorf("posts %q, want the pending reply, then the answer to the new message", got)
	}
	if attempts != 3 {
		t.Errorf("%d post attempts, want 3 (the failed one, its retry, the next answer)", attempts)
	}
}

func TestUncertainPost(t *testing.T) {
	tests := []struct {
		name           string
		lost, failures int
	}{
		{name: "posted but the answer was lost", lost: 1},
		{name: "post failed once", failures: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.chat.lostPost, r.chat.failPost = tt.lost, tt.failures
			root := r.send("", "U1", "Alice", "hello")
			r.settle()
			r.clock.Advance(time.Second) // past the first backoff (at most 1 s)
			r.settle()
			if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: elen ok"}) {
				t.Errorf("posts %q, want exactly one", got)
			}
			if n := len(r.model.calls(elen, "")); n != 1 {
				t.Errorf("model calls = %d, want 1", n)
			}
			var stored int
			for _, m := range r.messages(root.TS) {
				if m.Kind == agents.KindAgent && m.TurnID != "" {
					stored++
				}
			}
			if stored != 1 || len(r.state(root.TS).Outbox) > 0 {
				t.Errorf("stored replies %d, pending %+v", stored, r.state(root.TS).Outbox)
			}
		})
	}
}

// A named agent whose turn fails wakes the facilitator with the reason
// class of the failure, never its upstream message.
func TestFailureNotesGiveTheReasonClass(t *testing.T) {
	tests := []struct {
		name     string
		template error // the expert's prompts fail with it
		model    error // or its model call does
		note     string
	}{
		{name: "template error", template: &templates.Error{File: "expert/context-not-found.tmpl", Line: 2, Message: "at <.X>: boom"},
			note: "(" + cora + " could not answer: template error in expert/context-not-found.tmpl:2)"},
		{name: "model error", model: fmt.Errorf("turn: %w", &llm.Error{Profile: "p", Model: "m", Attempts: 3, Status: 503, Reason: llm.ReasonServer}),
			note: "(" + cora + " could not answer: the model endpoint returned HTTP 503)"},
		{name: "other error", model: errors.New("upstream said https://secret.example/x"),
			note: "(" + cora + " could not answer: an internal error (see conclave's log))"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			if tt.template != nil {
				r.e = r.engine(fakePrompts{fail: map[string]error{cora: tt.template}})
			} else {
				r.model.on(cora, templates.PromptContextNotFound, tt.model)
			}
			r.send("", "U1", "Alice", cora+" status of C1?")
			r.settle()
			calls := r.model.calls(elen, templates.PromptDefault)
			if len(calls) != 1 || indexOf(calls[0], tt.note) < 0 {
				t.Errorf("the facilitator's history lacks %q:\n%v", tt.note, calls)
			}
		})
	}
}
