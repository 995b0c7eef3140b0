package agents_test

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// streaming turns slack.stream on in a rig's replicas, with the interval's
// ticks sent by the test (nil: no tick ever comes).
func streaming(ticks chan time.Time) func(*deliveryRig) {
	return func(r *deliveryRig) {
		r.engine = func(o *agents.Options, d *agents.Deps) {
			o.Stream = true
			d.StreamTicker = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
		}
	}
}

// give sends v on ch, failing the test when ctx ends first (the engine or
// the fake model stopped listening).
func give[T any](t *testing.T, ctx context.Context, ch chan<- T, v T, what string) {
	t.Helper()
	select {
	case ch <- v:
	case <-ctx.Done():
		t.Fatalf("%s: nobody took it", what)
	}
}

// A reply with what rendering changes: code, entities, a mention, a link.
var streamedChunks = []string{
	"First, the short answer: use `a < b && c > d`. ",
	"Then *the* details follow,",
	" in order.\n\nA last line",
	" with <@U0ADA> & a link",
	" [docs](https://example.com/docs).",
}

// unstreamed is how the same model output reads when posted at once: the
// n posts of the reply.
func unstreamed(t *testing.T, content string, n int) []fakeslack.Post {
	t.Helper()
	r, ctx := startDelivery(t)
	r.llm.Reply(llmfake.Text(content))
	root := r.ask("", "q1")
	return r.settled(ctx, root.TS, n)
}

func TestStreamedReply(t *testing.T) {
	content := strings.Join(streamedChunks, "")
	want := unstreamed(t, content, 1)[0]

	ticks := make(chan time.Time)
	r, ctx := startDelivery(t, streaming(ticks))
	pace := make(chan struct{})
	r.llm.Reply(llmfake.Reply{Content: content, Chunks: streamedChunks, Pace: pace})
	root := r.ask("", "q1")
	first := r.waitPosts(ctx, root.TS, 1)[0]
	if !strings.HasPrefix(first.Text, "First, the short answer") || strings.Contains(first.Text, "details") {
		t.Errorf("first post %q, want the first sentence as soon as it came", first.Text)
	}
	if md := first.Metadata; md == nil || md.EventPayload["turn_id"] == nil || md.EventPayload["part"] != float64(1) {
		t.Errorf("first post's metadata %+v: the post id is on the message from the start", first.Metadata)
	}
	// Each tick of the interval allows one update, used by the next
	// change of the text.
	for i, words := range []string{"details follow", "A last line"} {
		give(t, ctx, pace, struct{}{}, "the model's next piece")
		give(t, ctx, ticks, time.Now(), "a tick")
		r.until(ctx, "no update after a tick and a change", func() bool { return len(r.slack.Updates()) > i })
		u := r.slack.Updates()[i]
		if u.TS != first.TS || !strings.Contains(u.Text, words) {
			t.Errorf("update %d of %s: %q, want %q in message %s", i+1, u.TS, u.Text, words, first.TS)
		}
	}
	close(pace) // the rest comes with no tick: no update until the reply is complete
	r.settled(ctx, root.TS, 1)

	posts := r.waitPosts(ctx, root.TS, 1)
	if len(posts) != 1 {
		t.Fatalf("%d posts %q, want one message, updated", len(posts), textsOf(posts))
	}
	updates := r.slack.Updates()
	if len(updates) != 3 {
		t.Errorf("%d updates, want 3: one per tick (2), then the complete reply", len(updates))
	}
	for _, u := range updates {
		if u.TS != first.TS {
			t.Errorf("update of %s, want of the streamed message %s", u.TS, first.TS)
		}
	}
	got, ok := r.slack.Current(deliveryChannel, first.TS)
	if !ok {
		t.Fatal("the streamed message is gone")
	}
	if got.Text != want.Text || !reflect.DeepEqual(got.MarkdownTexts(), want.MarkdownTexts()) {
		t.Errorf("streamed message reads\n%q %q\nwant what the unstreamed reply reads\n%q %q",
			got.Text, got.MarkdownTexts(), want.Text, want.MarkdownTexts())
	}
	if md := got.Metadata; md == nil || md.EventPayload["parts"] != want.Metadata.EventPayload["parts"] ||
		md.EventPayload["turn_id"] != first.Metadata.EventPayload["turn_id"] {
		t.Errorf("final metadata %+v, want the post id of the first post and the unstreamed parts %v", got.Metadata, want.Metadata)
	}
	if reqs := r.llm.Requests(); len(reqs) != 1 || !reqs[0].Stream {
		t.Errorf("model requests %d (stream %v), want one streamed", len(reqs), len(reqs) > 0 && reqs[0].Stream)
	}
}

// A reply too long for one message streams its first part only; the
// others are posted after it, once the reply is complete.
func TestStreamedReplySplit(t *testing.T) {
	content := longAnswer("s")
	want := unstreamed(t, content, 3)
	ticks := make(chan time.Time)
	r, ctx := startDelivery(t, streaming(ticks))
	cut := strings.Index(content, "s part 3.") - 100 // past one message's limit
	chunks := []string{"s part 1. ", content[len("s part 1. "):cut], content[cut:]}
	pace := make(chan struct{})
	r.llm.Reply(llmfake.Reply{Content: content, Chunks: chunks, Pace: pace})
	root := r.ask("", "q1")
	first := r.waitPosts(ctx, root.TS, 1)[0]
	give(t, ctx, pace, struct{}{}, "the model's next piece") // the text now runs into the second part
	give(t, ctx, ticks, time.Now(), "a tick")
	r.until(ctx, "no update", func() bool { return len(r.slack.Updates()) == 1 })
	shown := strings.Join(r.slack.Updates()[0].MarkdownTexts(), "")
	if strings.Contains(shown, "s part 2.") || !strings.HasPrefix(shown, "s part 1.") {
		t.Errorf("the streamed message shows %.40q … %.40q, want the first part only", shown, shown[max(len(shown)-40, 0):])
	}
	if n := len(r.waitPosts(ctx, root.TS, 1)); n != 1 {
		t.Errorf("%d posts while the reply is written, want 1", n)
	}
	close(pace)
	posts := r.settled(ctx, root.TS, 3)
	if len(posts) != 3 || posts[0].TS != first.TS {
		t.Fatalf("%d posts, want the streamed message then parts 2 and 3", len(posts))
	}
	for i, p := range posts {
		if i == 0 {
			p, _ = r.slack.Current(deliveryChannel, p.TS)
		}
		if got, w := p.MarkdownTexts(), want[i].MarkdownTexts(); !reflect.DeepEqual(got, w) {
			t.Errorf("part %d reads %.60q, want %.60q as unstreamed", i+1, got, w)
		}
		if p.Metadata == nil || p.Metadata.EventPayload["part"] != float64(i+1) || p.Metadata.EventPayload["parts"] != float64(3) {
			t.Errorf("part %d metadata %+v, want part %d of 3", i+1, p.Metadata, i+1)
		}
	}
}

// streamCrashStore kills its process at the commit that records the
// streamed message's ts: before it is written, or just after.
type streamCrashStore struct {
	*dyingStore
	afterRecord bool
}

var recordsTS = regexp.MustCompile(`"streamed":\{"[^"]+":\{"ts":"[^"]+"`)

func (s *streamCrashStore) Commit(ctx context.Context, l memory.Lock, c memory.Commit) (bool, error) {
	if !recordsTS.Match(c.Conversation.State) {
		return s.dyingStore.Commit(ctx, l, c)
	}
	if !s.afterRecord {
		s.dead.Store(true)
		return false, errDead
	}
	pending, err := s.dyingStore.Commit(ctx, l, c)
	s.dead.Store(true)
	return pending, err
}

// complete is the reply a run again writes after a crash mid-stream.
const complete = "A first sentence. Then the rest, complete."

// crashMidStream runs a replica under first whose store dies at the
// commit of the streamed message's ts (before or after it), while the
// model writes a first sentence and never goes on; it returns the
// person's message once the process is dead.
func crashMidStream(ctx context.Context, r *deliveryRig, first context.Context, afterRecord bool) fakeslack.Delivery {
	r.t.Helper()
	var crash *streamCrashStore
	r.replica(first, func(rep *replica) {
		crash = &streamCrashStore{dyingStore: &dyingStore{storePorts: rep.store}, afterRecord: afterRecord}
		rep.store = crash
	})
	r.llm.Reply(llmfake.Reply{Content: "A first sentence. Never finished",
		Chunks: []string{"A first sentence. ", "Never finished"}, Pace: make(chan struct{})})
	root := r.ask("", "q1")
	r.until(ctx, "the process did not reach its crash", crash.dead.Load)
	return root
}

// runAgainAfterCrash starts a second replica whose model writes complete
// at once; it returns what stops its sweeps.
func runAgainAfterCrash(t *testing.T, r *deliveryRig, complete string) func() {
	t.Helper()
	r.llm.Reply(llmfake.Text(complete))
	second, _ := runCtx(t)
	r.replica(second)
	return r.pump(time.Second)
}

func TestStreamedReplyExactlyOnceAfterACrash(t *testing.T) {
	for _, tt := range []struct {
		name        string
		afterRecord bool
	}{
		{"killed before its ts was recorded", false},
		{"killed after its ts was recorded", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newDeliveryRig(t)
			streaming(nil)(r)
			r.lockTTL = time.Second // a dead process's lock lapses quickly
			ctx := waitCtx(t)
			first, kill := runCtx(t)
			root := crashMidStream(ctx, r, first, tt.afterRecord)
			posted := r.waitPosts(ctx, root.TS, 1)[0]
			kill()
			stop := runAgainAfterCrash(t, r, complete)
			defer stop()
			r.settled(ctx, root.TS, 1)

			if posts := r.waitPosts(ctx, root.TS, 1); len(posts) != 1 {
				t.Errorf("%d posts %q, want the streamed message only", len(posts), textsOf(posts))
			}
			got, _ := r.slack.Current(deliveryChannel, posted.TS)
			if md := got.MarkdownTexts(); !reflect.DeepEqual(md, []string{complete}) {
				t.Errorf("the streamed message reads %q, want it completed: %q", md, complete)
			}
			if n := len(r.slack.Updates()); n == 0 {
				t.Error("no chat.update: the message was not completed in place")
			}
			if n := len(r.llm.Requests()); n != 2 {
				t.Errorf("model called %d times, want 2: the unfinished turn runs again", n)
			}
		})
	}
}

// The update that completes a streamed message fails: it stays pending
// in the outbox and is retried with backoff until it is made.
func TestStreamedReplyCompletedThroughFailures(t *testing.T) {
	r, ctx := startDelivery(t, streaming(nil))
	pace := make(chan struct{})
	const final = "A first sentence. Then the rest, complete."
	r.llm.Reply(llmfake.Reply{Content: final, Chunks: []string{"A first sentence. ", "Then the rest, complete."}, Pace: pace})
	root := r.ask("", "q1")
	first := r.waitPosts(ctx, root.TS, 1)[0]
	r.slack.FailNext("chat.update", fakeslack.Failure{Times: 2, Error: "internal_error"})
	close(pace)
	r.until(ctx, "the update did not fail", func() bool { return len(r.slack.CallsTo("chat.update")) >= 1 })
	stop := r.pump(time.Second)
	defer stop()
	r.settled(ctx, root.TS, 1)
	if n := len(r.slack.CallsTo("chat.update")); n != 3 {
		t.Errorf("%d chat.update calls, want 2 failed then 1 made", n)
	}
	if posts := r.waitPosts(ctx, root.TS, 1); len(posts) != 1 {
		t.Errorf("%d posts, want the streamed message only", len(posts))
	}
	if got, _ := r.slack.Current(deliveryChannel, first.TS); !reflect.DeepEqual(got.MarkdownTexts(), []string{final}) {
		t.Errorf("the streamed message reads %q, want %q", got.MarkdownTexts(), final)
	}
	if !strings.Contains(r.logs.String(), "post failed; it stays pending") {
		t.Errorf("the failed update did not take the outbox's retry path:\n%s", r.logs)
	}
}

// A turn that fails after its reply began to show: the ⚠️ notice takes
// the streamed message's place; nothing half-written stays.
func TestStreamedReplyOfAFailedTurn(t *testing.T) {
	r, ctx := startDelivery(t, streaming(nil))
	pace := make(chan struct{})
	r.llm.Reply(
		llmfake.Reply{Content: "A first sentence. Then", Chunks: []string{"A first sentence. ", "Then"}, Cut: true, Pace: pace},
		llmfake.Error(400, "context too long"),
	)
	root := r.ask("", "q1")
	first := r.waitPosts(ctx, root.TS, 1)[0]
	close(pace) // the stream is cut; the retry is refused: the turn fails
	posts := r.settled(ctx, root.TS, 1)
	if len(posts) != 1 || posts[0].TS != first.TS {
		t.Fatalf("%d posts %q, want the streamed message only", len(posts), textsOf(posts))
	}
	got, _ := r.slack.Current(deliveryChannel, first.TS)
	if !strings.HasPrefix(got.Text, "⚠️ Elen could not answer") {
		t.Errorf("the streamed message reads %q, want the notice in its place", got.Text)
	}
}

// Streamed natively (chat.startStream), a reply whose process dies after
// recording the stream's ts is completed in that message by the run
// again: the stream stopped, the message updated, nothing posted.
func TestNativeStreamedReplyExactlyOnceAfterACrash(t *testing.T) {
	r := newDeliveryRig(t)
	r.streamMethod = bot.StreamAuto
	streaming(nil)(r)
	r.lockTTL = time.Second // a dead process's lock lapses quickly
	ctx := waitCtx(t)
	first, kill := runCtx(t)
	root := crashMidStream(ctx, r, first, true)
	starts, err := r.slack.WaitCalls(ctx, "chat.startStream", 1)
	if err != nil || starts[0].Error != "" {
		t.Fatalf("no stream started: %v %+v", err, starts)
	}
	kill()
	stop := runAgainAfterCrash(t, r, complete)
	defer stop()
	r.settled(ctx, root.TS, 0)

	if n := len(r.slack.Posts()); n != 0 {
		t.Errorf("%d posts beside the stream", n)
	}
	if c := r.slack.CallsTo("chat.startStream"); len(c) != 1 {
		t.Errorf("%d streams started, want 1", len(c))
	}
	u := r.slack.Updates()
	if len(u) == 0 {
		t.Fatal("no chat.update: the message was not completed in place")
	}
	got, _ := r.slack.Current(deliveryChannel, u[len(u)-1].TS)
	if md := got.MarkdownTexts(); !reflect.DeepEqual(md, []string{complete}) || got.ThreadTS != root.TS {
		t.Errorf("the streamed message reads %q, want it completed: %q", md, complete)
	}
	if r.slack.Streaming(deliveryChannel, got.TS) {
		t.Error("the first run's stream is still open")
	}
}

// streamingModel is the fake model with a Stream method that records
// which agent's prompts were streamed.
type streamingModel struct {
	*fakeModel
	mu       sync.Mutex
	streamed []string
}

func (m *streamingModel) Stream(ctx context.Context, r llm.Request, onText func(string)) (llm.Response, error) {
	m.mu.Lock()
	m.streamed = append(m.streamed, r.Agent+"|"+r.Prompt)
	m.mu.Unlock()
	return m.fakeModel.Complete(ctx, r)
}

// Plain-text turns stream; a threading turn (JSON the engine reads) never
// does.
func TestWhichTurnsStream(t *testing.T) {
	var sm *streamingModel
	r := newRig(t, func(r *rig) {
		r.opts.Stream = true
		sm = &streamingModel{fakeModel: r.model}
		r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Model = sm })
	})
	r.model.on(elen, templates.PromptDefault, "I am "+elen+"; "+cora+" please look.", "Thanks. :end:")
	r.model.on(cora, templates.PromptContextNotFound, threading("C1", ""))
	r.model.on(cora, templates.PromptContextFound, "Here is "+cora+" with the answer.")
	r.send("", "U1", "Alice", "Is claim C1 covered?")
	r.settle()
	want := []string{elen + "|default", cora + "|context-found", elen + "|default", elen + "|conclude"}
	if !reflect.DeepEqual(sm.streamed, want) {
		t.Errorf("streamed %q, want %q", sm.streamed, want)
	}
	if n := len(r.model.calls(cora, templates.PromptContextNotFound)); n != 1 {
		t.Errorf("%d threading calls, want 1, not streamed", n)
	}
}
