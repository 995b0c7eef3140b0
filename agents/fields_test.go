package agents_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// recorded collects the data of every phase prompt rendered, by
// "agent|prompt".
type recorded struct {
	mu   sync.Mutex
	data map[string][]templates.Data
}

func recordData(r *rig) *recorded {
	rec := &recorded{data: make(map[string][]templates.Data)}
	r.e = r.engine(fakePrompts{record: func(agent, prompt string, d templates.Data) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.data[agent+"|"+prompt] = append(rec.data[agent+"|"+prompt], d)
	}})
	return rec
}

func (rec *recorded) get(t *testing.T, agent, prompt string, i int) templates.Data {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.data[agent+"|"+prompt]) <= i {
		t.Fatalf("%s %s rendered %d times", agent, prompt, len(rec.data[agent+"|"+prompt]))
	}
	return rec.data[agent+"|"+prompt][i]
}

func TestRequestFields(t *testing.T) {
	r := newRig(t)
	rec := recordData(r)
	r.pair("UT", tina)
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", "Looking at C1."))
	root := r.send("", "UT", "Tina", cora+" what about claim C1?")
	r.settle()

	found := rec.get(t, cora, templates.PromptContextFound, 0)
	if found.LatestRequest.Content != cora+" what about claim C1?" || found.InitialRequest.Content != found.LatestRequest.Content {
		t.Errorf("context-found after the threading message: initial %q, latest %q; want the message naming cora for both",
			found.InitialRequest.Content, found.LatestRequest.Content)
	}
	if found.ConversationMessageCount != 2 || found.MemorySessionId != "C1" {
		t.Errorf("context-found: count %d, session %q; want 2 (the request and its own threading message), C1",
			found.ConversationMessageCount, found.MemorySessionId)
	}
	author := found.LatestRequest.Author
	info, isAgent := author.AgentInfo()
	if !isAgent || info.EnsDomain != tina || author.Name() != "Tina" {
		t.Errorf("a paired user's message is not the human agent's: agent %v, %+v", isAgent, info)
	}
	fac := rec.get(t, elen, templates.PromptDefault, 0)
	if fac.MemorySessionId != agents.ConversationID(team, chanA, root.TS) || fac.ConversationMessageCount != 3 {
		t.Errorf("facilitator: session %q, count %d", fac.MemorySessionId, fac.ConversationMessageCount)
	}
	if fac.LatestRequest.Content != "cora ok" {
		t.Errorf("facilitator's latest request %q", fac.LatestRequest.Content)
	}
	var names []string
	for _, m := range fac.ChannelMembers {
		names = append(names, m.Name())
	}
	if got := strings.Join(names, ","); got != "Elen,Cora,Paul,Tina" {
		t.Errorf("members %s", got)
	}
}

func TestCountBeforeTheHistoryCut(t *testing.T) {
	r := newRig(t, func(r *rig) { r.opts.MaxInputTokens = 200 })
	root := r.send("", "U1", "Alice", strings.Repeat("long words ", 40))
	r.settle()
	r.send(root.TS, "U1", "Alice", "and more")
	r.settle()
	fac := r.model.calls(elen, templates.PromptDefault)
	last := fac[len(fac)-1]
	if n := len(last.Messages); n == 5 || n == 2 {
		t.Fatalf("%d messages: the budget does not cut part of the history in this test", n)
	}
	if !strings.Contains(lastUser(last), "count=3|") {
		t.Errorf("count after a history cut: %q, want 3", lastUser(last))
	}
}

func TestHydratedSessionEntries(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	at := r.clock.Now()
	err := r.store.AppendSession(ctx, memory.SessionAppend{Namespace: cora, Key: "C1", Entries: []memory.SessionEntry{
		{Role: llm.RoleSystem, Content: "Claim C1 belongs to ACME.", At: at},
		{Role: llm.RoleUser, Content: "Earlier question", At: at},
		{Role: llm.RoleAssistant, Content: "Earlier answer", At: at},
		{Role: llm.RoleUser, Content: strings.Repeat("x", 20000), At: at},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.send("", "U1", "Alice", cora+" claim C1?")
	r.settle()
	req := r.model.calls(cora, templates.PromptContextFound)[0]
	got := contents(req)
	// Every memory entry is marked as earlier, with the date it was stored.
	mark := "(earlier, " + at.UTC().Format(time.DateOnly) + ") "
	want := []string{
		"system: system of " + cora,
		"system: " + mark + "Claim C1 belongs to ACME.",
		"user: " + mark + "Earlier question",
		"assistant: " + mark + "Earlier answer",
		"user: " + mark + strings.Repeat("x", 12000) + agents.TruncatedMark,
		"user: Alice (person): " + cora + " claim C1?",
	}
	if len(got) != len(want)+1 {
		t.Fatalf("request:\n%s", strings.Join(got, "\n"))
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("message %d = %.80q, want %.80q", i, got[i], w)
		}
	}
}

func TestHistoryCapKeepsTheLabel(t *testing.T) {
	p := agents.TurnPrompt{
		Agent:           testAgents()[elen],
		Prompt:          templates.PromptDefault,
		History:         []agents.HistoryMessage{{Role: llm.RoleUser, Author: "Alice (person)", Content: strings.Repeat("y", 100)}},
		MaxMessageChars: 100,
	}
	req, _, err := agents.BuildRequest(fixedPrompts{system: "S", phase: "P"}, newFakeModel(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := req.Messages[1].Content, "Alice (person): "+strings.Repeat("y", 100); got != want {
		t.Errorf("a message of exactly the cap was cut: %q", got)
	}
}

func TestGroupIDFrozen(t *testing.T) {
	r := newRig(t, func(r *rig) { r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{elen, twin}}} })
	ctx := context.Background()
	r.pair("UT", tina)
	r.pair("UX", xavi)
	root := r.send("", "UT", "Tina", "hello")
	r.settle()
	r.send(root.TS, "UX", "Xavi", "hi, I joined late")
	r.send(root.TS, "U1", "Alice", twin+" what do you think?")
	r.settle()
	// Frozen at Tina's root, when only she (and the channel's facilitator,
	// always counted) had taken part.
	want := agents.GroupSessionID([]string{elen, tina})
	if got := r.state(root.TS).Group; got != want {
		t.Errorf("group %q, want %q (frozen at first use)", got, want)
	}
	late, err := r.store.ReadSession(ctx, agents.CloneNamespace(&r.opts, xavi, chanA), want, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(late) != 1 || late[0].Content != "hi, I joined late" || late[0].Author != "Xavi ("+xavi+")" {
		t.Errorf("the late human agent's session: %+v", late)
	}
	if !strings.Contains(lastUser(r.model.calls(twin, templates.PromptDefault)[0]), "session="+want+"|") {
		t.Error("the twin does not run on the frozen group id")
	}
}

func TestPostedRepliesAreNotCut(t *testing.T) {
	r := newRig(t)
	long := strings.Repeat("z", 20000)
	r.model.on(elen, templates.PromptDefault, long)
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	if got := r.chat.texts(); len(got) != 1 || got[0] != "Elen: "+long {
		t.Errorf("the posted reply was changed (%d posts)", len(got))
	}
	for _, m := range r.messages(root.TS) {
		if m.Kind == agents.KindAgent && m.Text != long {
			t.Errorf("the stored reply was changed: %d runes", len([]rune(m.Text)))
		}
	}
}

func TestThreadingOutcomeOnTheTurnsPost(t *testing.T) {
	r := newRig(t, func(r *rig) { r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{cora}}} })
	r.model.on(cora, templates.PromptContextNotFound, `{"session": "C1",}`)
	root := r.send("", "U1", "Alice", cora+" claim C1?")
	r.settle()
	var meta []string
	for _, m := range r.messages(root.TS) {
		if m.Kind == agents.KindAgent {
			meta = append(meta, m.Text+"="+m.Meta["threading"])
		}
	}
	if strings.Join(meta, ";") != "cora ok="+agents.ThreadingRepaired {
		t.Errorf("stored replies with their threading outcome: %q", meta)
	}
}

func TestNonExactSessionMatchLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	r := newRig(t, func(r *rig) {
		r.logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, nil))
	})
	ctx := context.Background()
	if err := r.store.AppendSession(ctx, memory.SessionAppend{Namespace: cora, Key: "claim-7781",
		Entries: []memory.SessionEntry{{Role: llm.RoleUser, Content: "x", At: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	r.model.on(cora, templates.PromptContextNotFound, threading("Claim 7781", ""))
	root := r.send("", "U1", "Alice", cora+" claim 7781?")
	r.settle()
	if got := r.state(root.TS).Bindings[cora]; got != "claim-7781" {
		t.Errorf("bound to %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "session matched") || !strings.Contains(buf.String(), "match=fuzzy") {
		t.Errorf("the fuzzy match was not logged:\n%s", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestVisibleContentReachesTheSession(t *testing.T) {
	r := newRig(t)
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	root := r.send("", "U1", "Alice", cora+" claim C1?")
	r.settle()
	bot := agents.Event{ID: "EvB", Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS, BotID: "B1", UserName: "CI",
		Text: "C1 was reopened, " + cora, Raw: "C1 was reopened"}
	if err := handle(context.Background(), r.e, bot); err != nil {
		t.Fatal(err)
	}
	r.settle()
	entries, err := r.store.ReadSession(context.Background(), cora, "C1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Author+": "+e.Content)
	}
	want := "CI (person): C1 was reopened, " + cora
	if !slices.Contains(got, want) {
		t.Errorf("cora's session %q lacks the bot's message naming it", got)
	}
	if n := len(r.model.calls(cora, "")); n != 2 {
		t.Errorf("cora's model calls = %d; content must not trigger it", n)
	}
}

func TestBotUserIsNoMember(t *testing.T) {
	r := newRig(t)
	root := r.send("", "U1", "Alice", "hello")
	r.send(root.TS, "UBOT", "conclave", "a post by conclave's own user")
	r.settle()
	if got := lastUser(r.model.calls(elen, templates.PromptDefault)[0]); !strings.HasSuffix(got, "|members=Elen,Cora,Paul,Alice") ||
		!strings.Contains(got, "count=1|") {
		t.Errorf("conclave's own user is a member or a message: %q", got)
	}
}
