package agents_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
	"github.com/conclavehq/conclave/memory/storetest"
	"github.com/conclavehq/conclave/templates"
)

// The delivery tests run replicas wired as `conclave run` wires them (the
// Slack transport against the in-repo fake Slack, the model client
// against the fake endpoint, real Redis) on a fake clock, so that outages
// of minutes take a moment: the fake Slack fails the way Slack does, and
// every reply must arrive once, in order.

const (
	deliveryChannel = "C0DELIVERY"
	deliveryPerson  = "U0ADA"
)

var facilitator = ens.Agent{
	Name: "Elen", EnsDomain: "elen.acme.137.protocol6022.eth", Role: ens.RoleFacilitator,
	Attributes: map[string]string{"mission": "Runs the desk"},
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type deliveryRig struct {
	t         *testing.T
	slack     *fakeslack.Server
	llm       *llmfake.Server
	db        redistest.DB
	clock     *storetest.Clock
	logs      *syncBuffer
	abandoned atomic.Int64
	window    time.Duration // slack.post_retry_window
}

func newDeliveryRig(t *testing.T) *deliveryRig {
	r := &deliveryRig{
		t:      t,
		slack:  fakeslack.New(t, fakeslack.Options{EchoPosts: true}),
		llm:    llmfake.New(t),
		db:     redistest.New(t),
		clock:  storetest.NewClock(time.Now().UTC()),
		logs:   &syncBuffer{},
		window: 30 * time.Minute,
	}
	r.llm.Handle(answerLatest)
	return r
}

var personLine = regexp.MustCompile(`\(person\): (q\d+)`)

// answerLatest answers the newest person message the model was shown.
func answerLatest(req llmfake.Request) llmfake.Reply {
	latest := ""
	for _, m := range req.Messages {
		if got := personLine.FindAllStringSubmatch(m.Content, -1); m.Role == "user" && got != nil {
			latest = got[len(got)-1][1]
		}
	}
	return llmfake.Text("answer to " + latest)
}

// replica is one conclave replica until ctx ends; change wraps its store
// or its transport (to make it die at a point). It returns once it is
// connected.
type replica struct {
	store memory.Store
	chat  agents.Chat
}

func (r *deliveryRig) replica(parent context.Context, change ...func(*replica)) {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithCancel(parent)
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lib, err := templates.Open("", templates.Options{})
	if err != nil {
		t.Fatal(err)
	}
	directory, err := ens.New(ens.Options{}, []ens.Agent{facilitator})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { directory.Close() })
	model, err := llm.New(llm.Profile{BaseURL: r.llm.URL(), APIKey: "sk-test", Model: "fake", MaxRetries: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := &engineHandler{}
	b := bot.New(bot.Options{
		AppToken: fakeslack.AppToken, BotToken: fakeslack.BotToken, APIURL: r.slack.APIURL(),
		Timeout: 300 * time.Millisecond,
	}, eng, log)
	id, err := b.Identify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep := &replica{store: r.db.Store(t, memory.Options{Now: r.clock.Now}), chat: b}
	for _, f := range change {
		f(rep)
	}
	eng.Engine = agents.New(agents.Options{
		Channels:        []agents.ChannelConfig{{ID: deliveryChannel, Agents: []string{facilitator.EnsDomain}}},
		BotUserID:       id.UserID,
		SweepInterval:   5 * time.Millisecond,
		PostRetryWindow: r.window,
		ShutdownGrace:   time.Second,
	}, agents.Deps{
		Store:           rep.store,
		Chat:            rep.chat,
		Model:           model,
		Prompts:         func() agents.Prompts { return lib.Current() },
		Resolver:        directory,
		Logger:          log,
		Now:             r.clock.Now,
		Jitter:          func() float64 { return 1 },
		OnPostAbandoned: func() { r.abandoned.Add(1) },
	})
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Run(ctx) })
	wg.Go(func() { _ = b.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	for b.Ready() != nil {
		select {
		case <-ctx.Done():
			t.Fatal("the replica did not connect")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

type engineHandler struct{ *agents.Engine }

// runCtx is a context for one replica, ended by the test or by stop.
func runCtx(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}

// waitCtx bounds a test's waiting, so that a broken test fails instead of
// hanging.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pump advances the fake clock by step every few milliseconds until the
// returned function is called.
func (r *deliveryRig) pump(step time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				r.clock.Advance(step)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// outage makes chat.postMessage answer 503 for d of the fake clock, from
// now on (for the calls match accepts, all when nil).
func (r *deliveryRig) outage(d time.Duration, match func(url.Values) bool) {
	end := r.clock.Now().Add(d)
	r.slack.FailNext("chat.postMessage", fakeslack.Failure{
		Status: http.StatusServiceUnavailable, Match: match,
		While: func() bool { return r.clock.Now().Before(end) },
	})
}

func (r *deliveryRig) ask(thread, text string) fakeslack.Delivery {
	return r.slack.SendMessage(fakeslack.Message{Channel: deliveryChannel, User: deliveryPerson, ThreadTS: thread, Text: text})
}

// waitPosts waits for n posts in the thread and returns the thread's
// posts.
func (r *deliveryRig) waitPosts(ctx context.Context, thread string, n int) []fakeslack.Post {
	r.t.Helper()
	for {
		var out []fakeslack.Post
		for _, p := range r.slack.Posts() {
			if p.ThreadTS == thread {
				out = append(out, p)
			}
		}
		if len(out) >= n {
			return out
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("%d posts in thread %s, want %d\nposts %q\n%s", len(out), thread, n, textsOf(out), r.logs)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func textsOf(posts []fakeslack.Post) []string {
	var out []string
	for _, p := range posts {
		out = append(out, p.Text)
	}
	return out
}

// settled waits until no post is pending, checks that nothing was
// abandoned and returns the thread's n posts.
func (r *deliveryRig) settled(ctx context.Context, thread string, n int) []fakeslack.Post {
	r.t.Helper()
	store := r.db.Store(r.t, memory.Options{Now: r.clock.Now})
	for {
		n, err := store.PendingPosts(ctx)
		if err != nil {
			r.t.Fatal(err)
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("%d posts still pending\n%s", n, r.logs)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if n := r.abandoned.Load(); n != 0 {
		r.t.Errorf("%d posts abandoned", n)
	}
	if strings.Contains(r.logs.String(), "level=ERROR") {
		r.t.Errorf("errors logged:\n%s", r.logs)
	}
	return r.waitPosts(ctx, thread, n)
}

// holds checks that a thread holds exactly want, in order: nothing lost,
// nothing doubled.
func holds(t *testing.T, posts []fakeslack.Post, want ...string) {
	t.Helper()
	if got := textsOf(posts); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("thread holds %q, want %q (nothing lost, nothing doubled, in order)", got, want)
	}
}

// failedCalls counts the chat.postMessage calls that failed.
func (r *deliveryRig) failedCalls() int {
	n := 0
	for _, c := range r.slack.CallsTo("chat.postMessage") {
		if c.Status != http.StatusOK || c.Error != "" {
			n++
		}
	}
	return n
}

func TestSlackOutagesLoseNoReply(t *testing.T) {
	for _, tt := range []struct {
		name   string
		outage time.Duration
		step   time.Duration
	}{
		{"10 seconds", 10 * time.Second, time.Second},
		{"5 minutes", 5 * time.Minute, 5 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newDeliveryRig(t)
			ctx := waitCtx(t)
			run, _ := runCtx(t)
			r.replica(run)
			r.outage(tt.outage, nil)
			root := r.ask("", "q1")
			stop := r.pump(tt.step)
			r.waitPosts(ctx, root.TS, 1)
			stop()
			r.ask(root.TS, "q2")
			holds(t, r.settled(ctx, root.TS, 2), "answer to q1", "answer to q2")
			t.Logf("%d failed attempts before the post", r.failedCalls())
			if n := r.failedCalls(); n < 1 {
				t.Errorf("%d failed posts: the outage was not met", n)
			}
			for _, m := range retryIn.FindAllStringSubmatch(r.logs.String(), -1) {
				if d, err := time.ParseDuration(m[1]); err != nil || d > time.Minute || d <= 0 {
					t.Errorf("a retry waits %s, want at most the 60 s cap", m[1])
				}
			}
			if n := len(r.llm.Requests()); n != 2 {
				t.Errorf("model called %d times, want 2 (a failed post is retried, not its turn)", n)
			}
			if lookups := len(r.slack.CallsTo("conversations.replies")); lookups < r.failedCalls() {
				t.Errorf("%d lookups for %d failed posts: each retry must look for the post first", lookups, r.failedCalls())
			}
		})
	}
}

var retryIn = regexp.MustCompile(`retry_in=(\S+)`)

// longAnswer is a reply long enough to be split in three parts.
func longAnswer(tag string) string {
	var b strings.Builder
	for i := range 3 {
		fmt.Fprintf(&b, "%s part %d. %s\n\n", tag, i+1, strings.Repeat("Some words about the claim. ", 300))
	}
	return b.String()
}

func TestPartTwoOfThreeFailing(t *testing.T) {
	r := newDeliveryRig(t)
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		if strings.Contains(answerLatest(req).Content, "q1") {
			return llmfake.Text(longAnswer("first"))
		}
		return answerLatest(req)
	})
	ctx := waitCtx(t)
	run, _ := runCtx(t)
	r.replica(run)
	r.outage(20*time.Second, fakeslack.MatchPart(2))
	root := r.ask("", "q1")
	stop := r.pump(time.Second)
	r.waitPosts(ctx, root.TS, 3)
	stop()
	r.ask(root.TS, "q2")
	posts := r.settled(ctx, root.TS, 4)
	if len(posts) != 4 || posts[3].Text != "answer to q2" {
		t.Fatalf("thread holds %.60q, want the 3 parts then the next answer", textsOf(posts))
	}
	for i, p := range posts[:3] {
		md := strings.Join(p.MarkdownTexts(), "")
		if !strings.HasPrefix(md, fmt.Sprintf("first part %d.", i+1)) || p.Metadata == nil ||
			p.Metadata.EventPayload["part"] != float64(i+1) || p.Metadata.EventPayload["parts"] != float64(3) {
			t.Errorf("post %d: %.40q, metadata %+v; want part %d of 3", i, md, p.Metadata, i+1)
		}
	}
	if r.failedCalls() < 2 {
		t.Errorf("part 2 failed %d times, want it retried", r.failedCalls())
	}
}
