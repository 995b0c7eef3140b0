package main

import (
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

// TestRunStreamsReplies: with slack.stream (here from the environment) and
// slack.stream_method = "update", `conclave run` posts the first sentence
// while the model writes, then completes that message: one post, the
// final text. The streamed call is timed like any other model call.
func TestRunStreamsReplies(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	pace := make(chan struct{})
	const final = "First sentence. And the rest of the answer."
	r.llm.Reply(llmfake.Reply{Content: final, Chunks: []string{"First sentence. ", "And the rest", " of the answer."}, Pace: pace})
	p := start(t, r.config(t, ""), map[string]string{"CONCLAVE_SLACK_STREAM": "true", "CONCLAVE_SLACK_STREAM_METHOD": "update"})
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

// TestRunStreamsRepliesNatively: with slack.stream and the default
// stream method, the reply streams through Slack's streaming methods, over
// the real socketmode client and the fake: the stream starts with the
// first sentence, to the person who asked, as the agent; it stops with
// the feedback buttons and the post id; the message then reads as the
// model wrote, and nothing else was posted.
func TestRunStreamsRepliesNatively(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	pace := make(chan struct{})
	const final = "First sentence. And the rest of the answer."
	r.llm.Reply(llmfake.Reply{Content: final, Chunks: []string{"First sentence. ", "And the rest", " of the answer."}, Pace: pace})
	p := start(t, r.config(t, ""), map[string]string{"CONCLAVE_SLACK_STREAM": "true"})
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "What do I do?"})
	starts, err := r.slack.WaitCalls(ctx, "chat.startStream", 1)
	if err != nil {
		t.Fatalf("no stream started while the model writes: %v\n%s", err, p.logs)
	}
	f := starts[0].Form
	if starts[0].Error != "" || f.Get("markdown_text") != "First sentence." || f.Get("thread_ts") != root.TS ||
		f.Get("recipient_user_id") != testPerson || f.Get("recipient_team_id") == "" || f.Get("username") == "" {
		t.Errorf("chat.startStream %+v: want the first sentence, to %s, as the agent, in %s", starts[0], testPerson, root.TS)
	}
	close(pace)
	stops, err := r.slack.WaitCalls(ctx, "chat.stopStream", 1)
	if err != nil {
		t.Fatalf("the stream was not stopped: %v\n%s", err, p.logs)
	}
	if !strings.Contains(stops[0].Form.Get("blocks"), `"feedback_buttons"`) || !strings.Contains(stops[0].Form.Get("metadata"), "conclave_turn") {
		t.Errorf("chat.stopStream %v: want the feedback buttons and the post id", stops[0].Form)
	}
	ts := stops[0].Form.Get("ts")
	if m, _ := r.slack.Current(testChannel, ts); m.Text != final || m.ThreadTS != root.TS {
		t.Errorf("the streamed message reads %q in %q, want %q", m.Text, m.ThreadTS, final)
	}
	if n := len(r.slack.Posts()) + len(r.slack.Updates()); n != 0 {
		t.Errorf("%d posts and updates beside the stream", n)
	}
}
