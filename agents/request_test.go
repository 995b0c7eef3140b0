package agents

import (
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/templates"
)

// .Request is the message that began the exchange: the facilitator asks the
// person a question and the person answers; the next default and the
// conclusion still work from the opening message, in the first exchange
// and after a reopening. The person's answer is what they added.
func TestRequestIsTheExchangeOpening(t *testing.T) {
	r := newRig(t)
	rec := recordData(r)
	r.model.on(elen, templates.PromptDefault, "🧭 Which claim number?", "🧭 :end:", "🧭 Which policy?", "🧭 :end:")
	r.model.on(elen, templates.PromptConclude, "🧭 Claim CLM-2025-00177 is covered.", "🧭 The deductible is 500.")
	root := r.send("", "U1", "Alice", "Is my claim covered?")
	r.settle()
	r.send(root.TS, "U1", "Alice", "CLM-2025-00177")
	r.settle()
	r.send(root.TS, "U1", "Alice", "And what is the deductible?")
	r.settle()
	r.send(root.TS, "U1", "Alice", "P-9")
	r.settle()

	for _, tt := range []struct {
		prompt  string
		i       int
		request string
	}{
		{templates.PromptDefault, 0, "Is my claim covered?"},
		{templates.PromptDefault, 1, "Is my claim covered?"},
		{templates.PromptConclude, 0, "Is my claim covered?"},
		{templates.PromptDefault, 2, "And what is the deductible?"},
		{templates.PromptDefault, 3, "And what is the deductible?"},
		{templates.PromptConclude, 1, "And what is the deductible?"},
	} {
		d := rec.get(t, elen, tt.prompt, tt.i)
		if d.Request.Content != tt.request || d.Request.Author.Name() != "Alice" {
			t.Errorf("%s %d: request %q by %q, want %q by Alice", tt.prompt, tt.i, d.Request.Content, d.Request.Author.Name(), tt.request)
		}
	}
	// The field that was already there keeps its meaning: the person's answer.
	if d := rec.get(t, elen, templates.PromptDefault, 1); d.LatestPersonRequest.Content != "CLM-2025-00177" {
		t.Errorf("LatestPersonRequest %q, want the person's answer", d.LatestPersonRequest.Content)
	}
}

// The built-in default and conclude quote .Request as the request to answer
// and the person's answer as what they added, each once.
func TestBuiltinPromptsQuoteTheRequest(t *testing.T) {
	r := newRig(t, withBuiltinTemplates)
	r.model.on(elen, templates.PromptDefault, "🧭 Which claim number?", "🧭 :end:", "🧭 Which policy?", "🧭 :end:")
	r.model.on(elen, templates.PromptConclude, "🧭 Covered.", "🧭 500.")
	root := r.send("", "U1", "Alice", "Is my claim covered?")
	r.settle()
	r.send(root.TS, "U1", "Alice", "CLM-2025-00177")
	r.settle()
	r.send(root.TS, "U1", "Alice", "And what is the deductible?")
	r.settle()
	r.send(root.TS, "U1", "Alice", "P-9")
	r.settle()

	last := func(prompt string, i int) string {
		calls := r.model.calls(elen, prompt)
		if len(calls) <= i {
			t.Fatalf("%d %s requests, want more than %d", len(calls), prompt, i)
		}
		msgs := calls[i].Messages
		return msgs[len(msgs)-1].Content
	}
	for _, tt := range []struct {
		prompt         string
		i              int
		request, added string
	}{
		{templates.PromptDefault, 1, "Is my claim covered?", "CLM-2025-00177"},
		{templates.PromptConclude, 0, "Is my claim covered?", "CLM-2025-00177"},
		{templates.PromptDefault, 3, "And what is the deductible?", "P-9"},
		{templates.PromptConclude, 1, "And what is the deductible?", "P-9"},
	} {
		p := last(tt.prompt, tt.i)
		want := `The request to answer, from Alice: "` + tt.request + `".`
		if !strings.Contains(p, want) || strings.Count(p, tt.request) != 1 {
			t.Errorf("%s %d does not quote the request once:\n%s", tt.prompt, tt.i, p)
		}
		if !strings.Contains(p, `What the people added since: Alice: "`+tt.added+`".`) || strings.Count(p, tt.added) != 1 {
			t.Errorf("%s %d does not quote the person's answer once as added:\n%s", tt.prompt, tt.i, p)
		}
	}
}

// The clone's group always counts the channel's facilitator: a twin named
// directly and the same twin called by the facilitator share one group,
// and the second reads what the first said.
func TestCloneGroupCountsTheFacilitator(t *testing.T) {
	r := newRig(t, func(r *rig) { r.opts.Channels = []ChannelConfig{{ID: chanA, Agents: []string{elen, twin}}} })
	r.model.on(twin, templates.PromptDefault, "Tina is free on Friday afternoon.", "As I said, Friday afternoon.")
	r.model.on(elen, templates.PromptDefault, "🧭 :end:", "🧭 "+twin+" when is Tina free?", "🧭 :end:")
	direct := r.send("", "U1", "Alice", twin+" are you free on Friday?")
	r.settle()
	called := r.send("", "U2", "Bob", "When could we meet Tina?")
	r.settle()

	g1, g2 := r.state(direct.TS).Group, r.state(called.TS).Group
	if g1 == "" || g1 != g2 {
		t.Fatalf("groups %q and %q, want one", g1, g2)
	}
	if want := GroupSessionID([]string{elen, tina}); g1 != want {
		t.Errorf("group %q, want %q (the facilitator and the twin's human)", g1, want)
	}
	calls := r.model.calls(twin, templates.PromptDefault)
	if len(calls) != 2 {
		t.Fatalf("%d twin turns, want 2", len(calls))
	}
	if indexOf(calls[1], "Tina is free on Friday afternoon.") < 0 {
		t.Errorf("the twin called by the facilitator does not read what it said when named:\n%s", strings.Join(contents(calls[1]), "\n"))
	}
}

// An agent name that no agent of the channel has, written by the
// facilitator, leaves it a history note in its next request.
func TestUnknownNameLeavesANote(t *testing.T) {
	r := newRig(t)
	const zed = "zed.acme.137.protocol6022.eth"
	r.model.on(elen, templates.PromptDefault, "🧭 "+zed+", is claim C42 covered?", "🧭 :end:")
	r.send("", "U1", "Alice", "Is claim C42 covered?")
	r.settle()
	defaults := r.model.calls(elen, templates.PromptDefault)
	if len(defaults) < 2 {
		t.Fatalf("%d facilitator turns, want a second one after the unknown name", len(defaults))
	}
	note := "(" + zed + " reaches no one; no agent of this channel has that name)"
	if !slices.ContainsFunc(contents(defaults[1]), func(s string) bool { return strings.Contains(s, note) }) {
		t.Errorf("the second request lacks %q:\n%s", note, strings.Join(contents(defaults[1]), "\n"))
	}
}
