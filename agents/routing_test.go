package agents_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

func TestRecordIgnores(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	other := agents.Event{ID: "Ev1", Team: team, Channel: "C-unregistered", TS: r.nextTS(), UserID: "U1", Text: "hello " + cora}
	if err := handle(ctx, r.e, other); err != nil {
		t.Fatal(err)
	}
	unknownThread := agents.Event{ID: "Ev2", Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: "1600000000.000100", UserID: "U1", Text: "just chatting"}
	if err := handle(ctx, r.e, unknownThread); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{agents.ConversationID(team, "C-unregistered", other.TS), agents.ConversationID(team, chanA, unknownThread.ThreadTS)} {
		snap, err := r.store.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Exists {
			t.Errorf("conversation %s stored", id)
		}
	}
	r.settle()
	if n := len(r.model.calls("", "")); n != 0 {
		t.Errorf("%d model calls", n)
	}
}

func TestAdoptUnknownThread(t *testing.T) {
	r := newRig(t)
	old := "1600000000.000100"
	r.chat.history = []agents.Event{
		{TS: old, UserID: "U1", UserName: "Alice", Text: "Old question about claim C8"},
		{TS: "1600000001.000100", ThreadTS: old, UserID: "U2", UserName: "Bob", Text: "Old answer"},
	}
	r.send(old, "U1", "Alice", cora+" can you look at this thread?")
	r.settle()
	if n := len(r.model.calls(cora, templates.PromptContextNotFound)); n != 1 {
		t.Fatalf("cora turns = %d, want 1", n)
	}
	fac := r.model.calls(elen, templates.PromptDefault)
	if len(fac) != 1 {
		t.Fatalf("facilitator turns = %d, want 1", len(fac))
	}
	if indexOf(fac[0], "Alice (person): Old question about claim C8") < 0 || indexOf(fac[0], "Bob (person): Old answer") < 0 {
		t.Errorf("adopted history missing:\n%s", strings.Join(contents(fac[0]), "\n"))
	}
	people := 0
	for _, m := range r.messages(old) {
		if m.Kind == agents.KindPerson {
			people++
		}
	}
	if people != 3 {
		t.Errorf("stored messages of people = %d, want 3", people)
	}
}

func TestStartPolicies(t *testing.T) {
	tests := []struct {
		name     string
		channel  agents.ChannelConfig
		text     string
		botID    string
		wantTurn []string // agents that take a turn, in order
	}{
		{name: "all: plain message", channel: agents.ChannelConfig{ID: chanA, Agents: []string{elen, cora}}, text: "hello", wantTurn: []string{elen}},
		{name: "all: root naming an expert", channel: agents.ChannelConfig{ID: chanA, Agents: []string{elen, cora}}, text: cora + " hello", wantTurn: []string{cora, elen}},
		{name: "mention: plain message", channel: agents.ChannelConfig{ID: chanA, Agents: []string{elen, cora}, Start: agents.StartMention}, text: "hello"},
		{name: "mention: naming the facilitator", channel: agents.ChannelConfig{ID: chanA, Agents: []string{elen, cora}, Start: agents.StartMention}, text: elen + " hello", wantTurn: []string{elen}},
		{name: "no facilitator: plain message", channel: agents.ChannelConfig{ID: chanA, Agents: []string{cora}}, text: "hello"},
		{name: "no facilitator: naming an expert", channel: agents.ChannelConfig{ID: chanA, Agents: []string{cora}}, text: cora + " hello", wantTurn: []string{cora}},
		{name: "another app's bot", channel: agents.ChannelConfig{ID: chanA, Agents: []string{elen, cora}}, text: cora + " hello", botID: "B1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, func(r *rig) { r.opts.Channels = []agents.ChannelConfig{tt.channel} })
			ev := agents.Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", BotID: tt.botID, UserName: "Alice", Text: tt.text}
			if err := handle(context.Background(), r.e, ev); err != nil {
				t.Fatal(err)
			}
			r.settle()
			var got []string
			for _, c := range r.model.calls("", "") {
				got = append(got, c.Agent)
			}
			if strings.Join(got, ",") != strings.Join(tt.wantTurn, ",") {
				t.Errorf("turns %q, want %q", got, tt.wantTurn)
			}
		})
	}
}

func TestNoFacilitatorConcludesSilently(t *testing.T) {
	r := newRig(t, func(r *rig) { r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{cora}}} })
	root := r.send("", "U1", "Alice", cora+" hello")
	r.settle()
	r.clock.Advance(10 * time.Minute)
	r.settle()
	if st := r.state(root.TS); st.Status != agents.StatusConcluded {
		t.Errorf("status %q", st.Status)
	}
	if r.chat.reacted(root.TS, "white_check_mark") || len(r.model.calls("", templates.PromptConclude)) != 0 {
		t.Error("a conversation without facilitator did not conclude silently")
	}
}

func TestBotMessagesAreContentOnly(t *testing.T) {
	r := newRig(t)
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	bot := agents.Event{ID: "EvB", Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS, BotID: "B1", UserName: "CI bot", Text: "build failed, " + cora}
	if err := handle(context.Background(), r.e, bot); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if n := len(r.model.calls("", "")); n != 1 {
		t.Fatalf("model calls = %d; a bot message triggered or woke someone", n)
	}
	r.send(root.TS, "U1", "Alice", "and now?")
	r.settle()
	fac := r.model.calls(elen, templates.PromptDefault)
	if len(fac) != 2 || indexOf(fac[1], "CI bot (person): build failed") < 0 {
		t.Errorf("the bot message is not content of the facilitator's history")
	}
}

func TestEditsAndDeletes(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	root := r.send("", "U1", "Alice", "hello")
	r.settle()
	typo := r.send(root.TS, "U1", "Alice", "the claim is C1O")
	deleted := r.send(root.TS, "U1", "Alice", "secret password")
	r.settle()
	edit := typo
	edit.Kind, edit.ID, edit.Text, edit.Raw = agents.EventEdited, "EvEdit", "the claim is C10 "+cora, "the claim is C10 "+cora
	if err := handle(ctx, r.e, edit); err != nil {
		t.Fatal(err)
	}
	del := deleted
	del.Kind, del.ID = agents.EventDeleted, "EvDel"
	if err := handle(ctx, r.e, del); err != nil {
		t.Fatal(err)
	}
	unknown := agents.Event{Kind: agents.EventEdited, Team: team, Channel: chanA, TS: "1.000001", ThreadTS: root.TS, Text: "x"}
	if err := handle(ctx, r.e, unknown); err != nil {
		t.Errorf("edit of an unknown message: %v", err)
	}
	r.settle()
	if n := len(r.model.calls(cora, "")); n != 0 {
		t.Errorf("an edit triggered %d turns", n)
	}
	r.send(root.TS, "U1", "Alice", "so?")
	r.settle()
	fac := r.model.calls(elen, templates.PromptDefault)
	last := fac[len(fac)-1]
	if indexOf(last, "the claim is C10") < 0 || indexOf(last, "secret password") >= 0 || indexOf(last, "C1O") >= 0 {
		t.Errorf("history after edit and delete:\n%s", strings.Join(contents(last), "\n"))
	}
}

func TestHugeAndHostileMessages(t *testing.T) {
	r := newRig(t, withBuiltinTemplates)
	huge := strings.Repeat("word ", 8000) // 40,000 characters
	r.send("", "U1", "Alice", huge)
	r.settle()
	root := r.chat.posts
	if len(root) != 1 {
		t.Fatalf("posts %d", len(root))
	}
	hostile := "{{.ConversationId}} {{template \"x\"}} \x00\x07 line\u2028sep " + cora
	r2 := newRig(t, withBuiltinTemplates)
	r2.send("", "U1", "Alice", hostile)
	r2.settle()
	for _, req := range r.model.calls(elen, "") {
		history := req.Messages[1 : len(req.Messages)-1]
		for _, m := range history {
			if n := len([]rune(m.Content)); n > 12000+len([]rune(agents.TruncatedMark))+len("Alice (person): ") {
				t.Errorf("a %s history message of %d runes was sent", m.Role, n)
			}
		}
		if n := len([]rune(lastUser(req))); n > 2*(12000+len([]rune(agents.TruncatedMark)))+2000 {
			t.Errorf("a phase prompt of %d runes: the request fields are not capped", n)
		}
	}
	found := false
	for _, req := range r2.model.calls(cora, "") {
		if indexOf(req, "{{.ConversationId}} {{template \"x\"}}") >= 0 {
			found = true
		}
	}
	if !found {
		t.Error("template syntax in a message was not passed as data")
	}
}

func TestBuildRequestBudget(t *testing.T) {
	msg := func(role, s string) agents.HistoryMessage { return agents.HistoryMessage{Role: role, Content: s} }
	word := strings.Repeat("a", 40) // 10 + 4 = 14 tokens
	fixed := fixedPrompts{system: "S", phase: "P"}
	base := agents.TurnPrompt{
		Agent:  ens.Agent{Name: "Cora", EnsDomain: cora, Role: ens.RoleExpert},
		Prompt: templates.PromptContextFound,
		History: []agents.HistoryMessage{
			msg(llm.RoleAssistant, "session-1 "+word), msg(llm.RoleUser, "session-2 "+word),
			msg(llm.RoleUser, "thread-1 "+word), msg(llm.RoleUser, "thread-2 "+word),
		},
	}
	tokens := func(s string) int { return agents.EstimateTokens(s) }
	keepTwo := tokens("S") + tokens("P") + tokens("thread-1 "+word) + tokens("thread-2 "+word)
	tests := []struct {
		name     string
		budget   int
		settings templates.Settings
		want     []string
		over     bool
	}{
		{name: "all fit", budget: 1000, want: []string{"S", "session-1", "session-2", "thread-1", "thread-2", "P"}},
		{name: "oldest dropped, sessions first", budget: keepTwo, want: []string{"S", "thread-1", "thread-2", "P"}},
		{name: "one short", budget: keepTwo - 1, want: []string{"S", "thread-2", "P"}},
		{name: "prompts alone over budget", budget: 9, want: []string{"S", "P"}, over: true},
		{name: "settings budget wins", budget: 1000, settings: templates.Settings{MaxInputTokens: keepTwo}, want: []string{"S", "thread-1", "thread-2", "P"}},
		{name: "no history", budget: 1000, settings: templates.Settings{IncludeHistory: new(bool)}, want: []string{"S", "P"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base
			p.MaxInputTokens = tt.budget
			f := fixed
			f.settings = tt.settings
			req, info, err := agents.BuildRequest(f, newFakeModel(), p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range req.Messages {
				first, _, _ := strings.Cut(m.Content, " ")
				got = append(got, first)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("messages %q, want %q", got, tt.want)
			}
			if info.OverBudget != tt.over || tt.over && len(info.Warnings) == 0 {
				t.Errorf("over budget %v (warnings %q), want %v", info.OverBudget, info.Warnings, tt.over)
			}
			if req.Messages[0].Role != llm.RoleSystem || req.Messages[len(req.Messages)-1] != (llm.Message{Role: llm.RoleUser, Content: "P"}) {
				t.Errorf("request is not system … phase: %q", contents(req))
			}
		})
	}
	t.Run("message cap", func(t *testing.T) {
		p := base
		p.History = []agents.HistoryMessage{msg(llm.RoleUser, strings.Repeat("é", 40000))}
		p.MaxMessageChars = 12000
		p.MaxInputTokens = 100000
		req, _, err := agents.BuildRequest(fixed, newFakeModel(), p)
		if err != nil {
			t.Fatal(err)
		}
		if got := req.Messages[1].Content; got != strings.Repeat("é", 12000)+agents.TruncatedMark {
			t.Errorf("capped to %d runes", len([]rune(got)))
		}
	})
}

func TestProfilePrecedence(t *testing.T) {
	tests := []struct {
		name                   string
		settings, config, attr string
		attrKey                string // "llm_profile" when empty
		want                   string
		wantErr, wantWarn      bool
	}{
		{name: "default", want: ""},
		{name: "attribute in another case", attr: "cheap", attrKey: "LLM_Profile", want: "cheap"},
		{name: "settings", settings: "cheap", config: "nope", attr: "nope", want: "cheap"},
		{name: "unknown in settings", settings: "nope", wantErr: true},
		{name: "config", config: "cheap", attr: "nope", want: "cheap"},
		{name: "unknown in config", config: "nope", wantErr: true},
		{name: "attribute", attr: "cheap", want: "cheap"},
		{name: "unknown attribute falls back", attr: "nope", want: "", wantWarn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := agents.TurnPrompt{
				Agent:        ens.Agent{Name: "Cora", EnsDomain: cora, Role: ens.RoleExpert, Attributes: map[string]string{cmp.Or(tt.attrKey, "llm_profile"): tt.attr}},
				Prompt:       templates.PromptContextFound,
				AgentProfile: tt.config,
			}
			req, info, err := agents.BuildRequest(fixedPrompts{system: "S", phase: "P", settings: templates.Settings{LLMProfile: tt.settings}}, newFakeModel(), p)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tt.wantErr {
				if !errors.Is(err, llm.ErrUnknownProfile) || !strings.Contains(err.Error(), "nope") {
					t.Errorf("error %v does not name the profile", err)
				}
				return
			}
			if req.Profile != tt.want || (len(info.Warnings) > 0) != tt.wantWarn {
				t.Errorf("profile %q (warnings %q), want %q", req.Profile, info.Warnings, tt.want)
			}
		})
	}
}

// fixedPrompts renders fixed texts.
type fixedPrompts struct {
	system, phase string
	settings      templates.Settings
}

func (f fixedPrompts) Render(_, _, prompt string, _ templates.Data) (string, error) {
	if prompt == templates.PromptSystem {
		return f.system, nil
	}
	return f.phase, nil
}

func (f fixedPrompts) Settings(_, _, _ string) (templates.Settings, error) { return f.settings, nil }

// TestReplicas runs two engines on one store, each handling every event
// (as two replicas would after a reconnect), and checks each trigger is
// answered exactly once, on the in-process store and on Redis.
func TestReplicas(t *testing.T) {
	tests := []struct {
		name  string
		store func(t *testing.T, r *rig) testStore
	}{
		{name: "in-process", store: func(t *testing.T, r *rig) testStore { return r.store }},
		{name: "redis", store: func(t *testing.T, r *rig) testStore { withRedis(r); return r.store }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.store = tt.store(t, r)
			testReplicas(t, r)
		})
	}
}

func testReplicas(t *testing.T, r *rig) {
	var mu sync.Mutex
	turns := 0
	done := make(chan struct{})
	const threads = 6
	onTurn := func(agents.TurnReport) {
		mu.Lock()
		defer mu.Unlock()
		turns++
		if turns == threads {
			close(done)
		}
	}
	engines := make([]*agents.Engine, 2)
	for i := range engines {
		r.opts.SweepInterval = 5 * time.Millisecond
		engines[i] = r.engine(fakePrompts{}, func(d *agents.Deps) { d.OnTurn = onTurn })
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	for i := range threads {
		ev := agents.Event{ID: "Ev" + r.nextTS(), Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "question"}
		for j := range engines {
			if err := handle(ctx, engines[(i+j)%2], ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the replicas did not answer every thread")
	}
	cancel()
	waitAll(t, &wg, "the replicas' Run did not return once their context ended")
	settleEngines(t, r.store, r.clock, engines...)
	posts := r.chat.texts()
	if len(posts) != threads {
		t.Errorf("%d posts for %d threads", len(posts), threads)
	}
	seen := map[string]bool{}
	for _, p := range r.chat.posts {
		if seen[p.ThreadTS] {
			t.Errorf("thread %s answered twice", p.ThreadTS)
		}
		seen[p.ThreadTS] = true
	}
}

// blockingModel answers only when its context ends.
type blockingModel struct {
	*fakeModel
	started chan struct{}
}

func (m blockingModel) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	close(m.started)
	<-ctx.Done()
	return llm.Response{}, ctx.Err()
}

func TestRunShutdownLeavesUnfinishedTurnsQueued(t *testing.T) {
	r := newRig(t)
	model := blockingModel{fakeModel: r.model, started: make(chan struct{})}
	r.opts.ShutdownGrace = time.Millisecond
	r.opts.SweepInterval = 5 * time.Millisecond
	reports := make(chan agents.TurnReport, 1)
	e := r.engine(fakePrompts{}, reportTo(reports), func(d *agents.Deps) { d.Model = model })
	ev := agents.Event{ID: "Ev1", Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "hello"}
	ctx, cancel := context.WithCancel(context.Background())
	if err := handle(ctx, e, ev); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error)
	go func() { ran <- e.Run(ctx) }()
	receive(t, model.started, "the turn never called the model")
	cancel()
	if err := receive(t, ran, "Run did not return once its context ended"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if tr := receive(t, reports, "the cancelled turn was not reported"); tr.Outcome != "cancelled" {
		t.Errorf("the cancelled turn was reported %q", tr.Outcome)
	}
	if len(r.chat.texts()) != 0 {
		t.Error("a cancelled turn posted")
	}
	if !r.chat.reacted(ev.TS, "hourglass_flowing_sand") {
		t.Error("the message lost its working reaction while its turn is still due")
	}
	// Another replica picks the work up.
	r.settle()
	if got := r.chat.texts(); len(got) != 1 {
		t.Errorf("posts after takeover %q, want one", got)
	}
	if r.chat.anyReaction("hourglass_flowing_sand") {
		t.Error("a working reaction was left behind")
	}
	if _, err := r.store.AcquireLock(context.Background(), agents.ConversationID(team, chanA, ev.TS), time.Second); err != nil {
		t.Errorf("lock not released: %v", err)
	}
}

func TestFixturePrompt(t *testing.T) {
	lib, err := templates.Open("", templates.Options{Clock: func() time.Time { return time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	f := templates.BuiltinFixture()
	if len(f.Data.ChannelMembers) == 0 {
		t.Fatal("built-in fixture has no members")
	}
	self, ok := f.Data.ChannelMembers[0].AgentInfo()
	if !ok {
		t.Fatal("the fixture's first member is not an agent")
	}
	a := ens.Agent{Name: self.Name, EnsDomain: self.EnsDomain, Role: ens.RoleExpert, Attributes: self.Attributes}
	p := agents.FixturePrompt(a, templates.PromptContextFound, f)
	if len(p.History) != len(f.Messages)+len(f.SessionHistory) {
		t.Errorf("history %d, want %d", len(p.History), len(f.Messages)+len(f.SessionHistory))
	}
	req, _, err := agents.BuildRequest(lib.Current(), newFakeModel(), p)
	if err != nil {
		t.Fatal(err)
	}
	if req.Messages[0].Role != llm.RoleSystem || req.Messages[len(req.Messages)-1].Role != llm.RoleUser || req.Prompt != templates.PromptContextFound {
		t.Errorf("request %q", contents(req))
	}
}

func TestChannelRegistry(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{cora, "ELEN.acme.137.6022.eth"}}}
	})
	r.agents["rex.acme.137.protocol6022.eth"] = ens.Agent{Name: "Rex", EnsDomain: "rex.acme.137.protocol6022.eth", Role: ens.RoleFacilitator}
	ctx := context.Background()
	steps := []struct {
		name    string
		do      func() error
		wantErr error
	}{
		{"add", func() error { _, err := r.e.AddAgent(ctx, chanA, "@Solo.acme.137.6022.eth"); return err }, nil},
		{"add again", func() error { _, err := r.e.AddAgent(ctx, chanA, solo); return err }, agents.ErrAgentPresent},
		{"add a static one", func() error { _, err := r.e.AddAgent(ctx, chanA, elen); return err }, agents.ErrAgentPresent},
		{"second facilitator", func() error { _, err := r.e.AddAgent(ctx, chanA, "rex.acme.137.protocol6022.eth"); return err }, agents.ErrSecondFacilitator},
		{"unknown", func() error { _, err := r.e.AddAgent(ctx, chanA, "nobody.acme.137.protocol6022.eth"); return err }, ens.ErrNotFound},
		{"add twin", func() error { _, err := r.e.AddAgent(ctx, chanA, twin); return err }, nil},
		{"remove static", func() error { return r.e.RemoveAgent(ctx, chanA, cora) }, agents.ErrStaticAgent},
		{"remove twin", func() error { return r.e.RemoveAgent(ctx, chanA, twin) }, nil},
		{"remove absent", func() error { return r.e.RemoveAgent(ctx, chanA, twin) }, agents.ErrAgentAbsent},
	}
	for _, s := range steps {
		if err := s.do(); !errors.Is(err, s.wantErr) {
			t.Errorf("%s: err = %v, want %v", s.name, err, s.wantErr)
		}
	}
	list, err := r.e.ChannelAgents(ctx, chanA)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range list {
		got = append(got, fmt.Sprintf("%s static=%v", a.Agent.EnsDomain, a.Static))
	}
	want := []string{elen + " static=true", cora + " static=true", solo + " static=false"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("list:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The agent added at run time is served.
	r.send("", "U1", "Alice", solo+" hello")
	r.settle()
	if n := len(r.model.calls(solo, "")); n != 1 {
		t.Errorf("the added agent took %d turns, want 1", n)
	}
}

func TestChannelSessionScope(t *testing.T) {
	r := newRig(t, func(r *rig) { r.opts.SessionScope = agents.ScopeChannel })
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.send("", "U1", "Alice", cora+" claim C1")
	r.settle()
	ctx := context.Background()
	scoped, err := r.store.Sessions(ctx, cora+"#"+chanA)
	if err != nil {
		t.Fatal(err)
	}
	global, err := r.store.Sessions(ctx, cora)
	if err != nil {
		t.Fatal(err)
	}
	if len(scoped) != 1 || scoped[0] != "C1" || len(global) != 0 {
		t.Errorf("channel-scoped sessions %q, agent-wide %q", scoped, global)
	}
}
