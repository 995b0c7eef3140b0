package agents

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// A person's request is a message of a person or human agent that says
// more than :end: with a signature, and that no silent close took as an
// acknowledgement.
func TestIsPersonRequest(t *testing.T) {
	v := view{st: loadMachine(t, &convState{Acknowledged: []string{"9.0"}}, limits{}, "", "c").Read()}
	tests := []struct {
		name string
		m    memory.Message
		want bool
	}{
		{"a person's question", memory.Message{TS: "1.0", Kind: kindPerson, Text: "Is C1 covered?"}, true},
		{"a human agent's question", memory.Message{TS: "1.0", Kind: kindHuman, Agent: tina, Text: "And C2?"}, true},
		{"an expert's answer", memory.Message{TS: "1.0", Kind: kindAgent, Agent: cora, Text: "C1 is covered."}, false},
		{"another app's bot", memory.Message{TS: "1.0", Kind: kindBot, Text: "Ticket 8 opened."}, false},
		{":end: alone", memory.Message{TS: "1.0", Kind: kindPerson, Text: ":end:"}, false},
		{":end: with a signature", memory.Message{TS: "1.0", Kind: kindPerson, Text: "🙏 :end:"}, false},
		{":end: with words", memory.Message{TS: "1.0", Kind: kindPerson, Text: "Enough, thanks :end:"}, true},
		{"an acknowledgement closed silently", memory.Message{TS: "9.0", Kind: kindPerson, Text: "thanks!"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := v.isPersonRequest(tt.m); got != tt.want {
				t.Errorf("isPersonRequest(%q) = %v, want %v", tt.m.Text, got, tt.want)
			}
		})
	}
}

// After an expert answered a person's follow-up, the facilitator's
// default and conclude work from the follow-up (LatestPersonRequest),
// while LatestRequest is the expert's answer; a person's :end: and an
// acknowledgement closed silently are never the request.
func TestLatestPersonRequest(t *testing.T) {
	r := newRig(t)
	rec := recordData(r)
	r.model.on(elen, templates.PromptDefault, "🧭 :end:", ":end:", cora+" is claim C2 covered?", "🧭 :end:")
	r.model.on(elen, templates.PromptConclude, "C1 is covered.", ":end:", "C2 is covered too.")
	r.model.on(cora, templates.PromptContextNotFound, threading("C2", ""))
	r.model.on(cora, templates.PromptContextFound, "C2 is covered.")
	root := r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()
	thanks := r.send(root.TS, "U1", "Alice", "thanks!")
	r.settle()
	if st := r.state(root.TS); !slices.Contains(st.Acknowledged, thanks.TS) {
		t.Fatalf("acknowledged %v, want the thanks (%s)", st.Acknowledged, thanks.TS)
	}
	r.send(root.TS, "U1", "Alice", "And claim C2?")
	r.settle()
	r.send(root.TS, "U1", "Alice", "🙏 :end:")
	r.settle()

	if d := rec.get(t, elen, templates.PromptDefault, 1); d.LatestPersonRequest.Content != "thanks!" {
		t.Errorf("default on the thanks: person request %q", d.LatestPersonRequest.Content)
	}
	followUp := rec.get(t, elen, templates.PromptDefault, 3)
	if followUp.LatestRequest.Content != "C2 is covered." || followUp.LatestPersonRequest.Content != "And claim C2?" ||
		followUp.LatestPersonRequest.Author.Name() != "Alice" {
		t.Errorf("default after the expert: latest %q, person request %q by %q; want the answer and the follow-up",
			followUp.LatestRequest.Content, followUp.LatestPersonRequest.Content, followUp.LatestPersonRequest.Author.Name())
	}
	for i, want := range []struct{ request, reason string }{
		{"Is claim C1 covered?", templates.ConcludeEnd},
		{"thanks!", templates.ConcludeEnd},
		{"And claim C2?", templates.ConcludeEnd},
	} {
		d := rec.get(t, elen, templates.PromptConclude, i)
		if d.LatestPersonRequest.Content != want.request || d.ConcludeReason != want.reason {
			t.Errorf("conclusion %d: person request %q, reason %q; want %q, %q", i+1, d.LatestPersonRequest.Content, d.ConcludeReason, want.request, want.reason)
		}
	}
	if n := len(r.model.calls(elen, templates.PromptConclude)); n != 3 {
		t.Errorf("%d conclusions, want 3 (a person's :end: in a concluded thread reopens nothing)", n)
	}
	if d := rec.get(t, cora, templates.PromptContextFound, 0); d.ConcludeReason != "" {
		t.Errorf("ConcludeReason outside conclude = %q", d.ConcludeReason)
	}
}

// Why a conclusion runs, as templates read it.
func TestConcludeReason(t *testing.T) {
	tests := []struct {
		name    string
		options func(*rig)
		run     func(r *rig)
		want    string
	}{
		{"the facilitator's :end:", nil, func(r *rig) {
			r.model.on(elen, templates.PromptDefault, "🧭 :end:")
			r.send("", "U1", "Alice", "hello")
			r.settle()
		}, templates.ConcludeEnd},
		{"a person's :end:", nil, func(r *rig) {
			root := r.send("", "U1", "Alice", "hello")
			r.settle()
			r.send(root.TS, "U1", "Alice", ":end:")
			r.settle()
		}, templates.ConcludePerson},
		{"inactivity", nil, func(r *rig) {
			r.send("", "U1", "Alice", "hello")
			r.settle()
			r.clock.Advance(11 * time.Minute)
			r.settle()
		}, templates.ConcludeInactivity},
		{"max_turns", func(r *rig) { r.opts.MaxTurns = 1 }, func(r *rig) {
			r.send("", "U1", "Alice", "hello")
			r.settle()
		}, templates.ConcludeMaxTurns},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var configure []func(*rig)
			if tt.options != nil {
				configure = append(configure, tt.options)
			}
			r := newRig(t, configure...)
			rec := recordData(r)
			tt.run(r)
			if d := rec.get(t, elen, templates.PromptConclude, 0); d.ConcludeReason != tt.want {
				t.Errorf("ConcludeReason = %q, want %q", d.ConcludeReason, tt.want)
			}
			if d := rec.get(t, elen, templates.PromptDefault, 0); d.ConcludeReason != "" {
				t.Errorf("ConcludeReason in default = %q, want empty", d.ConcludeReason)
			}
		})
	}
}

// :end: always concludes (SPEC §14.2): after a conclusion, a follow-up the
// facilitator answers with a wordless :end: gets conclude's answer posted;
// a "thanks" answered :end: by the facilitator and by conclude posts
// nothing, and the root keeps its ✅. Whichever way :end: is spelt.
func TestEndAlwaysConcludes(t *testing.T) {
	for _, end := range []string{":end:", "🧭 :end:"} {
		t.Run(end+"/a follow-up the thread answers", func(t *testing.T) {
			r := newRig(t)
			r.model.on(elen, templates.PromptDefault, "🧭 :end:", end)
			r.model.on(elen, templates.PromptConclude, "C1 is covered; the deductible is 500.", "The deductible is 500.")
			root := r.send("", "U1", "Alice", "Is claim C1 covered?")
			r.settle()
			r.send(root.TS, "U1", "Alice", "what was the deductible again?")
			r.settle()
			if n := len(r.model.calls(elen, templates.PromptConclude)); n != 2 {
				t.Errorf("%d conclusions, want 2: the follow-up is answered", n)
			}
			want := []string{"Elen: C1 is covered; the deductible is 500.", "Elen: The deductible is 500."}
			if got := r.chat.texts(); !slices.Equal(got, want) {
				t.Errorf("posts %q\nwant %q", got, want)
			}
			if st := r.state(root.TS); st.Status != statusConcluded || !r.reacted(root.TS, "white_check_mark") {
				t.Errorf("status %q; want concluded again, with ✅", st.Status)
			}
		})
		t.Run(end+"/an acknowledgement", func(t *testing.T) {
			r := newRig(t)
			r.model.on(elen, templates.PromptDefault, "🧭 :end:", end)
			r.model.on(elen, templates.PromptConclude, "Summary.", end)
			root := r.send("", "U1", "Alice", "Is claim C1 covered?")
			r.settle()
			thanks := r.send(root.TS, "U1", "Alice", "thanks!")
			r.settle()
			st := r.state(root.TS)
			if st.Status != statusConcluded || st.Reopened || !r.reacted(root.TS, "white_check_mark") {
				t.Errorf("status %q, reopened %v; want concluded again, with ✅", st.Status, st.Reopened)
			}
			if !slices.Contains(st.Acknowledged, thanks.TS) {
				t.Errorf("acknowledged %v, want the thanks (%s)", st.Acknowledged, thanks.TS)
			}
			if n := len(r.model.calls(elen, templates.PromptConclude)); n != 2 {
				t.Errorf("%d conclusions, want 2: conclude decides the thanks needs no post", n)
			}
			if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: Summary."}) {
				t.Errorf("posts %q, want the first conclusion alone", got)
			}
		})
		t.Run(end+"/after an expert", func(t *testing.T) {
			r := newRig(t)
			r.model.on(elen, templates.PromptDefault, "🧭 :end:", cora+" and claim C2?", end)
			r.model.on(cora, templates.PromptContextNotFound, threading("C2", ""))
			r.model.on(cora, templates.PromptContextFound, "C2 is covered.")
			r.model.on(elen, templates.PromptConclude, "Summary.", "C2 is covered too.")
			root := r.send("", "U1", "Alice", "Is claim C1 covered?")
			r.settle()
			r.send(root.TS, "U1", "Alice", "And claim C2?")
			r.settle()
			if n := len(r.model.calls(elen, templates.PromptConclude)); n != 2 {
				t.Errorf("%d conclusions, want 2: an expert answered the follow-up", n)
			}
			want := []string{"Elen: Summary.", "Elen: " + cora + " and claim C2?", "Cora: C2 is covered.", "Elen: C2 is covered too."}
			if got := r.chat.texts(); !slices.Equal(got, want) {
				t.Errorf("posts %q\nwant %q", got, want)
			}
		})
	}
}

// .SessionFormat of a member: the key_format attribute, else the agent's
// session_pattern, else empty.
func TestSessionFormat(t *testing.T) {
	r := newRig(t, func(r *rig) {
		a := r.agents[cora]
		a.Attributes = map[string]string{"role": "expert", "Key_Format": "claim number, e.g. CLM-123456"}
		r.agents[cora] = a
		r.opts.Agents = map[string]AgentSettings{
			cora: {SessionPolicy: SessionPattern, SessionPattern: `C\d+`},
			paul: {SessionPolicy: SessionPattern, SessionPattern: `P-\d{4}`},
		}
	})
	rec := recordData(r)
	r.send("", "U1", "Alice", "hello")
	r.settle()
	d := rec.get(t, elen, templates.PromptDefault, 0)
	got := map[string]string{}
	for _, m := range d.ChannelMembers {
		if a, ok := m.AgentInfo(); ok {
			got[a.EnsDomain] = a.SessionFormat
		}
	}
	want := map[string]string{elen: "", cora: "claim number, e.g. CLM-123456", paul: `P-\d{4}`}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("SessionFormat of %s = %q, want %q", name, got[name], w)
		}
	}
}

// The clone's group is who took part in the conversation: adding an agent
// to the channel changes nothing for a new conversation with the same
// participants.
func TestCloneGroupFromParticipants(t *testing.T) {
	r := newRig(t, func(r *rig) { r.opts.Channels = []ChannelConfig{{ID: chanA, Agents: []string{elen, twin}}} })
	ctx := context.Background()
	conversation := func() string {
		root := r.send("", "U1", "Alice", "Hello")
		r.settle()
		r.send(root.TS, "U1", "Alice", twin+" are you free on Friday?")
		r.settle()
		return r.state(root.TS).Group
	}
	before := conversation()
	// Elen answered the root before the twin was named: she took part.
	if want := GroupSessionID([]string{elen, tina}); before != want {
		t.Errorf("group %q, want %q (Elen and the twin's human)", before, want)
	}
	if _, err := r.e.AddAgent(ctx, chanA, paul); err != nil {
		t.Fatal(err)
	}
	if after := conversation(); after != before {
		t.Errorf("group after adding Paul to the channel %q, want %q as before", after, before)
	}
	// Naming Paul makes him take part, and the group another.
	root := r.send("", "U1", "Alice", paul+" and "+twin+", Friday?")
	r.settle()
	if got, want := r.state(root.TS).Group, GroupSessionID([]string{elen, paul, tina}); got != want {
		t.Errorf("group with Paul named %q, want %q", got, want)
	}
}

// An expert's history marks the entries of other conversations with the
// date they were stored; this thread's messages are not marked.
func TestMemoryEntriesAreMarkedEarlier(t *testing.T) {
	r := newRig(t)
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""), threading("C1", ""))
	r.model.on(cora, templates.PromptContextFound, "C1 moved house.", "Still moved.")
	r.send("", "U1", "Alice", cora+" what about claim C1?")
	r.settle()
	r.clock.Advance(48 * time.Hour)
	r.send("", "U1", "Alice", cora+" claim C1 again?")
	r.settle()

	stored, err := r.store.ReadSession(context.Background(), cora, "C1", 0)
	if err != nil || len(stored) == 0 {
		t.Fatalf("session: %v, %v", stored, err)
	}
	mark := "(earlier, " + stored[0].At.UTC().Format(time.DateOnly) + ") "
	req := r.model.calls(cora, templates.PromptContextFound)[1]
	got := contents(req)
	want := []string{
		"user: " + mark + "Alice (person): " + cora + " what about claim C1?",
		"assistant: " + mark + "C1 moved house.",
		"user: Alice (person): " + cora + " claim C1 again?",
	}
	if len(got) < len(want)+2 || !slices.Equal(got[1:len(want)+1], want) {
		t.Errorf("history:\n%s\nwant after the system prompt:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An entry stored without a time (by an earlier version) is marked as
// earlier without a date.
func TestSessionHistoryMarks(t *testing.T) {
	at := time.Date(2027, 3, 1, 23, 30, 0, 0, time.FixedZone("UTC-2", -2*3600))
	got := sessionHistory([]memory.SessionEntry{
		{Role: llm.RoleUser, Author: "Ann (person)", Content: "dated", At: at},
		{Role: llm.RoleAssistant, Content: "undated"},
	})
	want := []string{"(earlier, 2027-03-02) Ann (person): dated", "(earlier) undated"}
	for i, h := range got {
		if s := h.text(0); s != want[i] {
			t.Errorf("entry %d = %q, want %q", i, s, want[i])
		}
	}
}

// keyToolbox answers a CRM look-up with a claim number the thread never
// wrote.
type keyToolbox struct{}

func (keyToolbox) Tools(selection []string) []llm.Tool {
	return []llm.Tool{{Name: "crm__find_claim", Description: "Finds a claim by description."}}
}

func (keyToolbox) Call(context.Context, string, string) (string, error) {
	return "CLM-123456", nil
}

// With the built-in prompts, an expert may take its key from a tool's
// result: its threading prompt says so and shows its key format, and the
// key is bound although no message wrote it.
func TestKeyFromAToolIsBound(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Agents = map[string]AgentSettings{cora: {Tools: []string{"crm"}, SessionPolicy: SessionPattern, SessionPattern: `CLM-\d{6}`}}
	})
	lib, err := templates.Open("", templates.Options{Clock: r.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	r.e = r.engine(lib.Current(), func(d *Deps) { d.Tools = keyToolbox{} })
	lookup := llm.Response{ToolCalls: []llm.ToolCall{{ID: "a", Name: "crm__find_claim", Arguments: `{"q":"the flooded kitchen"}`}}, FinishReason: "tool_calls"}
	r.model.on(cora, templates.PromptContextNotFound, lookup, threading("CLM-123456", ""))
	r.model.on(cora, templates.PromptContextFound, "📚 CLM-123456 is open.")
	r.model.on(elen, templates.PromptDefault, "🧭 "+cora+", what about the flooded kitchen?", "🧭 :end:")
	root := r.send("", "U1", "Alice", "What about the flooded kitchen?")
	r.settle()

	if got := r.state(root.TS).Bindings[cora]; got != "CLM-123456" {
		t.Errorf("binding %q, want the key the tool returned", got)
	}
	threadings := r.model.calls(cora, templates.PromptContextNotFound)
	if len(threadings) == 0 {
		t.Fatal("no threading request")
	}
	prompt := lastUser(threadings[0])
	for _, want := range []string{`Your memory keys have this form: CLM-\d{6}.`, "from these messages or from the result of one of your tools"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("threading prompt lacks %q:\n%s", want, prompt)
		}
	}
	if sys := r.model.calls(elen, templates.PromptDefault)[0].Messages[0].Content; !strings.Contains(sys, `Its memory keys: CLM-\d{6}.`) {
		t.Errorf("the facilitator's team list lacks Cora's key format:\n%s", sys)
	}
}
