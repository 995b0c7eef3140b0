package main

import (
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

// TestRunStreamsReplies: with slack.stream (here from the environment),
// `conclave run` posts the first sentence while the model writes, then
// completes that message: one post, the final text. The streamed call is
// timed like any other model call.
func TestRunStreamsReplies(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	pace := make(chan struct{})
	const final = "First sentence. And the rest of the answer."
	r.llm.Reply(llmfake.Reply{Content: final, Chunks: []string{"First sentence. ", "And the rest", " of the answer."}, Pace: pace})
	p := start(t, r.config(t, ""), map[string]string{"CONCLAVE_SLACK_STREAM": "true"})
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "What do I do?"})
	posts, err := r.slack.WaitPosts(ctx, 1)
	if err != nil {
		t.Fatalf("nothing posted while the model writes: %v\n%s", err, p.logs)
	}
	first := posts[0]
	if first.Text != "First sentence." || first.ThreadTS != root.TS {
		t.Errorf("first post %q in thread %q, want the first sentence in %s", first.Text, first.ThreadTS, root.TS)
	}
	close(pace)
	for {
		if m, _ := r.slack.Current(testChannel, first.TS); m.Text == final {
			break
		}
		select {
		case <-ctx.Done():
			m, _ := r.slack.Current(testChannel, first.TS)
			t.Fatalf("the streamed message reads %q, want %q\n%s", m.Text, final, p.logs)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if n := len(r.slack.Posts()); n != 1 {
		t.Errorf("%d posts, want the streamed message only", n)
	}
	if reqs := r.llm.Requests(); len(reqs) != 1 || !reqs[0].Stream {
		t.Errorf("%d model requests, want one streamed", len(reqs))
	}
	// Timed like any other model call.
	for {
		n, _ := p.scrape(t).sum("conclave_llm_request_duration_seconds_count", `role="facilitator"`, `outcome="ok"`)
		if n >= 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("conclave_llm_request_duration_seconds_count{role=\"facilitator\",outcome=\"ok\"} = %v after a streamed reply, want 1", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
