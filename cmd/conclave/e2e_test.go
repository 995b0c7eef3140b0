package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

// TestRunEndToEnd drives the real `conclave run` wiring against the fake
// Slack and the fake model: a person's message becomes one threaded reply
// by the facilitator, the envelope is acknowledged before the model is
// called, duplicates and the bot's own echo cause no turn, and a rate
// limited post is delivered after Retry-After.
func TestRunEndToEnd(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	// The first model call is held until the fake Slack has received the
	// envelope's ack. Comparing the order in which two different servers
	// (the fake Slack's socket reader, the fake model's HTTP handler) saw
	// things would race: the ack is written on the Socket Mode client's own
	// writer, so it may reach the fake Slack's reader a moment after the
	// model request reaches the fake model. Holding the call instead is
	// deterministic: an ack sent only after the model answered would never
	// arrive while the call is held, and the wait would time out.
	rootKey := make(chan string, 1)
	var mu sync.Mutex
	var ackErr error
	calls := 0
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			var err error
			select {
			case key := <-rootKey:
				_, err = r.slack.WaitAck(ctx, key)
			case <-ctx.Done():
				err = ctx.Err()
			}
			cancel()
			mu.Lock()
			ackErr = err
			mu.Unlock()
		}
		return llmfake.Text("Welcome to the claims desk, reply number " + string(rune('0'+n)) + ".")
	})
	// The first reply is rate limited once.
	r.slack.FailNext("chat.postMessage", fakeslack.Failure{Status: http.StatusTooManyRequests, RetryAfter: 1})
	p := start(t, r.config(t, ""), nil)
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "My car was hit in the car park. What do I do?"})
	rootKey <- root.Key()
	if _, err := r.slack.WaitAck(ctx, root.Key()); err != nil {
		t.Fatalf("no ack: %v\n%s", err, p.logs)
	}
	posts, err := r.slack.WaitPosts(ctx, 1)
	if err != nil {
		t.Fatalf("no reply: %v\n%s", err, p.logs)
	}
	reply := posts[0]

	t.Run("acked before the model call", func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		if calls == 0 || ackErr != nil {
			t.Errorf("model calls %d; waiting for the ack while the first call was held: %v: the ack must come first", calls, ackErr)
		}
	})
	t.Run("one threaded reply as the agent", func(t *testing.T) {
		if reply.Channel != testChannel || reply.ThreadTS != root.TS {
			t.Errorf("reply in %s thread %q, want %s thread %s", reply.Channel, reply.ThreadTS, testChannel, root.TS)
		}
		if reply.Username != "Elen" || reply.IconURL != "https://example.com/elen.png" {
			t.Errorf("posted as %q with icon %q", reply.Username, reply.IconURL)
		}
		if !strings.Contains(reply.Text, "reply number 1") {
			t.Errorf("reply text = %q", reply.Text)
		}
		if reply.UnfurlLinks != "false" || reply.UnfurlMedia != "false" {
			t.Errorf("unfurling not off: links %q media %q", reply.UnfurlLinks, reply.UnfurlMedia)
		}
	})
	t.Run("the facilitator got the built-in prompts", func(t *testing.T) {
		req := r.llm.Requests()[0]
		if req.Model != "fake-model" || req.Header.Get("Authorization") != "Bearer sk-test-model-key" {
			t.Errorf("model %q, auth %q", req.Model, req.Header.Get("Authorization"))
		}
		msgs := req.Messages
		if len(msgs) < 3 || msgs[0].Role != "system" || msgs[len(msgs)-1].Role != "user" {
			t.Fatalf("messages = %+v", msgs)
		}
		if !strings.Contains(msgs[0].Content, "Elen") || !strings.Contains(msgs[0].Content, "The claims desk") {
			t.Errorf("system prompt lacks the agent or the channel purpose:\n%s", msgs[0].Content)
		}
		if !strings.Contains(msgs[1].Content, "Ada (person): My car was hit in the car park.") {
			t.Errorf("history = %q", msgs[1].Content)
		}
	})
	t.Run("rate limited post retried after Retry-After", func(t *testing.T) {
		calls := r.slack.CallsTo("chat.postMessage")
		if len(calls) < 2 || calls[0].Status != http.StatusTooManyRequests || calls[1].Status != http.StatusOK {
			t.Fatalf("chat.postMessage calls: %+v", calls)
		}
		if waited := calls[1].At.Sub(calls[0].At); waited < time.Second {
			t.Errorf("retried after %v, before Retry-After (1s)", waited)
		}
	})

	// The same event again (a Slack retry), then the same message under a
	// new event id; the bot's own post has been echoed back too. None of
	// them may cause a turn.
	if _, ok := r.slack.Redeliver(root.Key(), "timeout"); !ok {
		t.Fatal("redeliver failed")
	}
	again := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, TS: root.TS, Text: "My car was hit in the car park. What do I do?"})
	if again.EventID == root.EventID {
		t.Fatal("the second delivery reused the event id")
	}
	if _, err := r.slack.WaitDeliveries(ctx, root.Key(), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := r.slack.WaitAck(ctx, again.Key()); err != nil {
		t.Fatal(err)
	}
	// A person's plain reply in the thread wakes the facilitator: its turn
	// runs after any turn the duplicates could have queued, so once it is
	// posted the count of model calls is final.
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "It happened this morning."})
	posts, err = r.slack.WaitPosts(ctx, 2)
	if err != nil {
		t.Fatalf("no second reply: %v\n%s", err, p.logs)
	}
	t.Run("duplicates and the echo made no turn", func(t *testing.T) {
		if n := len(r.llm.Requests()); n != 2 {
			t.Errorf("model called %d times, want 2 (the first message and the reply)", n)
		}
		if len(posts) != 2 || !strings.Contains(posts[1].Text, "reply number 2") {
			t.Errorf("posts = %d, second %q", len(posts), posts[len(posts)-1].Text)
		}
		if acks := ackCount(r.slack, root.Key()); acks != 2 {
			t.Errorf("the retried delivery was acked %d times, want 2", acks)
		}
	})
	t.Run("the second turn saw the whole thread", func(t *testing.T) {
		checkHistory(t, "the second turn's", r.llm.Requests()[1],
			"user: Ada (person): My car was hit in the car park. What do I do?",
			"assistant: Welcome to the claims desk, reply number 1.",
			"user: Ada (person): It happened this morning.",
		)
	})
	t.Run("health and readiness", func(t *testing.T) {
		for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
			if status, _ := p.get(t, path); status != want {
				t.Errorf("%s = %d, want %d", path, status, want)
			}
		}
	})
	if code := p.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}
