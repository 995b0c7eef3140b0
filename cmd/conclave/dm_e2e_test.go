package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// testDM is the direct message between testPerson and conclave.
const testDM = "D0001"

// dmSection is what [slack] gets for direct messages with testChannel's
// agents and two suggested prompts.
const dmSection = `[slack]
dm_channel = "C0001"
suggested_prompts = [
  { title = "Mirror cover", message = "Is my side mirror covered?" },
  { title = "A claim", message = "How do I file a claim?" },
]
`

// mirrorCast is Elen asking Claudine about customer C45653's mirror, and
// concluding.
func mirrorCast() *castModel {
	return newCast(map[string][]string{
		"Elen/default":               {"🧭 " + claudineENS + ", is customer C45653's side mirror covered?", "🧭 :end:"},
		"Elen/conclude":              {"🧭 The mirror is covered."},
		"Claudine/context-not-found": {`{"session": "C45653", "message": ""}`},
		"Claudine/context-found":     {"📚 C45653's policy covers mirrors."},
	}, "Elen", "Claudine")
}

// TestRunDirectMessageTalksWithChannelAgents: with slack.dm_channel, a
// person's direct message is a conversation with that channel's agents:
// Elen answers in the DM's thread after asking Claudine, her prompt has
// the channel's description, and Claudine's memory is the channel's
// (expert.session_scope = "channel").
func TestRunDirectMessageTalksWithChannelAgents(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := mirrorCast()
	r.llm.Handle(model.reply)
	path := r.config(t, redisSection(db.URL, db.Prefix)+slowClocks+"\n[expert]\nsession_scope = \"channel\"\n"+
		claudineSection()+channelSection(elenENS, claudineENS))
	rewrite(t, path, "[slack]\n", dmSection)
	p := start(t, path, nil)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testDM, User: testPerson, Text: "Is my side mirror covered?"})
	r.waitPosts(t, p, 3)
	if err := waitReaction(waitCtx(t), r.slack, testDM, root.TS, "white_check_mark"); err != nil {
		t.Fatalf("the DM's conversation did not conclude: %v\n%s", err, p.logs)
	}
	var who []string
	for _, post := range r.slack.Posts() {
		if post.Channel != testDM || post.ThreadTS != root.TS {
			t.Errorf("post %q in %s/%s, want the DM's thread %s/%s", post.Text, post.Channel, post.ThreadTS, testDM, root.TS)
		}
		who = append(who, post.Username)
	}
	if !slices.Contains(who, "Elen") || !slices.Contains(who, "Claudine") {
		t.Errorf("posted by %q, want Elen and Claudine", who)
	}
	if reqs := requestsOf(r, model, "Elen/default"); len(reqs) == 0 || !strings.Contains(reqs[0].Messages[0].Content, "The claims desk") {
		t.Errorf("Elen's prompt lacks the description of %s (%d requests)", testChannel, len(reqs))
	}
	store := db.Store(t, memory.Options{})
	ctx := waitCtx(t)
	inChannel, err := store.Sessions(ctx, agents.ExpertNamespace(claudineENS, testChannel))
	if err != nil {
		t.Fatal(err)
	}
	inDM, err := store.Sessions(ctx, agents.ExpertNamespace(claudineENS, testDM))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(inChannel, "C45653") || len(inDM) != 0 {
		t.Errorf("Claudine's sessions: %q in %s's scope, %q in the DM's; want C45653 in the channel's only", inChannel, testChannel, inDM)
	}
	if len(r.slack.SuggestedPrompts()) != 0 {
		t.Errorf("prompts set without an assistant thread: %+v", r.slack.SuggestedPrompts())
	}
}

// TestRunAssistantThreadGetsPrompts: when a person opens an assistant
// thread with conclave, its suggested prompts are set; the person's first
// message, a reply in that thread, is answered there by the channel's
// facilitator.
func TestRunAssistantThreadGetsPrompts(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := mirrorCast()
	r.llm.Handle(model.reply)
	path := r.config(t, redisSection(db.URL, db.Prefix)+slowClocks+claudineSection()+channelSection(elenENS, claudineENS))
	rewrite(t, path, "[slack]\n", dmSection)
	p := start(t, path, nil)

	const thread = "1700000000.000100"
	started := r.slack.SendEvent(map[string]any{
		"type":             "assistant_thread_started",
		"assistant_thread": map[string]any{"user_id": testPerson, "channel_id": testDM, "thread_ts": thread},
		"event_ts":         "1700000000.000200",
	}, 0)
	if _, err := r.slack.WaitCalls(waitCtx(t), "assistant.threads.setSuggestedPrompts", 1); err != nil {
		t.Fatalf("no suggested prompts: %v\n%s", err, p.logs)
	}
	got := r.slack.SuggestedPrompts()
	want := []fakeslack.SuggestedPrompt{
		{Title: "Mirror cover", Message: "Is my side mirror covered?"},
		{Title: "A claim", Message: "How do I file a claim?"},
	}
	if len(got) != 1 || got[0].Channel != testDM || got[0].ThreadTS != thread || !slices.Equal(got[0].Prompts, want) {
		t.Fatalf("suggested prompts %+v, want %+v in %s/%s\n%s", got, want, testDM, thread, p.logs)
	}
	// The ack travels back over the WebSocket on its own: wait for it
	// before counting.
	if _, err := r.slack.WaitAck(waitCtx(t), started.Key()); err != nil {
		t.Fatalf("assistant_thread_started not acknowledged: %v", err)
	}
	if ackCount(r.slack, started.Key()) != 1 {
		t.Errorf("assistant_thread_started acknowledged %d times", ackCount(r.slack, started.Key()))
	}

	r.slack.SendMessage(fakeslack.Message{Channel: testDM, User: testPerson, ThreadTS: thread, Text: want[0].Message})
	r.waitPosts(t, p, 1)
	post := r.slack.Posts()[0]
	if post.Channel != testDM || post.ThreadTS != thread || post.Username != "Elen" {
		t.Errorf("first post %+v, want Elen's in %s/%s", post, testDM, thread)
	}
}

// TestRunDirectMessageWithoutDMChannelGetsHelp: without slack.dm_channel
// a direct message gets the help and no agent is asked.
func TestRunDirectMessageWithoutDMChannelGetsHelp(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := mirrorCast()
	r.llm.Handle(model.reply)
	p := start(t, r.config(t, slowClocks+claudineSection()+channelSection(elenENS, claudineENS)), nil)

	r.slack.SendMessage(fakeslack.Message{Channel: testDM, User: testPerson, Text: "Is my side mirror covered?"})
	r.waitPosts(t, p, 1)
	post := r.slack.Posts()[0]
	if post.Channel != testDM || post.ThreadTS != "" || !strings.Contains(post.Text, "/list-agents") {
		t.Errorf("answer %+v, want the help, top-level in %s", post, testDM)
	}
	if n := len(r.llm.Requests()); n != 0 {
		t.Errorf("%d model requests for a DM without dm_channel", n)
	}
}
