package agents_test

import (
	"cmp"
	"context"
	"errors"
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
	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/internal/testlog"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
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

type deliveryRig struct {
	t         *testing.T
	slack     *fakeslack.Server
	llm       *llmfake.Server
	db        redistest.DB
	clock     *testclock.Clock
	logs      *testlog.Buffer
	abandoned atomic.Int64
	window    time.Duration // slack.post_retry_window
	lockTTL   time.Duration // 0: the default
	// slackTimeout is slack.timeout, 10 s as `conclave run` has it by
	// default. A test that
	// does not advance the fake clock needs every Slack call to succeed
	// at its first attempt (a retry waits on that clock): a short
	// timeout on a loaded machine fails some and leaves them pending.
	slackTimeout time.Duration
	// engine, when set, adjusts each replica's engine options and deps.
	engine func(*agents.Options, *agents.Deps)
	// streamMethod is slack.stream_method; these tests show streamed
	// replies with chat.update unless they say otherwise.
	streamMethod string
}

func newDeliveryRig(t *testing.T) *deliveryRig {
	r := &deliveryRig{
		t: t,
		slack: fakeslack.New(t, fakeslack.Options{EchoPosts: true,
			Channels: []fakeslack.Channel{{ID: deliveryChannel, Name: "desk", Purpose: "The desk"}}}),
		llm:          llmfake.New(t),
		db:           redistest.New(t),
		clock:        testclock.New(time.Now().UTC()),
		logs:         &testlog.Buffer{},
		window:       30 * time.Minute,
		slackTimeout: 10 * time.Second,
	}
	r.llm.Handle(answerLatest)
	return r
}

// startDelivery is a rig, configured, with one replica running, and a
// context bounding the test's waits.
func startDelivery(t *testing.T, configure ...func(*deliveryRig)) (*deliveryRig, context.Context) {
	r := newDeliveryRig(t)
	for _, f := range configure {
		f(r)
	}
	run, _ := runCtx(t)
	r.replica(run)
	return r, waitCtx(t)
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
	store storePorts
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
	web := bot.NewWebAPI(bot.Options{
		AppToken: fakeslack.AppToken, BotToken: fakeslack.BotToken, APIURL: r.slack.APIURL(),
		Timeout: r.slackTimeout, StreamMethod: cmp.Or(r.streamMethod, bot.StreamUpdate),
	}, log)
	id, err := web.Identify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep := &replica{store: r.db.Store(t, memory.Options{Now: r.clock.Now}), chat: web}
	for _, f := range change {
		f(rep)
	}
	opts := agents.Options{
		Channels:        []agents.ChannelConfig{{ID: deliveryChannel, Agents: []string{facilitator.EnsDomain}}},
		BotUserID:       id.UserID,
		SweepInterval:   5 * time.Millisecond,
		PostRetryWindow: r.window,
		ShutdownGrace:   time.Second,
		LockTTL:         r.lockTTL,
	}
	deps := agents.Deps{
		Chat:            rep.chat,
		Model:           model,
		Prompts:         func() agents.Prompts { return lib.Current() },
		Resolver:        directory,
		Logger:          log,
		Now:             r.clock.Now,
		Jitter:          func() float64 { return 1 },
		OnPostAbandoned: func() { r.abandoned.Add(1) },
	}
	withPorts(&deps, rep.store)
	if r.engine != nil {
		r.engine(&opts, &deps)
	}
	eng := agents.New(opts, deps)
	b := bot.New(web, eng, nil)
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Run(ctx) })
	wg.Go(func() { _ = b.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		stopped := make(chan struct{})
		go func() {
			wg.Wait()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(time.Minute):
			t.Errorf("the replica (engine and transport) did not stop within a minute of its context ending\n%s", r.logs)
		}
	})
	connecting := time.NewTimer(time.Minute)
	defer connecting.Stop()
	for b.Ready() != nil {
		select {
		case <-ctx.Done():
			t.Fatal("the replica did not connect")
		case <-connecting.C:
			t.Fatalf("the replica did not connect within a minute: %v", b.Ready())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

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
			r.t.Fatalf("%v (posts still pending)\n%s", err, r.logs)
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
	if strings.Contains(r.logs.String(), "post abandoned") {
		r.t.Errorf("a post was abandoned:\n%s", r.logs)
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

// until waits for cond, failing the test with what when ctx ends first.
func (r *deliveryRig) until(ctx context.Context, what string, cond func() bool) {
	r.t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			r.t.Fatalf("%s\n%s", what, r.logs)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitFailed waits until n chat.postMessage calls failed.
func (r *deliveryRig) waitFailed(ctx context.Context, n int) {
	r.t.Helper()
	r.until(ctx, fmt.Sprintf("fewer than %d posts failed", n), func() bool { return r.failedCalls() >= n })
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

// throughOutage asks a question during an outage of d, lets the fake
// clock run by step until it is answered, asks a second one in the thread
// and checks that the thread holds both answers, once, in order.
func (r *deliveryRig) throughOutage(ctx context.Context, d, step time.Duration) {
	r.t.Helper()
	r.outage(d, nil)
	root := r.ask("", "q1")
	r.waitFailed(ctx, 1)
	stop := r.pump(step)
	r.waitPosts(ctx, root.TS, 1)
	stop()
	r.ask(root.TS, "q2")
	holds(r.t, r.settled(ctx, root.TS, 2), "answer to q1", "answer to q2")
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
			r, ctx := startDelivery(t)
			r.throughOutage(ctx, tt.outage, tt.step)
			t.Logf("%d failed attempts before the post", r.failedCalls())
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
	r, ctx := startDelivery(t)
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		if strings.Contains(answerLatest(req).Content, "q1") {
			return llmfake.Text(longAnswer("first"))
		}
		return answerLatest(req)
	})
	r.slack.FailNext("chat.postMessage", fakeslack.Failure{Times: 3, Status: http.StatusServiceUnavailable, Match: fakeslack.MatchPart(2)})
	root := r.ask("", "q1")
	r.waitFailed(ctx, 1)
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
	if n := r.failedCalls(); n != 3 {
		t.Errorf("part 2 failed %d times, want 3", n)
	}
	if n := len(r.slack.CallsTo("chat.postMessage")); n != 3+3+1 {
		t.Errorf("chat.postMessage called %d times, want 7: parts 1 and 3 once, part 2 four times, the next answer once", n)
	}
}

func TestHungPostHoldsOnlyItsThread(t *testing.T) {
	// A hung attempt ends at slack.timeout, real time: short here.
	r, ctx := startDelivery(t, func(r *deliveryRig) { r.slackTimeout = 300 * time.Millisecond })
	// Every post in the first thread to post hangs until the other thread
	// has its answer: each attempt ends at slack.timeout and is retried.
	var stuck atomic.Value
	var otherAnswered atomic.Bool
	r.slack.FailNext("chat.postMessage", fakeslack.Failure{
		Hang:  true,
		While: func() bool { return !otherAnswered.Load() },
		Match: func(form url.Values) bool {
			stuck.CompareAndSwap(nil, form.Get("thread_ts"))
			return stuck.Load() == form.Get("thread_ts")
		},
	})
	asked := map[string]string{r.ask("", "q1").TS: "q1", r.ask("", "q2").TS: "q2"}
	stop := r.pump(time.Second)
	defer stop()
	r.until(ctx, "nothing was posted", func() bool { return stuck.Load() != nil })
	hungThread, other := stuck.Load().(string), ""
	for ts := range asked {
		if ts != hungThread {
			other = ts
		}
	}
	holds(t, r.waitPosts(ctx, other, 1), "answer to "+asked[other])
	otherAnswered.Store(true)
	holds(t, r.settled(ctx, hungThread, 1), "answer to "+asked[hungThread])
	holds(t, r.settled(ctx, other, 1), "answer to "+asked[other])
	hung := 0
	for _, c := range r.slack.CallsTo("chat.postMessage") {
		if c.Error == "hung" {
			hung++
		}
	}
	if hung == 0 {
		t.Error("no post hung: the fault was not met")
	}
	if !strings.Contains(r.logs.String(), "no answer in time (slack.timeout)") {
		t.Errorf("the hung post did not end at slack.timeout:\n%s", r.logs)
	}
}

func TestPermanentErrorGivenUpAtOnce(t *testing.T) {
	r, ctx := startDelivery(t)
	r.slack.FailNext("chat.postMessage", fakeslack.Failure{Error: "channel_not_found"})
	root := r.ask("", "q1")
	r.until(ctx, "the post was not abandoned", func() bool { return r.abandoned.Load() > 0 })
	if n := len(r.slack.CallsTo("chat.postMessage")); n != 1 {
		t.Errorf("chat.postMessage called %d times, want 1: a permanent error is not retried", n)
	}
	abandon := regexp.MustCompile(`level=ERROR msg="post abandoned: permanent error".* conversation=\S+ .*turn=(\S+) post=(\S+) .*channel_not_found`)
	m := abandon.FindStringSubmatch(r.logs.String())
	if m == nil || m[1] != m[2] {
		t.Errorf("no ERROR naming the conversation, turn and post:\n%s", r.logs)
	}
	// The conversation goes on.
	r.ask(root.TS, "q2")
	holds(t, r.waitPosts(ctx, root.TS, 1), "answer to q2")
	if n := r.abandoned.Load(); n != 1 {
		t.Errorf("%d posts abandoned, want 1", n)
	}
}

func TestTwoReplicasRetryOnePendingPost(t *testing.T) {
	r, ctx := startDelivery(t)
	second, _ := runCtx(t)
	r.replica(second)
	r.throughOutage(ctx, 30*time.Second, time.Second)
	if n := len(r.llm.Requests()); n != 2 {
		t.Errorf("model called %d times, want 2", n)
	}
}

// dyingStore is one process's view of the store; once die is called (or
// dead set) every call fails and nothing more is written or released, as
// if the process had died at that point.
type dyingStore struct {
	storePorts
	dead atomic.Bool
}

var errDead = errors.New("process killed")

func (s *dyingStore) die() { s.dead.Store(true) }

func (s *dyingStore) check() error {
	if s.dead.Load() {
		return errDead
	}
	return nil
}

func (s *dyingStore) Load(ctx context.Context, l memory.Lock) (memory.Snapshot, error) {
	if err := s.check(); err != nil {
		return memory.Snapshot{}, err
	}
	return s.storePorts.Load(ctx, l)
}

func (s *dyingStore) Commit(ctx context.Context, l memory.Lock, c memory.Commit) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	return s.storePorts.Commit(ctx, l, c)
}

func (s *dyingStore) RenewLock(ctx context.Context, l memory.Lock, ttl time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.storePorts.RenewLock(ctx, l, ttl)
}

func (s *dyingStore) CheckLock(ctx context.Context, l memory.Lock) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.storePorts.CheckLock(ctx, l)
}

func (s *dyingStore) ReleaseLock(ctx context.Context, l memory.Lock) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	return s.storePorts.ReleaseLock(ctx, l)
}

func (s *dyingStore) MarkPending(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.storePorts.MarkPending(ctx, id)
}

func (s *dyingStore) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.storePorts.Due(ctx, now, limit)
}

func (s *dyingStore) AcquireAndLoad(ctx context.Context, id string, ttl time.Duration, q memory.Lookup) (memory.Lock, memory.Snapshot, memory.Found, error) {
	if err := s.check(); err != nil {
		return memory.Lock{}, memory.Snapshot{}, memory.Found{}, err
	}
	return s.storePorts.AcquireAndLoad(ctx, id, ttl, q)
}

// crashingChat kills its process around a post.
type crashingChat struct {
	agents.Chat
	store     *dyingStore
	afterPost bool // die once the post is made (else before making it)
	once      sync.Once
}

func (c *crashingChat) PostReply(ctx context.Context, r agents.Reply) ([]string, error) {
	died := false
	c.once.Do(func() { died = true })
	if !died {
		return c.Chat.PostReply(ctx, r)
	}
	if !c.afterPost {
		c.store.dead.Store(true)
		return nil, errDead
	}
	posted, err := c.Chat.PostReply(ctx, r)
	c.store.dead.Store(true)
	if err != nil {
		return posted, err
	}
	return nil, errDead
}

func TestCrashWithAPendingPost(t *testing.T) {
	for _, tt := range []struct {
		name      string
		afterPost bool
	}{
		{"killed before posting", false},
		{"killed after posting, before recording it", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newDeliveryRig(t)
			r.lockTTL = time.Second // a dead process's lock lapses quickly
			ctx := waitCtx(t)
			first, kill := runCtx(t)
			var dying *dyingStore
			r.replica(first, func(rep *replica) {
				dying = &dyingStore{storePorts: rep.store}
				rep.store = dying
				rep.chat = &crashingChat{Chat: rep.chat, store: dying, afterPost: tt.afterPost}
			})
			root := r.ask("", "q1")
			r.until(ctx, "the process did not reach its crash", dying.dead.Load)
			kill()
			second, _ := runCtx(t)
			r.replica(second)
			stop := r.pump(time.Second)
			defer stop()
			holds(t, r.settled(ctx, root.TS, 1), "answer to q1")
			if n := len(r.llm.Requests()); n != 1 {
				t.Errorf("model called %d times, want 1: the pending post is made, the turn not run again", n)
			}
		})
	}
}

func TestRetryWindowOverAbandons(t *testing.T) {
	r, ctx := startDelivery(t, func(r *deliveryRig) { r.window = time.Minute })
	r.outage(5*time.Minute, nil)
	root := r.ask("", "q1")
	r.waitFailed(ctx, 1)
	stop := r.pump(5 * time.Second)
	r.until(ctx, "the post was not abandoned", func() bool { return r.abandoned.Load() > 0 })
	stop()
	if !regexp.MustCompile(`level=ERROR msg="post abandoned: retry window over".* turn=\S+ post=\S+`).MatchString(r.logs.String()) {
		t.Errorf("no ERROR naming the abandoned post:\n%s", r.logs)
	}
	if n := len(r.slack.Posts()); n != 0 {
		t.Errorf("%d posts made during the outage", n)
	}
	if n := r.failedCalls(); n < 2 {
		t.Errorf("%d attempts, want the post retried within its window", n)
	}
	r.clock.Advance(5 * time.Minute) // the outage is over
	r.ask(root.TS, "q2")
	holds(t, r.waitPosts(ctx, root.TS, 1), "answer to q2")
}
