package agents_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
	"github.com/conclavehq/conclave/templates"
)

// The claims desk used across tests.
const (
	elen  = "elen.acme.137.protocol6022.eth"  // facilitator
	cora  = "cora.acme.137.protocol6022.eth"  // expert: claims
	paul  = "paul.acme.137.protocol6022.eth"  // expert: policies
	tina  = "tina.acme.137.protocol6022.eth"  // human agent
	twin  = "twin.acme.137.protocol6022.eth"  // clone of tina
	solo  = "solo.acme.137.protocol6022.eth"  // expert registered nowhere by default
	xavi  = "xavi.acme.137.protocol6022.eth"  // human agent registered nowhere by default
	ghost = "ghost.acme.137.protocol6022.eth" // no resolver knows it
	team  = "T1"
	chanA = "C1"
)

func testAgents() map[string]ens.Agent {
	mk := func(name, ensName string, role ens.Role) ens.Agent {
		return ens.Agent{Name: name, EnsDomain: ensName, Role: role, Owner: "0xOwner",
			Addresses: map[string]string{"evm": "0x1"}, Attributes: map[string]string{"role": string(role)}}
	}
	tw := mk("Tina's twin", twin, ens.RoleClone)
	tw.CloneOf = tina
	return map[string]ens.Agent{
		elen: mk("Elen", elen, ens.RoleFacilitator),
		cora: mk("Cora", cora, ens.RoleExpert),
		paul: mk("Paul", paul, ens.RoleExpert),
		tina: mk("Tina", tina, ens.RoleHuman),
		twin: tw,
		solo: mk("Solo", solo, ens.RoleExpert),
		xavi: mk("Xavi", xavi, ens.RoleHuman),
	}
}

// fakeResolver knows a fixed set of agents.
type fakeResolver struct{ agents map[string]ens.Agent }

func (r fakeResolver) Resolve(_ context.Context, name string) (ens.Agent, error) {
	if a, ok := r.agents[strings.ToLower(name)]; ok {
		return a, nil
	}
	return ens.Agent{}, fmt.Errorf("resolve %q: %w", name, ens.ErrNotFound)
}

// fakeChat is Slack as the engine sees it: posts get increasing ts.
type fakeChat struct {
	mu        sync.Mutex
	seq       int
	posts     []agents.Reply
	postTS    []string
	ephemeral []string // "channel user text"
	reactions map[string]map[string]bool
	history   []agents.Event
	// failPost makes the next PostReply calls fail; lostPost makes them
	// post and then fail (an uncertain outcome).
	failPost, lostPost int
	// historyLimit is the limit of the last ThreadHistory call.
	historyLimit int
	// afterFind, when set, runs once after FindPost has looked (and
	// before it answers), with no lock of the fake held.
	afterFind func()
	// beforePost, when set, runs before PostReply posts; an error fails
	// the call with nothing posted. afterPost runs once a reply is
	// posted, before PostReply answers.
	beforePost func() error
	afterPost  func()
	// reactionGate, when set, holds every reaction change until it is
	// closed; reactionLog lists the changes made, in order.
	reactionGate chan struct{}
	reactionLog  []string
}

func newFakeChat() *fakeChat { return &fakeChat{reactions: make(map[string]map[string]bool)} }

// PostReply posts r as one part.
func (f *fakeChat) PostReply(_ context.Context, r agents.Reply) ([]string, error) {
	if len(r.Posted) > 0 {
		return r.Posted, nil
	}
	if f.beforePost != nil {
		if err := f.beforePost(); err != nil {
			return nil, err
		}
	}
	if f.afterPost != nil {
		defer f.afterPost()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failPost > 0 {
		f.failPost--
		return nil, errors.New("slack is down")
	}
	f.seq++
	ts := fmt.Sprintf("1800000000.%06d", f.seq)
	f.posts = append(f.posts, r)
	f.postTS = append(f.postTS, ts)
	if f.lostPost > 0 {
		f.lostPost--
		return nil, errors.New("connection reset")
	}
	return []string{ts}, nil
}

func (f *fakeChat) PostEphemeral(_ context.Context, channel, user, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ephemeral = append(f.ephemeral, channel+" "+user+" "+text)
	return nil
}

func (f *fakeChat) AddReaction(_ context.Context, channel, ts, name string) error {
	f.waitGate()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reactions[ts] == nil {
		f.reactions[ts] = make(map[string]bool)
	}
	f.reactions[ts][name] = true
	f.reactionLog = append(f.reactionLog, "add "+ts+" "+name)
	return nil
}

func (f *fakeChat) RemoveReaction(_ context.Context, channel, ts, name string) error {
	f.waitGate()
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.reactions[ts], name)
	f.reactionLog = append(f.reactionLog, "remove "+ts+" "+name)
	return nil
}

func (f *fakeChat) waitGate() {
	f.mu.Lock()
	gate := f.reactionGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

// reactionChanges returns the reaction changes made so far.
func (f *fakeChat) reactionChanges() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reactionLog)
}

func (f *fakeChat) FindPost(_ context.Context, channel, threadTS, postID string) ([]string, error) {
	f.mu.Lock()
	var found []string
	for i, p := range f.posts {
		if p.TurnID == postID {
			found = []string{f.postTS[i]}
			break
		}
	}
	hook := f.afterFind
	f.afterFind = nil
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return found, nil
}

func (f *fakeChat) ThreadHistory(_ context.Context, channel, threadTS string, limit int) ([]agents.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.historyLimit = limit
	return slices.Clone(f.history), nil
}

func (f *fakeChat) ChannelDescription(context.Context, string) (string, error) {
	return "Claims desk", nil
}

// texts returns the posted texts, in order.
func (f *fakeChat) texts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, p := range f.posts {
		out = append(out, p.Username+": "+p.Text)
	}
	return out
}

func (f *fakeChat) reacted(ts, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reactions[ts][name]
}

// anyReaction reports whether some message still carries name.
func (f *fakeChat) anyReaction(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reactions {
		if r[name] {
			return true
		}
	}
	return false
}

// fakeModel answers from per-agent, per-prompt scripts and records every
// request. An agent with no script left answers "<Name-less agent> ok".
type fakeModel struct {
	mu       sync.Mutex
	scripts  map[string][]any // agent|prompt → string, llm.Response or error
	fallback func(r llm.Request) (llm.Response, error)
	// hook, when set, sees every request first (a turn in progress).
	hook     func(r llm.Request)
	requests []llm.Request
	profiles map[string]llm.Profile
}

func newFakeModel() *fakeModel {
	return &fakeModel{scripts: make(map[string][]any), profiles: map[string]llm.Profile{"": {Name: ""}, "cheap": {Name: "cheap"}}}
}

// on queues answers for an agent's prompt.
func (m *fakeModel) on(agent, prompt string, answers ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scripts[agent+"|"+prompt] = append(m.scripts[agent+"|"+prompt], answers...)
}

func (m *fakeModel) Profile(name string) (llm.Profile, error) {
	if p, ok := m.profiles[name]; ok {
		return p, nil
	}
	return llm.Profile{}, fmt.Errorf("%w %q", llm.ErrUnknownProfile, name)
}

func (m *fakeModel) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	m.mu.Lock()
	m.requests = append(m.requests, r)
	key := r.Agent + "|" + r.Prompt
	var answer any
	if q := m.scripts[key]; len(q) > 0 {
		answer, m.scripts[key] = q[0], q[1:]
	}
	fallback, hook := m.fallback, m.hook
	m.mu.Unlock()
	if hook != nil {
		hook(r)
		if err := ctx.Err(); err != nil {
			return llm.Response{}, err // the turn was stopped meanwhile, as a real call would be
		}
	}
	switch a := answer.(type) {
	case string:
		return llm.Response{Content: a, FinishReason: "stop", PromptTokens: 10, CompletionTokens: 5}, nil
	case llm.Response:
		return a, nil
	case error:
		return llm.Response{}, a
	}
	if fallback != nil {
		return fallback(r)
	}
	if r.Prompt == templates.PromptContextNotFound {
		return llm.Response{Content: `{"session": "", "message": ""}`}, nil
	}
	return llm.Response{Content: agents.FirstLabel(r.Agent) + " ok", FinishReason: "stop"}, nil
}

// calls returns the requests made for an agent's prompt.
func (m *fakeModel) calls(agent, prompt string) []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []llm.Request
	for _, r := range m.requests {
		if (agent == "" || r.Agent == agent) && (prompt == "" || r.Prompt == prompt) {
			out = append(out, r)
		}
	}
	return out
}

// fakePrompts renders prompts as one line that shows the fields a test
// asserts on.
type fakePrompts struct {
	fail map[string]error // by agent
	// record, when set, sees the data of every phase prompt rendered.
	record func(agentENS, prompt string, d templates.Data)
}

func (p fakePrompts) Render(agentENS, role, prompt string, d templates.Data) (string, error) {
	if err := p.fail[agentENS]; err != nil {
		return "", err
	}
	if p.record != nil && prompt != templates.PromptSystem {
		p.record(agentENS, prompt, d)
	}
	if prompt == templates.PromptSystem {
		return "system of " + agentENS, nil
	}
	var members []string
	for _, m := range d.ChannelMembers {
		members = append(members, m.Name())
	}
	return fmt.Sprintf("%s|count=%d|session=%s|initial=%s|latest=%s|members=%s",
		prompt, d.ConversationMessageCount, d.MemorySessionId, d.InitialRequest.Content, d.LatestRequest.Content,
		strings.Join(members, ",")), nil
}

func (fakePrompts) Settings(agentENS, role, prompt string) (templates.Settings, error) {
	return templates.Settings{}, nil
}

// rig is an engine on the in-process store with fakes around it.
type rig struct {
	t      testing.TB
	store  testStore
	chat   *fakeChat
	model  *fakeModel
	clock  *testclock.Clock
	agents map[string]ens.Agent
	opts   agents.Options
	logger *slog.Logger // nil: discard
	e      *agents.Engine
	seq    int
}

func newRig(t testing.TB, configure ...func(*rig)) *rig {
	t.Helper()
	clock := testclock.New(time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC))
	r := &rig{
		t:      t,
		store:  memory.NewInProcess(memory.Options{Now: clock.Now}),
		chat:   newFakeChat(),
		model:  newFakeModel(),
		clock:  clock,
		agents: testAgents(),
		opts: agents.Options{
			Timeout:   10 * time.Minute,
			Channels:  []agents.ChannelConfig{{ID: chanA, Agents: []string{elen, cora, paul}}},
			BotUserID: "UBOT",
		},
	}
	var prompts agents.Prompts = fakePrompts{}
	for _, f := range configure {
		f(r)
	}
	if r.e == nil {
		r.e = r.engine(prompts)
	}
	t.Cleanup(func() { r.store.Close() })
	return r
}

// runEngine runs e until the test ends.
func runEngine(t *testing.T, e *agents.Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := receive(t, ran, "Run did not return once its context ended"); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// receive takes a value from ch, failing the test with what when none
// comes within a minute: a stalled engine fails the test, naming what it
// did not do, instead of hanging it.
func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s (waited a minute)", what)
	}
	var zero T
	return zero
}

// waitAll waits for wg as receive waits for a value.
func waitAll(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	receive(t, done, what)
}

// engine builds an engine over the rig's parts with prompts p; each change
// adjusts its collaborators (another view of the store, another model, a
// turn report hook).
func (r *rig) engine(p agents.Prompts, change ...func(*agents.Deps)) *agents.Engine {
	d := agents.Deps{
		Chat:     r.chat,
		Model:    r.model,
		Prompts:  func() agents.Prompts { return p },
		Resolver: fakeResolver{r.agents},
		Logger:   r.logger,
		Now:      r.clock.Now,
	}
	withPorts(&d, r.store)
	for _, f := range change {
		f(&d)
	}
	return agents.New(r.opts, d)
}

// onStore makes an engine use store for each of its ports on the store.
func onStore(store storePorts) func(*agents.Deps) {
	return func(d *agents.Deps) { withPorts(d, store) }
}

// withPorts passes store as each of the engine's ports on the store.
func withPorts(d *agents.Deps, store storePorts) {
	d.Inbound, d.Conversations, d.Locks = store, store, store
	d.Sessions, d.Registry, d.Pairings = store, store, store
}

// reportTo makes an engine send every turn's report to reports.
func reportTo(reports chan<- agents.TurnReport) func(*agents.Deps) {
	return func(d *agents.Deps) { d.OnTurn = func(tr agents.TurnReport) { reports <- tr } }
}

// withBuiltinTemplates uses the prompts shipped in the binary.
func withBuiltinTemplates(r *rig) {
	lib, err := templates.Open("", templates.Options{Clock: r.clock.Now})
	if err != nil {
		r.t.Fatal(err)
	}
	r.e = r.engine(lib.Current())
}

// withRedis puts the rig on a real Redis (its own key prefix).
func withRedis(r *rig) {
	r.store = redistest.New(r.t).Store(r.t, memory.Options{Now: r.clock.Now})
}

// pair pairs a Slack user with a human agent.
func (r *rig) pair(user, agent string) {
	r.t.Helper()
	if _, _, err := r.store.PairHuman(context.Background(), user, agent); err != nil {
		r.t.Fatal(err)
	}
}

// nextTS returns a fresh Slack ts, later than every earlier one.
func (r *rig) nextTS() string {
	r.seq++
	r.clock.Advance(time.Second)
	return fmt.Sprintf("1700000000.%06d", r.seq*100)
}

// testStore is the store the tests arrange their fixtures in: the
// engine's port, and the writes and reads a fixture or a check needs.
type testStore interface {
	storePorts
	agents.TraceLog
	memory.UsageLog
	AcquireLock(ctx context.Context, convID string, ttl time.Duration) (memory.Lock, error)
	PendingPosts(ctx context.Context) (int, error)
	AppendSession(ctx context.Context, a memory.SessionAppend) error
	PairHuman(ctx context.Context, userID, ens string) (prevAgent, prevUser string, err error)
	LinkWallet(ctx context.Context, userID, address string) error
	Close() error
}

// handle records ev and dispatches its ticket at once, as a transport
// with nothing to acknowledge does.
func handle(ctx context.Context, e *agents.Engine, ev agents.Event) error {
	t, err := e.Record(ctx, ev)
	t.Dispatch()
	return err
}

// send records a message event: thread "" is a new top-level message.
func (r *rig) send(thread, user, name, text string) agents.Event {
	r.t.Helper()
	ev := agents.Event{ID: "Ev" + fmt.Sprint(r.seq+1), Kind: agents.EventMessage, Team: team, Channel: chanA, TS: r.nextTS(),
		ThreadTS: thread, UserID: user, UserName: name, Raw: text, Text: text, At: r.clock.Now()}
	if err := handle(context.Background(), r.e, ev); err != nil {
		r.t.Fatalf("Record: %v", err)
	}
	return ev
}

// settle runs the due work until there is none, synchronously.
func (r *rig) settle() {
	r.t.Helper()
	settleEngines(r.t, r.store, r.clock, r.e)
}

func settleEngines(t testing.TB, store storePorts, clock *testclock.Clock, engines ...*agents.Engine) {
	t.Helper()
	ctx := context.Background()
	for range 500 {
		ids, err := store.Due(ctx, clock.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			for _, e := range engines {
				e.WaitReactions()
			}
			return
		}
		for i, id := range ids {
			engines[i%len(engines)].Process(ctx, id, "")
		}
	}
	t.Fatal("the engine did not settle")
}

// reacted reports whether a message carries an emoji once the engine's
// reaction changes queued so far are applied.
func (r *rig) reacted(ts, name string) bool {
	r.t.Helper()
	r.e.WaitReactions()
	return r.chat.reacted(ts, name)
}

// state reads a conversation's engine state.
func (r *rig) state(thread string) *agents.ConvState {
	r.t.Helper()
	snap, err := r.store.Snapshot(context.Background(), agents.ConversationID(team, chanA, thread))
	if err != nil {
		r.t.Fatal(err)
	}
	st, err := agents.DecodeState(snap.Conversation.State)
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

// messages reads a conversation's stored messages.
func (r *rig) messages(thread string) []memory.Message {
	r.t.Helper()
	snap, err := r.store.Snapshot(context.Background(), agents.ConversationID(team, chanA, thread))
	if err != nil {
		r.t.Fatal(err)
	}
	return snap.Messages
}

// lastUser returns the final user message of a request (the phase prompt).
func lastUser(r llm.Request) string { return r.Messages[len(r.Messages)-1].Content }

// contents lists a request's message contents, "role: content".
func contents(r llm.Request) []string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.Role+": "+m.Content)
	}
	return out
}

func threading(session, message string) string {
	return fmt.Sprintf(`{"session": %q, "message": %q}`, session, message)
}
