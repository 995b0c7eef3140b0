package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/templates"
)

// A facilitator prompt written as the seeds write theirs quotes the
// previous discussion from .Messages: after an expert answered, its
// second request holds the person's question, its own call and the
// expert's answer, each with its author, and the operator's variables.
func TestPreviousDiscussionBlock(t *testing.T) {
	dir := t.TempDir()
	const tmpl = `You answer for {{.Vars.company}}.
Previous discussion:
{{range .Messages}}- {{.Author.Name}}{{if .Author.IsAgent}} ({{.Author.Attributes.role}}){{end}}'s answer is: {{.Content}}
{{end -}}
Answer the person.`
	writeFacilitatorPrompt(t, dir, tmpl)
	r := newRig(t, func(r *rig) { r.opts.TemplateVars = map[string]string{"company": "Acme Insurance"} })
	lib, err := templates.Open(dir, templates.Options{Clock: r.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	r.e = r.engine(lib.Current())
	r.model.on(elen, templates.PromptDefault, "🧭 "+cora+" what about claim C1?", "🧭 It is covered. :end:")
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.model.on(cora, templates.PromptContextFound, "📚 Claim C1 is covered.")
	r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()

	calls := r.model.calls(elen, templates.PromptDefault)
	if len(calls) < 2 {
		t.Fatalf("the facilitator ran %d time(s), want 2", len(calls))
	}
	got := lastUser(calls[1])
	want := "You answer for Acme Insurance. Previous discussion: " +
		"- Alice's answer is: Is claim C1 covered? " +
		"- Elen (facilitator)'s answer is: 🧭 " + cora + " what about claim C1? " +
		"- Cora (expert)'s answer is: 📚 Claim C1 is covered. " +
		"Answer the person."
	if got != want {
		t.Errorf("the second facilitator prompt is\n%s\nwant\n%s", got, want)
	}
}

// .Messages keeps to what each agent sees, and InExchange and
// ExchangeMessageCount start again when a person reopens the concluded
// thread.
func TestMessagesFieldsAndExchange(t *testing.T) {
	r := newRig(t)
	rec := recordData(r)
	r.model.on(elen, templates.PromptDefault, "🧭 "+cora+" what about claim C1?", "🧭 Covered. :end:", "🧭 Yes, still covered. :end:")
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.model.on(cora, templates.PromptContextFound, "📚 C1 is covered.")
	root := r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()
	if r.state(root.TS).Status != agents.StatusConcluded {
		t.Fatalf("status %q, want concluded", r.state(root.TS).Status)
	}

	found := rec.get(t, cora, templates.PromptContextFound, 0)
	var seen []string
	for _, m := range found.Messages {
		seen = append(seen, m.Author.Name()+": "+m.Content)
		if !m.InExchange || m.Time.IsZero() {
			t.Errorf("expert's message %q: in exchange %v, time %v; want true and a time", m.Content, m.InExchange, m.Time)
		}
	}
	if got, want := strings.Join(seen, " | "), "Elen: 🧭 "+cora+" what about claim C1?"; !strings.HasPrefix(got, want) || strings.Contains(got, "Alice") {
		t.Errorf("the expert sees %q; want the call that names it (and its own reply), not the person's question", got)
	}
	if found.ExchangeMessageCount != len(found.Messages) {
		t.Errorf("expert: exchange count %d of %d messages", found.ExchangeMessageCount, len(found.Messages))
	}

	// The rig's people write at 1700000000.x and its agents post at
	// 1800000000.x: the reopening message must come after the posts.
	reopen := agents.Event{ID: "EvReopen", Kind: agents.EventMessage, Team: team, Channel: chanA, TS: "1900000000.000100",
		ThreadTS: root.TS, UserID: "U1", UserName: "Alice", Raw: "And claim C1 after the storm?", Text: "And claim C1 after the storm?", At: r.clock.Now()}
	if err := handle(context.Background(), r.e, reopen); err != nil {
		t.Fatal(err)
	}
	r.settle()
	fac := rec.get(t, elen, templates.PromptDefault, 2)
	if n := len(fac.Messages); n < 5 {
		t.Fatalf("the facilitator sees %d messages after the reopening", n)
	}
	last := fac.Messages[len(fac.Messages)-1]
	if last.Content != "And claim C1 after the storm?" || !last.InExchange || last.Author.Name() != "Alice" {
		t.Errorf("the reopening message: %q by %s, in exchange %v", last.Content, last.Author.Name(), last.InExchange)
	}
	for _, m := range fac.Messages[:len(fac.Messages)-1] {
		if m.InExchange {
			t.Errorf("%q of the concluded exchange is in the current one", m.Content)
		}
	}
	if fac.ExchangeMessageCount != 1 || fac.ConversationMessageCount != len(fac.Messages) {
		t.Errorf("exchange count %d, conversation count %d, messages %d; want 1 and both counts equal to the messages",
			fac.ExchangeMessageCount, fac.ConversationMessageCount, len(fac.Messages))
	}
	if first := fac.Messages[0]; first.Author.Name() != "Alice" || first.Content != "Is claim C1 covered?" {
		t.Errorf("first message %q by %s", first.Content, first.Author.Name())
	}
}

// A prompt that stops on required, or renders to nothing, fails the turn:
// its ⚠️ notice names the template's file and line and says why, and no
// request reaches the model.
func TestRequiredAndEmptyPromptFailTheTurn(t *testing.T) {
	for _, c := range []struct {
		name, tmpl, want string
	}{
		{"required", "Answer the person.\nRegion: {{required \"the region ([templates.vars] region)\" .Vars.region}}.",
			"facilitator/default.tmpl:2: the region ([templates.vars] region) (ref "},
		{"white space", "{{if .ConcludeReason}}Conclude.{{end}}\n\t\n",
			"facilitator/default.tmpl: the prompt renders to nothing but white space (ref "},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFacilitatorPrompt(t, dir, c.tmpl)
			r := newRig(t)
			lib, err := templates.Open(dir, templates.Options{Clock: r.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			r.e = r.engine(lib.Current())
			r.send("", "U1", "Alice", "hello")
			r.settle()
			posts := r.chat.texts()
			if len(posts) != 1 || !strings.Contains(posts[0], "⚠️") || !strings.Contains(posts[0], c.want) {
				t.Errorf("posts %q, want one ⚠️ notice with %q", posts, c.want)
			}
			if n := len(r.model.calls(elen, "")); n != 0 {
				t.Errorf("%d request(s) reached the model", n)
			}
		})
	}
}

// writeFacilitatorPrompt writes the facilitator's default prompt into the
// config repository dir.
func writeFacilitatorPrompt(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "facilitator"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "facilitator", "default.tmpl"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
