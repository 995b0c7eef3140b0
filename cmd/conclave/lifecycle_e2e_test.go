package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// The lifecycle tests drive the rules of docs/conversations.md (SPEC §3
// and §11) through the real `conclave run` wiring, the fake Slack, the
// fake model and Redis: a clone reading its human's history, the
// inactivity conclusion, a restart, notices for unknown names, the loop
// guards and the threading retry.

const (
	hugobotENS = "hugobot.acme.137.protocol6022.eth"
	ghostENS   = "ghost.acme.137.protocol6022.eth"
	hugoUser   = "U0003" // the Slack user paired with Hugo
)

// threadingReminderLine is the user line of the threading retry, as
// docs/conversations.md words it.
const threadingReminderLine = `Your reply was not a valid JSON object. Reply with only {"session": "<key or empty>", "message": "<text to post or empty>"}.`

// castModel answers each request by the agent it is for and its phase,
// read from the request the way a model would see it: the agent from the
// start of the system prompt (one of names), the phase from the final
// message; besides the phases phaseOf knows, it tells a clone's default
// prompt and the threading retry apart.
type castModel struct {
	names   []string
	mu      sync.Mutex
	answers map[string][]string // "agent/phase" → answers in order
	calls   []string            // "agent/phase" of every request, in order
}

func newCast(answers map[string][]string, names ...string) *castModel {
	return &castModel{names: names, answers: answers}
}

func (m *castModel) keyOf(req llmfake.Request) string {
	agent := "?"
	if len(req.Messages) == 0 {
		return agent + "/?"
	}
	for _, name := range m.names {
		if strings.HasPrefix(req.Messages[0].Content, "You are "+name+" ") {
			agent = name
		}
	}
	last := req.Messages[len(req.Messages)-1].Content
	switch {
	case last == threadingReminderLine:
		return agent + "/retry"
	case strings.Contains(last, "Answer it as the person would"):
		return agent + "/default"
	}
	return agent + "/" + phaseOf(req)
}

func (m *castModel) reply(req llmfake.Request) llmfake.Reply {
	key := m.keyOf(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, key)
	if len(m.answers[key]) == 0 {
		return llmfake.Error(400, "no scripted answer for "+key)
	}
	next := m.answers[key][0]
	m.answers[key] = m.answers[key][1:]
	return llmfake.Text(next)
}

func (m *castModel) callLog() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// checkCalls compares the model calls made with want.
func checkCalls(t *testing.T, m *castModel, want ...string) {
	t.Helper()
	if got := m.callLog(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("model calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// postLines lists every post as "<username>: <text>".
func postLines(s *fakeslack.Server) []string {
	var out []string
	for _, p := range s.Posts() {
		out = append(out, p.Username+": "+p.Text)
	}
	return out
}

// checkPosts compares the posts with want, each "<username>: <text>"; a
// want line that is a *regexp.Regexp is matched instead.
func checkPosts(t *testing.T, s *fakeslack.Server, want ...any) {
	t.Helper()
	got := postLines(s)
	ok := len(got) == len(want)
	lines := make([]string, len(want))
	for i, w := range want {
		lines[i] = fmt.Sprint(w)
		switch w := w.(type) {
		case string:
			ok = ok && got[i] == w
		case *regexp.Regexp:
			ok = ok && w.MatchString(got[i])
		}
	}
	if !ok {
		t.Errorf("posts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(lines, "\n"))
	}
}

// history lists a request's messages between the system prompt and the
// phase prompt as "<role>: <content>".
func history(req llmfake.Request) []string {
	var out []string
	for _, m := range req.Messages[1 : len(req.Messages)-1] {
		out = append(out, m.Role+": "+m.Content)
	}
	return out
}

func checkHistory(t *testing.T, what string, req llmfake.Request, want ...string) {
	t.Helper()
	if got := history(req); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s history:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// lastPrompt is the phase prompt of a request.
func lastPrompt(req llmfake.Request) string { return req.Messages[len(req.Messages)-1].Content }

// waitPosts waits until n messages were posted in all.
func (r *rig) waitPosts(t *testing.T, p *process, n int) {
	t.Helper()
	if _, err := r.slack.WaitPosts(waitCtx(t), n); err != nil {
		t.Fatalf("%v\nposts: %q\n%s", err, postLines(r.slack), p.logs)
	}
}

// waitDone waits until the root of a thread carries ✅ (concluded), or
// no longer does.
func (r *rig) waitDone(t *testing.T, p *process, root string, done bool) {
	t.Helper()
	ctx := waitCtx(t)
	if done {
		if err := waitReaction(ctx, r.slack, testChannel, root, "white_check_mark"); err != nil {
			t.Fatalf("%v\n%s", err, p.logs)
		}
		return
	}
	for slices.Contains(r.slack.Reactions(testChannel, root), "white_check_mark") {
		select {
		case <-ctx.Done():
			t.Fatalf("✅ still on %s\n%s", root, p.logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// storedState is the part of the engine's state of a conversation (JSON
// in memory.Conversation.State, see "State" in docs/conversations.md)
// these tests read.
type storedState struct {
	Status string          `json:"status"`
	Routed map[string]bool `json:"routed"`
}

// waitRouted waits until the stored state of the conversation of thread
// says the message at ts was routed, and returns that state.
func waitRouted(ctx context.Context, t *testing.T, store memory.Store, thread, ts string) storedState {
	t.Helper()
	id := agents.ConversationID(testTeam, testChannel, thread)
	for {
		snap, err := store.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var st storedState
		if len(snap.Conversation.State) > 0 {
			if err := json.Unmarshal(snap.Conversation.State, &st); err != nil {
				t.Fatalf("state of %s: %v", id, err)
			}
		}
		if st.Routed[ts] {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("message %s never routed (state %+v)", ts, st)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestCloneAnswersWithItsHumansHistory: a Slack user paired with the
// human agent Hugo writes in one thread; their message goes to the group
// session in Hugo's namespace. In a second thread a person names Hugo's
// clone, which is given that message (from the other conversation, with
// its author) before the thread, answers with the clone's default prompt
// under its own name, and adds what it saw and said to the same session.
func TestCloneAnswersWithItsHumansHistory(t *testing.T) {
	db := redistest.New(t)
	store := db.Store(t, memory.Options{})
	ctx := waitCtx(t)
	if _, _, err := store.PairHuman(ctx, hugoUser, hugoENS); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, fakeslack.Options{EchoPosts: true, Users: []fakeslack.User{{ID: hugoUser, Name: "hugo", RealName: "Hugo Marsh", DisplayName: "Hugo"}}})
	model := newCast(map[string][]string{
		"Elen/default":    {"🧭 Thanks Hugo, noted.", "🧭 Hugobot has answered for Hugo."},
		"Hugobot/default": {"🪞 I can take the car to the garage on Tuesday, as I said."},
	}, "Elen", "Hugobot")
	r.llm.Handle(model.reply)
	path := r.config(t, redisSection(db.URL, db.Prefix)+
		agentSection(hugoENS, "Hugo", "human")+
		agentSection(hugobotENS, "Hugobot", "clone")+fmt.Sprintf("clone_of = %q\n", hugoENS)+
		channelSection(elenENS, hugoENS, hugobotENS))
	p := start(t, path, nil)

	first := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: hugoUser, Text: "I can take the car to the garage on Tuesday."})
	r.waitPosts(t, p, 1)
	// The group: the agents that took part, the clone counted as its
	// human, and the channel's facilitator always. Hugo alone wrote the
	// first thread before its group was frozen; the second names his
	// clone: both are Elen's and Hugo's group.
	sum := sha256.Sum256([]byte(elenENS + "\n" + hugoENS))
	group := "grp-" + hex.EncodeToString(sum[:])[:32]
	hugoSays := memory.SessionEntry{Role: "user", Author: "Hugo (" + hugoENS + ")", Content: "I can take the car to the garage on Tuesday.",
		ConversationID: agents.ConversationID(testTeam, testChannel, first.TS), TS: first.TS}
	entries, err := store.ReadSession(ctx, hugoENS+"#"+testChannel, group, 0) // memory.clone_scope = "channel"
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !sameEntry(entries[0], hugoSays) {
		t.Fatalf("group session %s of %s after the first thread: %+v, want Hugo's message alone", group, hugoENS, entries)
	}

	second := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: hugobotENS + ", when can Hugo bring the car in?"})
	r.waitPosts(t, p, 3)
	checkPosts(t, r.slack,
		"Elen: 🧭 Thanks Hugo, noted.",
		"Hugobot: 🪞 I can take the car to the garage on Tuesday, as I said.",
		"Elen: 🧭 Hugobot has answered for Hugo.",
	)
	for _, post := range r.slack.Posts()[1:] {
		if post.ThreadTS != second.TS {
			t.Errorf("post %q is not in the second thread", post.Text)
		}
	}
	checkCalls(t, model, "Elen/default", "Hugobot/default", "Elen/default")

	clone := r.llm.Requests()[1]
	// The entry of the first thread is marked as earlier, with its date.
	earlier := "(earlier, " + entries[0].At.UTC().Format(time.DateOnly) + ") "
	checkHistory(t, "the clone's", clone,
		"user: "+earlier+"Hugo ("+hugoENS+"): I can take the car to the garage on Tuesday.",
		"user: Ada (person): "+hugobotENS+", when can Hugo bring the car in?",
	)
	if sys := clone.Messages[0].Content; !strings.HasPrefix(sys, "You are Hugobot ("+hugobotENS+"), the digital twin of a person") {
		t.Errorf("the clone's system prompt:\n%s", sys)
	}
	// The clone knows whom it stands for (.CloneOf).
	if sys := clone.Messages[0].Content; !strings.Contains(sys, "the digital twin of a person, Hugo ("+hugoENS+")") ||
		!strings.Contains(sys, "Hugo's past conversations") {
		t.Errorf("the clone's system prompt does not name its human:\n%s", sys)
	}
	entries, err = store.ReadSession(ctx, hugoENS+"#"+testChannel, group, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Role+" "+e.Author+": "+e.Content)
	}
	want := []string{
		"user Hugo (" + hugoENS + "): I can take the car to the garage on Tuesday.",
		"user Ada (person): " + hugobotENS + ", when can Hugo bring the car in?",
		"assistant : 🪞 I can take the car to the garage on Tuesday, as I said.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("group session after the clone answered:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func sameEntry(a, b memory.SessionEntry) bool {
	return a.Role == b.Role && a.Author == b.Author && a.Content == b.Content && a.ConversationID == b.ConversationID && a.TS == b.TS
}

// TestInactivityConcludes: the facilitator answers, nobody writes, and
// once conversation.timeout has passed since then the facilitator runs
// conclude once over the thread (no :end: tail, so the count is the
// thread's two messages); the conclusion is posted, the root gets ✅, and
// no deadline is left in the store.
func TestInactivityConcludes(t *testing.T) {
	const timeout = 2 * time.Second
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Elen/default":  {"🧭 Which car is it?"},
		"Elen/conclude": {"🧭 Nobody answered: the claim stays open until we know the car."},
	}, "Elen")
	var mu sync.Mutex
	var asked []time.Time // when each request came
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		mu.Lock()
		asked = append(asked, time.Now())
		mu.Unlock()
		return model.reply(req)
	})
	path := r.config(t, redisSection(db.URL, db.Prefix)+fmt.Sprintf("\n[conversation]\ntimeout = %q\n", timeout))
	// The built-in conclude prompt does not show ConversationMessageCount;
	// this one does.
	templateRepo(t, path, map[string]string{
		"facilitator/conclude.tmpl": "The conversation is closing after {{.ConversationMessageCount}} messages: write the final answer.",
	})
	p := start(t, path, nil)
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "My car was scratched."})
	r.waitPosts(t, p, 2)
	r.waitDone(t, p, root.TS, true)
	checkPosts(t, r.slack,
		"Elen: 🧭 Which car is it?",
		"Elen: 🧭 Nobody answered: the claim stays open until we know the car.",
	)
	checkCalls(t, model, "Elen/default", "Elen/conclude")
	conclude := r.llm.Requests()[1]
	checkHistory(t, "the conclusion's", conclude,
		"user: Ada (person): My car was scratched.",
		"assistant: 🧭 Which car is it?",
	)
	if got := lastPrompt(conclude); got != "The conversation is closing after 2 messages: write the final answer." {
		t.Errorf("conclude prompt = %q, want the count of the thread's messages (+0 after a timeout)", got)
	}
	mu.Lock()
	// The inactivity clock starts when the facilitator's turn ends, after
	// its model call began.
	if waited := asked[1].Sub(asked[0]); waited < timeout {
		t.Errorf("concluded %v after the facilitator's call, before conversation.timeout (%v)", waited, timeout)
	}
	mu.Unlock()
	// Concluded, nothing stays armed once the last step is committed:
	// conclude cannot run again.
	store := db.Store(t, memory.Options{})
	id := agents.ConversationID(testTeam, testChannel, root.TS)
	for {
		due, err := store.Due(ctx, time.Now().Add(time.Hour), 0)
		if err != nil {
			t.Fatalf("the concluded conversation %s stays due within the hour: %v", id, err)
		}
		if !slices.Contains(due, id) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkCalls(t, model, "Elen/default", "Elen/conclude")
}

// TestConcludedThreadReopensOnlyForPeople concludes a thread with a
// facilitator reply holding :end:. Then a message by conclave's own bot
// (an agent's post) and one by another app's bot arrive in the thread:
// neither reopens it, no model call. A person's message does: ✅ goes, and
// the facilitator runs default over the whole persisted thread.
func TestConcludedThreadReopensOnlyForPeople(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Elen/default":  {"🧭 Noted: a windscreen claim. :end:", "🧭 Then the mirror goes on the same claim."},
		"Elen/conclude": {"🧭 Your windscreen claim is registered."},
	}, "Elen")
	r.llm.Handle(model.reply)
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)), nil)
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "My windscreen broke."})
	r.waitPosts(t, p, 2)
	r.waitDone(t, p, root.TS, true)

	opts := r.slack.Options()
	own := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, ThreadTS: root.TS, User: opts.BotUserID, BotID: opts.BotID,
		Username: "Elen", Subtype: "bot_message", Text: "🧭 " + elenENS + ", " + claudineENS + ": one more thing."})
	other := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, ThreadTS: root.TS, BotID: "BZAP", Username: "Zapier",
		Subtype: "bot_message", Text: "Ticket 88 opened for " + elenENS + "."})
	for _, d := range []fakeslack.Delivery{own, other} {
		if _, err := r.slack.WaitAck(ctx, d.Key()); err != nil {
			t.Fatal(err)
		}
	}
	// Once the other bot's message is routed, whatever it could have
	// started has run: the thread must still be concluded.
	store := db.Store(t, memory.Options{})
	if st := waitRouted(ctx, t, store, root.TS, other.TS); st.Status != "concluded" {
		t.Errorf("status after a bot's message = %q, want concluded", st.Status)
	}
	checkCalls(t, model, "Elen/default", "Elen/conclude")
	if !slices.Contains(r.slack.Reactions(testChannel, root.TS), "white_check_mark") {
		t.Error("✅ removed by a bot's message")
	}

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "Actually the mirror broke too."})
	r.waitPosts(t, p, 3)
	r.waitDone(t, p, root.TS, false)
	checkPosts(t, r.slack,
		"Elen: 🧭 Noted: a windscreen claim.",
		"Elen: 🧭 Your windscreen claim is registered.",
		"Elen: 🧭 Then the mirror goes on the same claim.",
	)
	checkCalls(t, model, "Elen/default", "Elen/conclude", "Elen/default")
	restart := r.llm.Requests()[2]
	checkHistory(t, "the restart's", restart,
		"user: Ada (person): My windscreen broke.",
		"assistant: 🧭 Noted: a windscreen claim.",
		"assistant: 🧭 Your windscreen claim is registered.",
		"user: Zapier (person): Ticket 88 opened for "+elenENS+".",
		"user: Ada (person): Actually the mirror broke too.",
	)
	if got := lastPrompt(restart); !strings.Contains(got, "The thread has 5 messages so far.") {
		t.Errorf("restart prompt does not count the whole thread:\n%s", got)
	}
}

// TestUnknownAgentNamesGetOneNotice: a person names an agent-shaped name
// that is not registered in the channel, twice in one message and again
// under the other base domain in a reply, and an agent configured but not
// in this channel: each name gets its author one ephemeral notice per
// conversation, sent before the facilitator's reply; nobody else is
// called and the facilitator answers each message. The same name in a
// new conversation is noticed again.
func TestUnknownAgentNamesGetOneNotice(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Elen/default": {"🧭 Elen here: which claim?", "🧭 Elen again: I handle it.", "🧭 Elen once more."},
	}, "Elen", "Victor")
	r.llm.Handle(model.reply)
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+agentSection(victorENS, "Victor", "expert")), nil)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson,
		Text: "Could " + ghostENS + " look at claim 7? I think @" + ghostENS + " knows it."})
	r.waitPosts(t, p, 1)
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS,
		Text: "ghost.acme.137.6022.eth and " + victorENS + ", anyone?"})
	r.waitPosts(t, p, 2)
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "New question for " + ghostENS + "."})
	r.waitPosts(t, p, 3)

	checkPosts(t, r.slack, "Elen: 🧭 Elen here: which claim?", "Elen: 🧭 Elen again: I handle it.", "Elen: 🧭 Elen once more.")
	checkCalls(t, model, "Elen/default", "Elen/default", "Elen/default")
	eph := r.slack.Ephemerals()
	var got []string
	for _, e := range eph {
		got = append(got, e.Channel+" "+e.User+": "+e.Text)
	}
	want := []string{
		testChannel + " " + testPerson + ": " + ghostENS + " is not an agent of this channel, so it was not called.",
		testChannel + " " + testPerson + ": " + victorENS + " is not an agent of this channel, so it was not called.",
		testChannel + " " + testPerson + ": " + ghostENS + " is not an agent of this channel, so it was not called.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ephemeral notices:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each notice goes before the facilitator answers the message.
	posts := r.slack.Posts()
	for i, e := range eph {
		if e.Seq > posts[i].Seq {
			t.Errorf("notice %d came after the facilitator's reply to its message", i)
		}
	}
	if !strings.Contains(strings.Join(history(r.llm.Requests()[0]), "\n"), "Ada (person): Could "+ghostENS+" look at claim 7?") {
		t.Errorf("the facilitator did not see the message naming the unknown agent: %q", history(r.llm.Requests()[0]))
	}
}

// TestLoopGuardsStopTwoExperts: two experts always name each other. With
// max_turns_per_agent = 2 and max_turns = 6, each expert answers twice
// (threading and context-found being one turn), the third call is
// skipped with a ⚠️, the facilitator reads the failure note, and its
// reply, which calls only the two experts at their cap, is not posted:
// the conversation concludes at once as stalled (SPEC §14.7), and the
// root gets ✅.
func TestLoopGuardsStopTwoExperts(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Claudine/context-not-found": {`{"session": "C10001", "message": ""}`},
		"Claudine/context-found":     {"📚 Cover needs the claim: " + victorENS + "?", "📚 Still need the claim: " + victorENS + "?"},
		"Victor/context-not-found":   {`{"session": "CLM-7", "message": ""}`},
		"Victor/context-found":       {"📚 The claim needs the cover: " + claudineENS + "?", "📚 Still need the cover: " + claudineENS + "?"},
		"Elen/default": {
			"🧭 " + claudineENS + " and " + victorENS + ", compare notes.",
			"🧭 " + claudineENS + " and " + victorENS + ", once more.",
		},
		"Elen/conclude": {"🧭 The experts could not settle claim CLM-7 for customer C10001."},
	}, "Elen", "Claudine", "Victor")
	r.llm.Handle(model.reply)
	path := r.config(t, redisSection(db.URL, db.Prefix)+
		agentSection(claudineENS, "Claudine", "expert")+agentSection(victorENS, "Victor", "expert")+
		channelSection(elenENS, claudineENS, victorENS)+
		"\n[conversation]\nmax_turns = 6\nmax_turns_per_agent = 2\n")
	p := start(t, path, nil)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", is customer C10001 covered for claim CLM-7?"})
	r.waitPosts(t, p, 6)
	r.waitDone(t, p, root.TS, true)
	capNotice := func(name string) *regexp.Regexp {
		re := notice(name, "it reached its limit of 2 turns in this conversation").String()
		return regexp.MustCompile("^" + regexp.QuoteMeta(name) + ": " + strings.TrimPrefix(re, "^"))
	}
	checkPosts(t, r.slack,
		"Claudine: 📚 Cover needs the claim: "+victorENS+"?",
		"Victor: 📚 The claim needs the cover: "+claudineENS+"?",
		"Claudine: 📚 Still need the claim: "+victorENS+"?",
		"Victor: 📚 Still need the cover: "+claudineENS+"?",
		capNotice("Claudine"),
		"Elen: 🧭 The experts could not settle claim CLM-7 for customer C10001.",
	)
	checkCalls(t, model,
		"Claudine/context-not-found", "Claudine/context-found",
		"Victor/context-not-found", "Victor/context-found",
		"Claudine/context-found", "Victor/context-found",
		"Elen/default", "Elen/conclude",
	)
	reqs := r.llm.Requests()
	if len(reqs) != 8 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := reqs[7].Messages[len(reqs[7].Messages)-1].Content; !strings.Contains(got, "the agents could not settle it") {
		t.Errorf("the conclusion was not asked as stalled:\n%s", got)
	}
	t.Run("the facilitator reads the notes of the skipped calls", func(t *testing.T) {
		first := strings.Join(history(reqs[6]), "\n")
		if !strings.HasSuffix(first, "user: ("+claudineENS+" could not answer: it reached its limit of 2 turns in this conversation)") {
			t.Errorf("first facilitator turn's history ends:\n%s", first)
		}
	})
	t.Run("the notices are not in the thread's history", func(t *testing.T) {
		if got := strings.Join(history(reqs[7]), "\n"); strings.Contains(got, "⚠️") {
			t.Errorf("the conclusion saw a notice:\n%s", got)
		}
	})
}

// TestThreadingRetry: an expert's threading reply that is not JSON is
// sent back with a one-line reminder; a truncated object in the second
// reply is repaired with jsonrepair and binds the expert, which answers
// in the same turn. When the second reply fails too, it is posted as it
// is and the expert stays unbound: named again, it threads again.
func TestThreadingRetry(t *testing.T) {
	run := func(t *testing.T, answers map[string][]string) (*rig, *castModel, *process, *memory.Redis) {
		t.Helper()
		db := redistest.New(t)
		r := newRig(t, fakeslack.Options{EchoPosts: true})
		model := newCast(answers, "Elen", "Claudine")
		r.llm.Handle(model.reply)
		p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+agentSection(claudineENS, "Claudine", "expert")+channelSection(elenENS, claudineENS)), nil)
		return r, model, p, db.Store(t, memory.Options{})
	}
	// checkRetry: the retry resends the first request's messages, then
	// the raw reply as assistant and the reminder as user.
	checkRetry := func(t *testing.T, first, retry llmfake.Request, raw string) {
		t.Helper()
		want := append(slices.Clone(first.Messages),
			llmfake.Message{Role: "assistant", Content: raw},
			llmfake.Message{Role: "user", Content: threadingReminderLine})
		if !slices.Equal(retry.Messages, want) {
			t.Errorf("retry messages:\n%+v\nwant:\n%+v", retry.Messages, want)
		}
		if first.ResponseFormat != "json_object" || retry.ResponseFormat != "json_object" {
			t.Errorf("response formats %q, %q, want json_object for both", first.ResponseFormat, retry.ResponseFormat)
		}
	}
	threadingOutcome := func(t *testing.T, store memory.Store, thread, text string) string {
		t.Helper()
		snap, err := store.Snapshot(waitCtx(t), agents.ConversationID(testTeam, testChannel, thread))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range snap.Messages {
			if m.Kind == "agent" && m.Text == text {
				return m.Meta["threading"]
			}
		}
		t.Fatalf("no stored post %q", text)
		return ""
	}
	const prose = "I could not tell which customer this is about."

	t.Run("repaired on the retry", func(t *testing.T) {
		r, model, p, store := run(t, map[string][]string{
			"Claudine/context-not-found": {prose},
			"Claudine/retry":             {`{"session": "C12345", "message": "ok"`},
			"Claudine/context-found":     {"📚 C12345 has comprehensive cover."},
			"Elen/default":               {"🧭 Noted: C12345 is covered."},
		})
		root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does customer C12345 have?"})
		r.waitPosts(t, p, 3)
		checkPosts(t, r.slack, "Claudine: ok", "Claudine: 📚 C12345 has comprehensive cover.", "Elen: 🧭 Noted: C12345 is covered.")
		checkCalls(t, model, "Claudine/context-not-found", "Claudine/retry", "Claudine/context-found", "Elen/default")
		reqs := r.llm.Requests()
		checkRetry(t, reqs[0], reqs[1], prose)
		if sys := reqs[2].Messages[0].Content; !strings.Contains(sys, "The key of this conversation is C12345.") {
			t.Errorf("context-found runs unbound:\n%s", sys)
		}
		if got := threadingOutcome(t, store, root.TS, "ok"); got != "repaired" {
			t.Errorf("threading outcome on the threading message = %q, want repaired", got)
		}
	})

	t.Run("fails twice", func(t *testing.T) {
		const second = "Sorry, no JSON from me today."
		r, model, p, store := run(t, map[string][]string{
			"Claudine/context-not-found": {prose, `{"session": "C12345", "message": ""}`},
			"Claudine/retry":             {second},
			"Claudine/context-found":     {"📚 C12345 has comprehensive cover."},
			"Elen/default":               {"🧭 Claudine could not read it; please name her again.", "🧭 Noted: C12345 is covered."},
		})
		root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does customer C12345 have?"})
		r.waitPosts(t, p, 2)
		checkPosts(t, r.slack, "Claudine: "+second, "Elen: 🧭 Claudine could not read it; please name her again.")
		checkCalls(t, model, "Claudine/context-not-found", "Claudine/retry", "Elen/default")
		reqs := r.llm.Requests()
		checkRetry(t, reqs[0], reqs[1], prose)
		if got := threadingOutcome(t, store, root.TS, second); got != "failed" {
			t.Errorf("threading outcome on the posted raw reply = %q, want failed", got)
		}

		r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: claudineENS + ", customer C12345 please."})
		r.waitPosts(t, p, 4)
		checkPosts(t, r.slack,
			"Claudine: "+second, "Elen: 🧭 Claudine could not read it; please name her again.",
			"Claudine: 📚 C12345 has comprehensive cover.", "Elen: 🧭 Noted: C12345 is covered.")
		checkCalls(t, model, "Claudine/context-not-found", "Claudine/retry", "Elen/default",
			"Claudine/context-not-found", "Claudine/context-found", "Elen/default")
		again := r.llm.Requests()[3]
		if sys := again.Messages[0].Content; strings.Contains(sys, "The key of this conversation is") {
			t.Errorf("the expert threads again with a key:\n%s", sys)
		}
		checkHistory(t, "the second threading", again,
			"user: Ada (person): "+claudineENS+", what cover does customer C12345 have?",
			"assistant: "+second,
			"user: Ada (person): "+claudineENS+", customer C12345 please.",
		)
	})
}
