package bot

import (
	"reflect"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

// A streamed reply: its text so far posted as part 1 with the post id,
// then the message updated in place; the final update reads like the
// reply posted at once.
func TestPostReplyUpdatesAStreamedMessage(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	reply := agents.Reply{Channel: "C1", ThreadTS: "1690000000.000001", Username: "Elen", TurnID: "turn-s"}
	final := "Use `a < b && c > d`. Then ask <@U1> & [docs](https://x.example)."

	partial := reply
	partial.Text, partial.Partial = "Use `a < b", true
	ts, err := postFirst(ctx, r.web, partial)
	if err != nil {
		t.Fatal(err)
	}
	done := reply
	done.Text, done.Update, done.Mention = final, ts, []string{"U2"}
	posted, err := r.web.PostReply(ctx, done)
	if err != nil || !reflect.DeepEqual(posted, []string{ts}) {
		t.Fatalf("PostReply = %v, %v; want the streamed message %s", posted, err, ts)
	}

	once := reply
	once.Text, once.Mention = final, []string{"U2"}
	if _, err := r.web.PostReply(ctx, once); err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Posts()
	if len(posts) != 2 {
		t.Fatalf("%d posts, want the streamed one and the one posted at once", len(posts))
	}
	got, _ := r.fake.Current("C1", ts)
	want := posts[1]
	if got.Text != want.Text || string(got.Blocks) != string(want.Blocks) {
		t.Errorf("updated message reads\n%q %s\nwant as posted at once\n%q %s", got.Text, got.Blocks, want.Text, want.Blocks)
	}
	if got.Metadata == nil || got.Metadata.EventPayload["turn_id"] != "turn-s" || got.Metadata.EventPayload["part"] != float64(1) {
		t.Errorf("metadata after the update: %+v", got.Metadata)
	}
	if u := r.fake.Updates(); len(u) != 1 || u[0].TS != ts || u[0].Form().Get("thread_ts") != "" || u[0].Form().Get("username") != "" {
		t.Errorf("updates %+v: want one, of %s, without a thread or a name", u, ts)
	}
}

// Text being streamed shows its first part only.
func TestPostReplyPartialPostsOnePart(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	long := strings.Repeat(strings.Repeat("A sentence about claims. ", 100)+"\n\n", 10)
	posted, err := r.web.PostReply(ctx, agents.Reply{Channel: "C1", ThreadTS: "1690000000.000001", Text: long, TurnID: "t", Partial: true})
	if err != nil || len(posted) != 1 {
		t.Fatalf("PostReply = %v, %v; want one part", posted, err)
	}
	if md := r.fake.Posts()[0].MarkdownTexts(); len(md) != 1 || len(md[0]) > blockLimit || !strings.HasPrefix(long, md[0]) {
		t.Errorf("partial post holds %d bytes, want the first part of the text", len(md[0]))
	}
}

// A streamed message deleted meanwhile: the reply is posted anew, not
// lost.
func TestPostReplyPostsAnewWhenTheStreamedMessageIsGone(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	posted, err := r.web.PostReply(ctx, agents.Reply{Channel: "C1", ThreadTS: "1690000000.000001", Text: "Final.", TurnID: "t", Update: "1690000000.999999"})
	if err != nil || len(posted) != 1 || posted[0] == "1690000000.999999" {
		t.Fatalf("PostReply = %v, %v; want a new message", posted, err)
	}
	if p := r.fake.Posts(); len(p) != 1 || p[0].TS != posted[0] || p[0].Text != "Final." {
		t.Errorf("posts %+v", p)
	}
	if !strings.Contains(r.logs.String(), "code=message_not_found") {
		t.Errorf("no log of the failed update:\n%s", r.logs)
	}
}
