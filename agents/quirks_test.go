package agents_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// The rules of SPEC §14.7 on the engine, with replies drawn from the
// quirk corpus of llmfake.

// scene is what the quirked replies of these tests mean to say.
var scene = llmfake.Scene{Text: "can you check claim C42?", Call: cora, Name: "Cora", Key: "C45653"}

// quirked is a corpus reply as the model client returns its content.
func quirked(name string, s llmfake.Scene) llm.Response {
	r := llmfake.Quirked(name, s)
	return llm.Response{Content: r.Content, FinishReason: cmpOr(r.FinishReason, llm.FinishStop)}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestUnreachedCallsFound(t *testing.T) {
	desk := []ens.Agent{testAgents()[elen], testAgents()[cora], testAgents()[paul], testAgents()[twin]}
	e := newRig(t).e
	tests := []struct {
		name, text string
		want       []string // what it wrote → the agent meant ("" unknown)
	}{
		{"display name", "@Cora, can you check?", []string{"@Cora→" + cora}},
		{"addressed", "Cora, can you check?", []string{"Cora→" + cora}},
		{"addressed after emphasis", "**Cora**: can you check?", []string{"Cora→" + cora}},
		{"addressed after a signature", "🧭 Cora, can you check?", []string{"Cora→" + cora}},
		{"display name with a space", "@Tina's twin what do you think?", []string{"@Tina's twin→" + twin}},
		{"ens prefix", "claims go to cora.acme, ask her", []string{"cora.acme→" + cora}},
		{"longer prefix", "cora.acme.137 please", []string{"cora.acme.137→" + cora}},
		{"slack italics", "_" + cora + "_ please check", []string{"_" + cora + "_→" + cora}},
		{"wrong base", "cora.acme.137.wrong.eth please", []string{"cora.acme.137.wrong.eth→" + cora}},
		{"unknown eth", "ask @carl.eth now", []string{"carl.eth→"}},
		{"two misses", "@Cora and paul.acme, please", []string{"@Cora→" + cora, "paul.acme→" + paul}},
		// No miss: a real call, prose, an e-mail, the writer itself.
		{"full name", "@" + cora + " please", nil},
		{"full name beside the display name", "Cora, " + cora + " please", nil},
		{"display name in prose", "Cora will check it and tell you.", nil},
		{"display name inside a sentence", "🧭 Ask Cora, she knows.", nil},
		{"e-mail", "write to ops@acme.com", nil},
		{"abbreviation", "e.g. the deductible", nil},
		{"itself", "@Elen here, thanks.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			wrote, meant := e.Unreached(tt.text, desk, elen)
			for i := range wrote {
				got = append(got, wrote[i]+"→"+meant[i])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("unreachedCalls(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

// A facilitator that calls by display name reaches no one: nobody is
// triggered, and it gets its next request at once (the clock does not
// move), with the note; its corrected call reaches the expert.
func TestUnreachedCallWakesTheFacilitatorAtOnce(t *testing.T) {
	for _, quirk := range []string{llmfake.QuirkDisplayName, llmfake.QuirkAddressed, llmfake.QuirkENSPrefix,
		llmfake.QuirkSlackItalics, llmfake.QuirkWrongBase} {
		t.Run(quirk, func(t *testing.T) {
			r := newRig(t)
			wrong := quirked(quirk, scene)
			r.model.on(elen, templates.PromptDefault, wrong, "Sorry: "+cora+", "+scene.Text, "Done.")
			r.model.on(cora, templates.PromptContextNotFound, threading("C42", ""))
			r.model.on(cora, templates.PromptContextFound, "Claim C42 is open.")
			var asked []time.Time
			r.model.hook = func(req llm.Request) {
				if req.Agent == elen {
					asked = append(asked, r.clock.Now())
				}
			}
			r.send("", "U1", "Alice", "Is claim C42 covered?")
			r.settle()
			defaults := r.model.calls(elen, templates.PromptDefault)
			if len(defaults) < 2 {
				t.Fatalf("%d facilitator turns, want a second one after the call that reached no one", len(defaults))
			}
			if !asked[1].Equal(asked[0]) {
				t.Errorf("the second request came %v after the first, want at once", asked[1].Sub(asked[0]))
			}
			wrote, _ := r.e.Unreached(wrong.Content, []ens.Agent{r.agents[cora]}, elen)
			if len(wrote) != 1 {
				t.Fatalf("the quirk's reply %q holds %d misses", wrong.Content, len(wrote))
			}
			note := "(" + wrote[0] + " reaches no one; to call Cora, write " + cora + ")"
			if !slices.ContainsFunc(contents(defaults[1]), func(s string) bool { return strings.Contains(s, note) }) {
				t.Errorf("the second request lacks %q:\n%s", note, strings.Join(contents(defaults[1]), "\n"))
			}
			if n := len(r.model.calls(cora, templates.PromptContextNotFound)); n != 1 {
				t.Errorf("Cora took %d threading turns, want 1 (the corrected call only)", n)
			}
			posts := r.chat.texts()
			if len(posts) < 3 || posts[0] != "Elen: "+wrong.Content || posts[2] != "Cora: Claim C42 is open." {
				t.Errorf("posts %q", posts)
			}
		})
	}
}

// A person calling by display name gets the hint, once per name per
// conversation; nobody is triggered.
func TestPersonUnreachedCallHint(t *testing.T) {
	r := newRig(t)
	root := r.send("", "U1", "Alice", "@Cora is claim C42 covered?")
	r.settle()
	r.send(root.TS, "U1", "Alice", "Cora, any news?")
	r.settle()
	want := []string{"C1 U1 @Cora reaches no one; to call Cora, write " + cora}
	if !slices.Equal(r.chat.ephemeral, want) {
		t.Errorf("notices %q, want %q", r.chat.ephemeral, want)
	}
	if n := len(r.model.calls(cora, "")); n != 0 {
		t.Errorf("Cora took %d turns", n)
	}
}

// concludeReasons records the .ConcludeReason of each conclude prompt.
func recordReasons(r *rig, reasons *[]string) {
	r.e = r.engine(fakePrompts{record: func(_, prompt string, d templates.Data) {
		if prompt == templates.PromptConclude {
			*reasons = append(*reasons, d.ConcludeReason)
		}
	}})
}

// A facilitator that repeats its call posts it once; the conversation
// concludes with "stalled".
func TestRepeatedFacilitatorReplyStalls(t *testing.T) {
	r := newRig(t)
	var reasons []string
	recordReasons(r, &reasons)
	call := "Over to you, " + cora + ": is C42 covered?"
	r.model.on(elen, templates.PromptDefault, call, "  over to YOU, "+cora+":\n is C42   covered? ")
	r.model.on(elen, templates.PromptConclude, "🧭 We could not settle it.")
	r.model.on(cora, templates.PromptContextNotFound, threading("C42", ""))
	r.model.on(cora, templates.PromptContextFound, "I need more.")
	root := r.send("", "U1", "Alice", "Is claim C42 covered?")
	r.settle()
	want := []string{"Elen: " + call, "Cora: I need more.", "Elen: 🧭 We could not settle it."}
	if got := r.chat.texts(); !slices.Equal(got, want) {
		t.Errorf("posts %q, want %q", got, want)
	}
	if !slices.Equal(reasons, []string{templates.ConcludeStalled}) {
		t.Errorf("conclude reasons %q, want [stalled]", reasons)
	}
	if st := r.state(root.TS); st.Status != agents.StatusConcluded {
		t.Errorf("status %q", st.Status)
	}
}

// A reply whose only calls are to agents at their cap is not posted; the
// conversation concludes with "stalled".
func TestCallsOnlyToCappedAgentsStall(t *testing.T) {
	r := newRig(t, func(r *rig) { r.opts.MaxTurnsPerAgent = 1 })
	var reasons []string
	recordReasons(r, &reasons)
	r.model.on(elen, templates.PromptDefault, "First, "+cora+", check C42.", "Again, "+cora+", check C42 please.")
	r.model.on(cora, templates.PromptContextNotFound, threading("C42", ""))
	r.model.on(cora, templates.PromptContextFound, "Still checking.")
	r.send("", "U1", "Alice", "Is claim C42 covered?")
	r.settle()
	for _, p := range r.chat.texts() {
		if strings.Contains(p, "Again,") {
			t.Errorf("the call to a capped agent was posted: %q", p)
		}
	}
	if !slices.Equal(reasons, []string{templates.ConcludeStalled}) {
		t.Errorf("conclude reasons %q, want [stalled]", reasons)
	}
}

// A reply that calls an agent and holds :end: calls the agent; the
// conversation goes on.
func TestCallBeatsEnd(t *testing.T) {
	r := newRig(t)
	r.model.on(elen, templates.PromptDefault, "Let me ask "+cora+" about C42. :end:", "Cora says it is open.")
	r.model.on(cora, templates.PromptContextNotFound, threading("C42", ""))
	r.model.on(cora, templates.PromptContextFound, "It is open.")
	root := r.send("", "U1", "Alice", "Is claim C42 covered?")
	r.settle()
	if n := len(r.model.calls(cora, templates.PromptContextFound)); n != 1 {
		t.Errorf("Cora answered %d times, want 1", n)
	}
	if n := len(r.model.calls(elen, templates.PromptConclude)); n != 0 {
		t.Errorf("%d conclusions, want none", n)
	}
	if got := r.chat.texts(); len(got) == 0 || got[0] != "Elen: Let me ask "+cora+" about C42." {
		t.Errorf("posts %q, want the call without :end:", got)
	}
	if st := r.state(root.TS); st.Status != agents.StatusOpen {
		t.Errorf("status %q, want open", st.Status)
	}
}

// :end: counts as a token in the ways models write it, and not inside a
// sentence.
func TestEndTokenAsModelsWriteIt(t *testing.T) {
	s := llmfake.Scene{Text: "Claim C42 is covered."}
	for _, quirk := range []string{llmfake.QuirkEndUpper, llmfake.QuirkEndBold, llmfake.QuirkEndCode,
		llmfake.QuirkEndQuoted, llmfake.QuirkEndOwnLine, llmfake.QuirkEndInSentence} {
		t.Run(quirk, func(t *testing.T) {
			r := newRig(t)
			r.model.on(elen, templates.PromptDefault, quirked(quirk, s))
			r.model.on(elen, templates.PromptConclude, "🧭 Covered.")
			root := r.send("", "U1", "Alice", "Is claim C42 covered?")
			r.settle()
			wantEnd := quirk != llmfake.QuirkEndInSentence
			if got := r.state(root.TS).Status == agents.StatusConcluded; got != wantEnd {
				t.Errorf("concluded: %v, want %v", got, wantEnd)
			}
			posts := r.chat.texts()
			if len(posts) == 0 {
				t.Fatal("nothing posted")
			}
			if wantEnd && strings.Contains(strings.ToLower(posts[0]), ":end:") {
				t.Errorf("the token was posted: %q", posts[0])
			}
			if !wantEnd && posts[0] != "Elen: There is no :end: yet. Claim C42 is covered." {
				t.Errorf("posted %q, want the sentence as written", posts[0])
			}
		})
	}
}

// The threading template's placeholders sent back bind no session, under
// the default policy "any", and nothing with a placeholder is posted.
func TestPlaceholderEchoCreatesNoSession(t *testing.T) {
	r := newRig(t)
	r.model.on(cora, templates.PromptContextNotFound, quirked(llmfake.QuirkPlaceholderEcho, scene))
	root := r.send("", "U1", "Alice", cora+" is claim C42 covered?")
	r.settle()
	if b := r.state(root.TS).Bindings[cora]; b != "" {
		t.Errorf("bound to %q", b)
	}
	keys, err := r.store.Sessions(context.Background(), agents.ExpertNamespace(cora, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("sessions %q, want none", keys)
	}
	for _, p := range r.chat.texts() {
		if strings.Contains(p, "<") || strings.Contains(p, "text to post") {
			t.Errorf("posted %q", p)
		}
	}
	last := r.model.calls(elen, templates.PromptDefault)
	if len(last) == 0 || !slices.ContainsFunc(contents(last[len(last)-1]), func(s string) bool {
		return strings.Contains(s, cora+" could not answer: its key")
	}) {
		t.Error("the facilitator was not told the key was refused")
	}
}

// Keys as small models write them: the field under another name binds;
// a phrase binds only when session_pattern picks the key out of it.
func TestThreadingKeysAsModelsWriteThem(t *testing.T) {
	tests := []struct {
		quirk   string
		pattern string
		want    string
	}{
		{llmfake.QuirkKeyCapitalised, "", "C45653"},
		{llmfake.QuirkKeySessionKey, "", "C45653"},
		{llmfake.QuirkKeyNamedKey, "", "C45653"},
		{llmfake.QuirkKeyInPhrase, "", ""},
		{llmfake.QuirkKeyInPhrase, `C\d{5}`, "C45653"},
	}
	for _, tt := range tests {
		t.Run(tt.quirk+"/"+tt.pattern, func(t *testing.T) {
			r := newRig(t, func(r *rig) {
				if tt.pattern != "" {
					r.opts.Agents = map[string]agents.AgentSettings{cora: {SessionPolicy: agents.SessionPattern, SessionPattern: tt.pattern}}
				}
			})
			r.model.on(cora, templates.PromptContextNotFound, quirked(tt.quirk, scene))
			root := r.send("", "U1", "Alice", cora+" customer C45653?")
			r.settle()
			if b := r.state(root.TS).Bindings[cora]; b != tt.want {
				t.Errorf("bound to %q, want %q", b, tt.want)
			}
		})
	}
}

// A threading reply cut by the length limit is asked again, not
// repaired; cut twice, the expert stays unbound.
func TestCutThreadingReplyRetriedOnce(t *testing.T) {
	cut := quirked(llmfake.QuirkCutThreading, scene)
	t.Run("once", func(t *testing.T) {
		r := newRig(t)
		r.model.on(cora, templates.PromptContextNotFound, cut, threading("C45653", ""))
		root := r.send("", "U1", "Alice", cora+" customer C45653?")
		r.settle()
		if b := r.state(root.TS).Bindings[cora]; b != "C45653" {
			t.Errorf("bound to %q, want the retry's key", b)
		}
		if n := len(r.model.calls(cora, templates.PromptContextNotFound)); n != 2 {
			t.Errorf("%d threading requests, want 2", n)
		}
	})
	t.Run("twice", func(t *testing.T) {
		r := newRig(t)
		r.model.on(cora, templates.PromptContextNotFound, cut, cut)
		root := r.send("", "U1", "Alice", cora+" customer C45653?")
		r.settle()
		if b := r.state(root.TS).Bindings[cora]; b != "" {
			t.Errorf("bound to %q, want none", b)
		}
		for _, p := range r.chat.texts() {
			if strings.Contains(p, "C456") && strings.HasPrefix(p, "Cora") {
				t.Errorf("the cut reply was posted: %q", p)
			}
		}
	})
}

// Empty replies at the length limit or stopped by the content filter
// give a notice that says which; a reply the filter cut is posted marked.
func TestHonestFailures(t *testing.T) {
	for reason, want := range map[string]string{
		llm.ReasonLength:   "the model stopped at its length limit",
		llm.ReasonFiltered: "the model's content filter stopped the reply",
	} {
		t.Run(reason, func(t *testing.T) {
			r := newRig(t, func(r *rig) { r.opts.Notify = agents.NotifyThread })
			r.model.on(elen, templates.PromptDefault, &llm.Error{Reason: reason, Attempts: 1})
			r.send("", "U1", "Alice", "hello")
			r.settle()
			posts := r.chat.texts()
			if len(posts) != 1 || !strings.Contains(posts[0], "could not answer: "+want+" (ref ") {
				t.Errorf("posts %q, want a notice saying %q", posts, want)
			}
		})
	}
	t.Run("filtered part", func(t *testing.T) {
		r := newRig(t)
		r.model.on(elen, templates.PromptDefault, quirked(llmfake.QuirkFilteredCut, llmfake.Scene{Text: "The claim is covered."}))
		r.send("", "U1", "Alice", "hello")
		r.settle()
		if got := r.chat.texts(); !slices.Equal(got, []string{"Elen: The claim … (cut by the model's content filter)"}) {
			t.Errorf("posts %q", got)
		}
	})
}
