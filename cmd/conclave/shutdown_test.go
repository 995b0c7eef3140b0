package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testlog"
	"github.com/conclavehq/conclave/memory/redistest"
)

// envChildProcess makes TestConclaveProcess run conclave's main.
const envChildProcess = "CONCLAVE_TEST_CHILD_PROCESS"

// TestConclaveProcess is `conclave run` as a child process of
// TestSIGTERMRealProcess (the test binary re-executed); on its own it
// does nothing.
func TestConclaveProcess(t *testing.T) {
	if os.Getenv(envChildProcess) != "1" {
		t.Skip("runs only as the child process of TestSIGTERMRealProcess")
	}
	os.Args = []string{"conclave", "run"}
	main()
}

// childEnv is the parent's environment without anything conclave reads,
// plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "REDIS_URL", k == "CONCLAVE_CONFIG", strings.HasPrefix(k, "SLACK_"),
			strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "ETH_RPC_URL"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// echoAfter answers as echoLatest does, after d.
func echoAfter(d time.Duration) func(llmfake.Request) llmfake.Reply {
	return func(req llmfake.Request) llmfake.Reply {
		reply := echoLatest(req)
		reply.Delay = d
		return reply
	}
}

// lockKeys lists the conversation locks left in Redis under prefix.
func lockKeys(t *testing.T, db redistest.DB) []string {
	t.Helper()
	keys, err := db.Client(t).Keys(context.Background(), db.Prefix+"*:lock:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestSIGTERMRealProcess runs conclave as a separate process and sends it a
// real SIGTERM while a turn's model call is in flight: it stops taking
// events, finishes the turn within shutdown_grace (the reply is posted),
// releases the conversation's lock and exits 0. A message sent after the
// signal is not acknowledged, so Slack delivers it to the next replica,
// which answers it.
func TestSIGTERMRealProcess(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	r.llm.Handle(echoAfter(time.Second))
	path := r.config(t, redisSection(db.URL, db.Prefix))
	// The turn in flight must finish within the grace: on a loaded
	// machine a second of model time and a post may take several, and a
	// longer grace does not make the test longer (the child exits as soon
	// as the turn is done).
	rewrite(t, path, `shutdown_grace = "5s"`, `shutdown_grace = "60s"`)

	cmd := exec.Command(os.Args[0], "-test.run=^TestConclaveProcess$")
	cmd.Env = childEnv(envChildProcess+"=1", "CONCLAVE_CONFIG="+path)
	out := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// A child process starts, connects and shuts down more slowly than
	// in-process parts: it gets longer than waitCtx's 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := r.slack.WaitOpen(ctx, 1); err != nil {
		t.Fatalf("the child did not connect: %v\n%s", err, out)
	}

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "thread 0 message 0"})
	if _, err := r.llm.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(out.String(), `"msg":"shutting down"`) {
		select {
		case <-ctx.Done():
			t.Fatalf("no shutdown after SIGTERM:\n%s", out)
		case <-time.After(10 * time.Millisecond):
		}
	}
	late := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thread 0 message 1"})

	var err error
	select {
	case err = <-exited:
	case <-ctx.Done():
		t.Fatalf("the child did not exit:\n%s", out)
	}
	t.Run("exit code 0", func(t *testing.T) {
		if err != nil {
			t.Errorf("exit: %v\n%s", err, out)
		}
		if !strings.Contains(out.String(), `"msg":"stopped"`) {
			t.Errorf("no clean stop logged:\n%s", out)
		}
	})
	t.Run("the turn in flight finished", func(t *testing.T) {
		posts := r.slack.Posts()
		if len(posts) != 1 || posts[0].Text != "answer to thread 0 message 0" {
			t.Errorf("posts = %+v", posts)
		}
	})
	t.Run("no event taken after the signal", func(t *testing.T) {
		if n := ackCount(r.slack, late.Key()); n != 0 {
			t.Errorf("the message sent after SIGTERM was acknowledged %d times", n)
		}
	})
	t.Run("locks released", func(t *testing.T) {
		if keys := lockKeys(t, db); len(keys) != 0 {
			t.Errorf("locks left: %v", keys)
		}
	})

	// The next replica gets the unacknowledged message and answers it.
	next := start(t, path, nil)
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 1"); err != nil {
		t.Fatalf("%v\n%s", err, next.logs)
	}
}

// TestRollingRestart restarts both of two replicas, one after the other,
// while 12 conversations are active (each person writes again as soon as
// they are answered, and turns take 150 ms): every message gets exactly
// one reply, in order, every replica exits 0, and no lock is left behind.
func TestRollingRestart(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	r.llm.Handle(echoAfter(150 * time.Millisecond))
	path := r.config(t, redisSection(db.URL, db.Prefix))
	replicas := []*process{start(t, path, nil), start(t, path, nil)}
	ctx := waitCtx(t)
	if err := r.slack.WaitOpen(ctx, 2); err != nil {
		t.Fatal(err)
	}

	const threads, perThread = 12, 8
	c := converse(ctx, r.slack, threads, perThread, r.slack.SendMessage)

	waitPosts := func(n int) {
		t.Helper()
		if _, err := r.slack.WaitPosts(ctx, n); err != nil {
			t.Fatalf("%v", err)
		}
	}
	for i := range replicas {
		waitPosts((i + 1) * threads * perThread / 3)
		if code := replicas[i].stop(t); code != 0 {
			t.Fatalf("replica %d exited with %d:\n%s", i, code, replicas[i].logs)
		}
		replicas[i] = start(t, path, nil)
	}
	if err := c.wait(); err != nil {
		for i, p := range replicas {
			t.Logf("replica %d:\n%s", i, p.logs)
		}
		t.Fatal(err)
	}
	c.check(t, r.slack)
	for i, p := range replicas {
		if code := p.stop(t); code != 0 {
			t.Errorf("replica %d exited with %d", i, code)
		}
	}
	if keys := lockKeys(t, db); len(keys) != 0 {
		t.Errorf("locks left: %v", keys)
	}
}

// conversations are people writing in threads at the same time, each
// sending "thread i message j" as soon as message j-1 was answered.
type conversations struct {
	perThread int
	roots     []string
	wg        sync.WaitGroup
	errs      chan error
}

// converse starts threads conversations of perThread messages, each sent
// with send.
func converse(ctx context.Context, s *fakeslack.Server, threads, perThread int, send func(fakeslack.Message) fakeslack.Delivery) *conversations {
	c := &conversations{perThread: perThread, roots: make([]string, threads), errs: make(chan error, threads)}
	for i := range threads {
		c.wg.Go(func() {
			thread := ""
			for j := range perThread {
				text := fmt.Sprintf("thread %d message %d", i, j)
				d := send(fakeslack.Message{Channel: testChannel, User: testPerson, Text: text, ThreadTS: thread})
				if thread == "" {
					thread = d.TS
					c.roots[i] = d.TS
				}
				if err := waitReply(ctx, s, thread, "answer to "+text); err != nil {
					c.errs <- fmt.Errorf("%s: %w", text, err)
					return
				}
			}
		})
	}
	return c
}

// wait waits for every conversation to end and returns their errors.
func (c *conversations) wait() error {
	c.wg.Wait()
	close(c.errs)
	var errs []error
	for err := range c.errs {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// check asserts that every message got exactly one reply, in order.
func (c *conversations) check(t *testing.T, s *fakeslack.Server) {
	t.Helper()
	byThread := map[string][]string{}
	posts := s.Posts()
	for _, p := range posts {
		byThread[p.ThreadTS] = append(byThread[p.ThreadTS], p.Text)
	}
	if want := len(c.roots) * c.perThread; len(posts) != want {
		t.Errorf("%d replies, want %d", len(posts), want)
	}
	for i, root := range c.roots {
		var want []string
		for j := range c.perThread {
			want = append(want, fmt.Sprintf("answer to thread %d message %d", i, j))
		}
		if got := byThread[root]; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("thread %d replies:\n%s\nwant:\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestShutdownKeepsTheSocket: after SIGTERM, while a turn is still in
// flight, the Socket Mode connection stays open: a slash command is told
// that conclave is restarting, a message event is left unacknowledged
// (Slack delivers it again), the turn's reply is posted, then conclave
// exits.
func TestShutdownKeepsTheSocket(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	release := make(chan struct{})
	var once sync.Once
	releaseModel := func() { once.Do(func() { close(release) }) }
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		<-release
		return echoLatest(req)
	})
	p := start(t, r.config(t, ""), nil)
	t.Cleanup(releaseModel) // runs before the process is stopped
	ctx := waitCtx(t)
	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "thread 0 message 0"})
	if _, err := r.llm.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p.cancel() // as SIGTERM does
	for !strings.Contains(p.logs.String(), "draining") {
		select {
		case <-ctx.Done():
			t.Fatalf("no draining after the signal:\n%s", p.logs)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cmd := r.slack.SendSlashCommand(fakeslack.SlashCommand{Command: "/list-agents", UserID: testPerson, ChannelID: testChannel, ChannelName: "claims"})
	ack, err := r.slack.WaitAck(ctx, cmd.EnvelopeID)
	if err != nil {
		t.Fatalf("a command during shutdown was not answered: %v\n%s", err, p.logs)
	}
	var answer struct{ ResponseType, Text string }
	if err := json.Unmarshal(ack.Payload, &answer); err != nil || answer.Text != "conclave is restarting, try again in a moment" {
		t.Errorf("a command during shutdown got %s", ack.Payload)
	}
	late := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thread 0 message 1"})
	if _, err := r.slack.WaitDeliveries(ctx, late.Key(), 1); err != nil {
		t.Fatal(err)
	}
	releaseModel()
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p.logs)
	}
	if n := ackCount(r.slack, late.Key()); n != 0 {
		t.Errorf("a message event during shutdown was acknowledged %d times", n)
	}
	if got := postTexts(r.slack); strings.Join(got, "|") != "answer to thread 0 message 0" {
		t.Errorf("posts = %q, want the answer of the turn in flight", got)
	}
}
