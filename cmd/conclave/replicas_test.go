package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

func redisSection(url, prefix string) string {
	return fmt.Sprintf("\n[memory]\nredis_url = %q\nkey_prefix = %q\n", url, prefix)
}

var personLine = regexp.MustCompile(`\(person\): (thread \d+ message \d+)`)

// echoLatest makes the model answer with the newest person message it was
// shown, so every reply says which message it answers.
func echoLatest(req llmfake.Request) llmfake.Reply {
	latest := ""
	for _, m := range req.Messages {
		if got := personLine.FindAllStringSubmatch(m.Content, -1); m.Role == "user" && got != nil {
			latest = got[len(got)-1][1]
		}
	}
	return llmfake.Text("answer to " + latest)
}

// deliverTwice sends a message and the same message again under a new
// event id to another connection than the one the first went to, plus a
// retry of the first delivery: Slack's duplicates and retries at once.
func deliverTwice(t *testing.T, s *fakeslack.Server, m fakeslack.Message) fakeslack.Delivery {
	t.Helper()
	d := s.SendMessage(m)
	first := -1
	for _, sent := range s.Deliveries() {
		if sent.Key == d.Key() {
			first = sent.Conn
			break
		}
	}
	dup := m
	dup.TS = d.TS
	for _, c := range s.OpenConnections() {
		if c != first {
			dup.Conn = c
			break
		}
	}
	s.SendMessage(dup)
	s.Redeliver(d.Key(), "timeout")
	return d
}

// TestReplicasAnswerEveryTriggerOnce runs two `conclave run` replicas on
// one Redis. The fake Slack routes each event to a random connection and
// sends a duplicate (same ts, new event id) to the other, plus a retry:
// 100 messages in 20 threads get exactly 100 replies, each answering its
// own message.
func TestReplicasAnswerEveryTriggerOnce(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true, Route: fakeslack.RouteRandom})
	r.llm.Handle(echoLatest)
	path := r.config(t, redisSection(db.URL, db.Prefix))
	replicas := []*process{start(t, path, nil), start(t, path, nil)}
	ctx := waitCtx(t)
	if err := r.slack.WaitOpen(ctx, 2); err != nil {
		t.Fatal(err)
	}

	const threads, perThread = 20, 5
	c := converse(ctx, r.slack, threads, perThread, func(m fakeslack.Message) fakeslack.Delivery {
		return deliverTwice(t, r.slack, m)
	})
	if err := c.wait(); err != nil {
		t.Fatal(err)
	}

	// Every delivery is acknowledged; duplicates are refused while being
	// recorded, so nothing more can be queued behind them.
	for _, d := range r.slack.Deliveries() {
		if _, err := r.slack.WaitAck(ctx, d.Key); err != nil {
			t.Fatalf("delivery %s never acknowledged: %v", d.Key, err)
		}
	}
	c.check(t, r.slack)
	if n := len(r.llm.Requests()); n != threads*perThread {
		t.Errorf("model called %d times, want %d", n, threads*perThread)
	}
	// Both replicas did part of the work.
	for i, p := range replicas {
		if n := strings.Count(p.logs.String(), `"msg":"turn"`); n == 0 {
			t.Errorf("replica %d ran no turn", i)
		}
	}
	conns := map[int]bool{}
	for _, a := range r.slack.Acks() {
		conns[a.Conn] = true
	}
	if len(conns) != 2 {
		t.Errorf("acks came on %d connections, want 2", len(conns))
	}
}

// waitReply waits until the thread holds a post with text.
func waitReply(ctx context.Context, s *fakeslack.Server, thread, text string) error {
	for {
		for _, p := range s.Posts() {
			if p.ThreadTS == thread && p.Text == text {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			var seen []string
			for _, p := range s.Posts() {
				if p.ThreadTS == thread {
					seen = append(seen, p.Text)
				}
			}
			sort.Strings(seen)
			return fmt.Errorf("no reply %q (thread has %q): %w", text, seen, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestRedisRestartMidConversation stops Redis while a person writes: the
// event cannot be recorded, so it is not acknowledged; Slack delivers it
// again once Redis is back, and it is answered exactly once.
func TestRedisRestartMidConversation(t *testing.T) {
	srv := redistest.Start(t)
	db := redistest.WithPrefix(t, srv.URL())
	r := newRig(t, fakeslack.Options{EchoPosts: true, AckTimeout: 500 * time.Millisecond, MaxRetries: 20})
	r.llm.Handle(echoLatest)
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)), nil)
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "thread 0 message 0"})
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 0"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}

	srv.Stop()
	second := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thread 0 message 1"})
	// While Redis is down the delivery is retried, never acknowledged.
	if _, err := r.slack.WaitDeliveries(ctx, second.Key(), 2); err != nil {
		t.Fatal(err)
	}
	if n := ackCount(r.slack, second.Key()); n != 0 {
		t.Fatalf("acknowledged %d times while the store was down", n)
	}
	if status, _ := p.get(t, "/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d with Redis down, want 503", status)
	}

	srv.Restart()
	if _, err := r.slack.WaitAck(ctx, second.Key()); err != nil {
		t.Fatalf("not acknowledged after Redis came back: %v\n%s", err, p.logs)
	}
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 1"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	// A third message proves the conversation goes on, and that nothing
	// was queued twice before it.
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thread 0 message 2"})
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 2"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	texts := postTexts(r.slack)
	want := []string{"answer to thread 0 message 0", "answer to thread 0 message 1", "answer to thread 0 message 2"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("posts = %q, want %q", texts, want)
	}
	if n := len(r.llm.Requests()); n != 3 {
		t.Errorf("model called %d times, want 3", n)
	}
}

// TestReplicaStoppedMidTurn stops the replica whose model call is in
// flight (longer than its shutdown grace): the other replica takes the
// turn over and the reply is posted exactly once.
func TestReplicaStoppedMidTurn(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	var mu sync.Mutex
	calls := 0
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			// The first replica's call outlives its grace; it is cancelled.
			return llmfake.Slow(20*time.Second, "too late")
		}
		return echoLatest(req)
	})
	path := r.config(t, redisSection(db.URL, db.Prefix))
	rewrite(t, path, `shutdown_grace = "5s"`, `shutdown_grace = "300ms"`)
	first := start(t, path, nil)
	ctx := waitCtx(t)
	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "thread 0 message 0"})
	if _, err := r.llm.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if code := first.stop(t); code != 0 {
		t.Fatalf("first replica exited with %d:\n%s", code, first.logs)
	}
	second := start(t, path, nil)
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 0"); err != nil {
		t.Fatalf("%v\nfirst:\n%s\nsecond:\n%s", err, first.logs, second.logs)
	}
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thread 0 message 1"})
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 1"); err != nil {
		t.Fatal(err)
	}
	texts := postTexts(r.slack)
	want := []string{"answer to thread 0 message 0", "answer to thread 0 message 1"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("posts = %q, want %q", texts, want)
	}
}

// rewrite replaces the first occurrence of old by new in the file at
// path.
func rewrite(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}
