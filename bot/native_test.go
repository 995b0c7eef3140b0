package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testclock"
)

// streamRig is a rig whose WebAPI streams natively on clock, in a thread
// of C1 (or the DM D1) a person opened.
type streamRig struct {
	*rig
	clock  *testclock.Clock
	thread string
}

func newStreamRig(t *testing.T, fopts fakeslack.Options, channel string) *streamRig {
	t.Helper()
	clock := testclock.New(time.Unix(1_800_000_000, 0))
	if fopts.Now == nil {
		fopts.Now = clock.Now
	}
	r := newRig(t, fopts, func(o *Options) { o.Now = clock.Now })
	if _, err := r.web.Identify(testContext(t)); err != nil {
		t.Fatal(err)
	}
	thread := r.fake.SendMessage(fakeslack.Message{Channel: channel, User: "U1", Text: "How do claims work?"}).TS
	return &streamRig{rig: r, clock: clock, thread: thread}
}

// reply is the rig's reply being written, so far text.
func (s *streamRig) reply(channel, text string) agents.Reply {
	return agents.Reply{
		Channel: channel, ThreadTS: s.thread, Username: "Elen", IconURL: "https://img.example/elen.png",
		TurnID: "turn-1", Recipient: "U1", Text: text, Partial: true,
	}
}

// writeReply posts a reply the way the engine streams it: the text so
// far at each step (the clock moving a second between steps), then the
// final text with feedback buttons. It returns the message's ts.
func (s *streamRig) writeReply(t *testing.T, channel string, steps []string, final string, between func(i int, ts string)) string {
	t.Helper()
	ctx := testContext(t)
	ts := ""
	for i, text := range steps {
		r := s.reply(channel, text)
		r.Update = ts
		posted, err := s.web.PostReply(ctx, r)
		if err != nil || len(posted) != 1 {
			t.Fatalf("step %d: PostReply = %v, %v", i, posted, err)
		}
		ts = posted[0]
		s.clock.Advance(time.Second)
		if between != nil {
			between(i, ts)
		}
	}
	r := s.reply(channel, final)
	r.Partial, r.Update, r.Feedback = false, ts, "fb-ref"
	posted, err := s.web.PostReply(ctx, r)
	if err != nil || len(posted) != 1 || posted[0] != ts {
		t.Fatalf("final PostReply = %v, %v; want the streamed message %s", posted, err, ts)
	}
	return ts
}

// postedAtOnce is how the final reply reads when posted without
// streaming, in a rig of its own.
func postedAtOnce(t *testing.T, final string) fakeslack.Post {
	t.Helper()
	r := newRig(t, fakeslack.Options{}, func(o *Options) { o.StreamMethod = StreamUpdate })
	_, err := r.web.PostReply(testContext(t), agents.Reply{Channel: "C1", ThreadTS: "1690000000.000001", Username: "Elen", TurnID: "turn-1", Text: final, Feedback: "fb-ref"})
	if err != nil {
		t.Fatal(err)
	}
	return r.fake.Posts()[0]
}

var (
	streamSteps = []string{
		"Claims start with a form.",
		"Claims start with a form. " + strings.Repeat("Then an adjuster reads it. ", 12),
		"Claims start with a form. " + strings.Repeat("Then an adjuster reads it. ", 12) + "A decision follows in `a < b` days",
	}
	streamFinal = "Claims start with a form. " + strings.Repeat("Then an adjuster reads it. ", 12) + "A decision follows in `a < b` days & a letter."
)

// messagesBy counts the messages conclave started in the fake: posts and
// streams.
func messagesBy(fake *fakeslack.Server) int {
	n := 0
	for _, m := range []string{"chat.postMessage", "chat.startStream"} {
		for _, c := range fake.CallsTo(m) {
			if c.Error == "" && c.Status == 200 {
				n++
			}
		}
	}
	return n
}

// A reply streams natively: the stream started as the agent, to the
// person who asked, with the first sentence; appends of what was
// written; the stop with the rest, the feedback buttons and the post id.
// The message then reads as the reply posted at once.
func TestNativeStreamReply(t *testing.T) {
	s := newStreamRig(t, fakeslack.Options{}, "C1")
	ts := s.writeReply(t, "C1", streamSteps, streamFinal, nil)

	start := s.fake.CallsTo("chat.startStream")
	if len(start) != 1 {
		t.Fatalf("%d chat.startStream calls, want 1", len(start))
	}
	f := start[0].Form
	if f.Get("recipient_user_id") != "U1" || f.Get("recipient_team_id") != "T0001" || f.Get("thread_ts") != s.thread ||
		f.Get("username") != "Elen" || f.Get("icon_url") != "https://img.example/elen.png" || f.Get("markdown_text") != "Claims start with a form." {
		t.Errorf("chat.startStream form %v", f)
	}
	appends := s.fake.CallsTo("chat.appendStream")
	if len(appends) == 0 {
		t.Fatal("no chat.appendStream")
	}
	for _, c := range appends {
		if n := len([]rune(c.Form.Get("markdown_text"))); n == 0 || n >= 12000 {
			t.Errorf("append of %d characters", n)
		}
	}
	stop := s.fake.CallsTo("chat.stopStream")
	if len(stop) != 1 || !strings.Contains(stop[0].Form.Get("blocks"), `"context_actions"`) || !strings.Contains(stop[0].Form.Get("metadata"), `"turn-1"`) {
		t.Fatalf("chat.stopStream calls %+v: want one with the feedback buttons and the post id", stop)
	}
	if n := len(s.fake.CallsTo("chat.update")) + len(s.fake.Posts()); n != 0 {
		t.Errorf("%d chat.update or chat.postMessage calls beside the stream", n)
	}
	got, _ := s.fake.Current("C1", ts)
	want := postedAtOnce(t, streamFinal)
	if md, wmd := got.MarkdownTexts(), want.MarkdownTexts(); len(md) != 1 || len(wmd) != 1 || md[0] != wmd[0] {
		t.Errorf("streamed message reads %q, want %q", md, wmd)
	}
	if got.Metadata == nil || got.Metadata.EventPayload["turn_id"] != "turn-1" {
		t.Errorf("metadata %+v", got.Metadata)
	}
	found, err := s.web.FindPost(testContext(t), "C1", s.thread, "turn-1")
	if err != nil || len(found) != 1 || found[0] != ts {
		t.Errorf("FindPost = %v, %v; want the streamed message", found, err)
	}
}

// Text is appended once 256 characters of it wait, or a second after the
// last append; never what is not settled yet (a sentence being written).
func TestNativeStreamAppendsInChunks(t *testing.T) {
	s := newStreamRig(t, fakeslack.Options{}, "C1")
	ctx := testContext(t)
	ts, err := postFirst(ctx, s.web, s.reply("C1", "One."))
	if err != nil {
		t.Fatal(err)
	}
	appends := func() int { return len(s.fake.CallsTo("chat.appendStream")) }
	post := func(text string) {
		t.Helper()
		r := s.reply("C1", text)
		r.Update = ts
		if _, err := s.web.PostReply(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	post("One. Two. Thr")
	if appends() != 0 {
		t.Errorf("appended within the second, with little waiting")
	}
	long := "One. Two. " + strings.Repeat("word ", 60) + "end.\n"
	post(long)
	if appends() != 1 {
		t.Errorf("%d appends; want one once 256 characters wait", appends())
	}
	post(long + "Three. Fo")
	if appends() != 1 {
		t.Errorf("%d appends; want none within the second", appends())
	}
	s.clock.Advance(time.Second)
	post(long + "Three. Fo")
	if c := s.fake.CallsTo("chat.appendStream"); len(c) != 2 || c[1].Form.Get("markdown_text") != "\nThree. " {
		t.Errorf("appends %+v; want \"\\nThree. \" a second later", c)
	}
}

// Every way a stream ends or is refused falls back to chat.update of the
// same message: the full text in it, exactly once.
func TestNativeStreamFallbacks(t *testing.T) {
	cases := []struct {
		name    string
		channel string
		setup   func(s *streamRig)
		between func(s *streamRig, i int, ts string)
		native  bool // the reply was streamed (else posted and updated)
	}{
		{name: "message_not_in_streaming_state mid-reply", channel: "C1", native: true,
			between: func(s *streamRig, i int, ts string) {
				if i == 0 {
					s.fake.EndStream("C1", ts)
				}
			}},
		{name: "a stream past its expiry (Slack's clock)", channel: "C1", native: true,
			between: func(s *streamRig, i int, _ string) {
				if i == 1 {
					s.clock.Advance(3 * time.Minute) // the fake ends streams after 2 minutes here
				}
			}},
		{name: "a stream older than 4 minutes", channel: "C1", native: true,
			between: func(s *streamRig, i int, _ string) {
				if i == 1 {
					s.clock.Advance(4 * time.Minute)
				}
			}},
		{name: "channel_type_not_supported", channel: "C1",
			setup: func(s *streamRig) { s.fake.RefuseStreams("channel") }},
		{name: "unknown_method", channel: "C1",
			setup: func(s *streamRig) {
				s.fake.FailNext("chat.startStream", fakeslack.Failure{Error: "unknown_method", Times: 100})
			}},
		{name: "chat.stopStream refused", channel: "C1", native: true,
			setup: func(s *streamRig) {
				s.fake.FailNext("chat.stopStream", fakeslack.Failure{Error: "internal_error"})
			}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			fopts := fakeslack.Options{}
			if strings.Contains(tt.name, "Slack's clock") {
				fopts.StreamExpiry = 2 * time.Minute
			}
			s := newStreamRig(t, fopts, tt.channel)
			if tt.setup != nil {
				tt.setup(s)
			}
			var between func(int, string)
			if tt.between != nil {
				between = func(i int, ts string) { tt.between(s, i, ts) }
			}
			ts := s.writeReply(t, tt.channel, streamSteps, streamFinal, between)
			if n := messagesBy(s.fake); n != 1 {
				t.Errorf("%d messages started, want 1", n)
			}
			if started := len(s.fake.CallsTo("chat.startStream")) > 0 && s.fake.CallsTo("chat.startStream")[0].Error == ""; started != tt.native {
				t.Errorf("streamed natively: %v, want %v", started, tt.native)
			}
			if s.fake.Streaming(tt.channel, ts) {
				t.Error("the stream is still open")
			}
			got, _ := s.fake.Current(tt.channel, ts)
			want := postedAtOnce(t, streamFinal)
			if md, wmd := got.MarkdownTexts(), want.MarkdownTexts(); len(md) != 1 || md[0] != wmd[0] {
				t.Errorf("message reads %q, want %q", md, wmd)
			}
			if !strings.Contains(string(got.Blocks), `"context_actions"`) || got.Metadata == nil || got.Metadata.EventPayload["turn_id"] != "turn-1" {
				t.Errorf("message %+v: want the feedback buttons and the post id", got)
			}
			if u := s.fake.Updates(); len(u) == 0 || u[len(u)-1].TS != ts {
				t.Errorf("updates %+v: want the final text by chat.update of %s", u, ts)
			}
		})
	}
}

// A refusal for a channel type is remembered: the next reply in a
// channel does not ask again, while a DM still streams.
func TestNativeStreamRefusalIsRemembered(t *testing.T) {
	s := newStreamRig(t, fakeslack.Options{}, "C1")
	s.fake.RefuseStreams("channel")
	ctx := testContext(t)
	for range 2 {
		if _, err := s.web.PostReply(ctx, s.reply("C1", "One sentence.")); err != nil {
			t.Fatal(err)
		}
	}
	if c := s.fake.CallsTo("chat.startStream"); len(c) != 1 {
		t.Errorf("%d chat.startStream calls; want the refusal remembered after one", len(c))
	}
	if !strings.Contains(s.logs.String(), "channel_type_not_supported") {
		t.Errorf("the refusal is not logged:\n%s", s.logs)
	}
	dm := s.fake.SendMessage(fakeslack.Message{Channel: "D1", User: "U1", Text: "hi"}).TS
	r := s.reply("D1", "In a DM.")
	r.ThreadTS, r.Recipient = dm, ""
	if _, err := s.web.PostReply(ctx, r); err != nil {
		t.Fatal(err)
	}
	if c := s.fake.CallsTo("chat.startStream"); len(c) != 2 || c[1].Error != "" || c[1].Form.Has("recipient_user_id") {
		t.Errorf("in a DM: %+v; want a stream without a recipient", c)
	}
}

// A final reply that mentions users (a block a stream cannot show at its
// top), and a stream this process did not start (before a restart): the
// stream is stopped and the message updated.
func TestNativeStreamStoppedThenUpdated(t *testing.T) {
	t.Run("mentions", func(t *testing.T) {
		s := newStreamRig(t, fakeslack.Options{}, "C1")
		ctx := testContext(t)
		ts, err := postFirst(ctx, s.web, s.reply("C1", "Asking Claudine."))
		if err != nil {
			t.Fatal(err)
		}
		r := s.reply("C1", "Asking Claudine. Over to you.")
		r.Partial, r.Update, r.Mention = false, ts, []string{"U2"}
		if _, err := s.web.PostReply(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, _ := s.fake.Current("C1", ts)
		if s.fake.Streaming("C1", ts) || !strings.HasPrefix(got.Text, "<@U2> ") || got.MarkdownTexts()[0] != "Asking Claudine. Over to you." {
			t.Errorf("message %+v: want the stream stopped, the mention and the text", got)
		}
	})
	t.Run("restart", func(t *testing.T) {
		s := newStreamRig(t, fakeslack.Options{}, "C1")
		ctx := testContext(t)
		api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(s.fake.APIURL()))
		_, ts, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS(s.thread), slack.MsgOptionMarkdownText("Half a "),
			slack.MsgOptionRecipientUserID("U1"), slack.MsgOptionRecipientTeamID("T0001"))
		if err != nil {
			t.Fatal(err)
		}
		r := s.reply("C1", "Half a reply, finished by the next run.")
		r.Partial, r.Update = false, ts
		posted, err := s.web.PostReply(ctx, r)
		if err != nil || len(posted) != 1 || posted[0] != ts {
			t.Fatalf("PostReply = %v, %v; want the stream's message", posted, err)
		}
		got, _ := s.fake.Current("C1", ts)
		if s.fake.Streaming("C1", ts) || got.MarkdownTexts()[0] != "Half a reply, finished by the next run." || len(s.fake.Posts()) != 0 {
			t.Errorf("message %+v, %d posts: want the stream stopped and updated in place", got, len(s.fake.Posts()))
		}
	})
}

// With slack.stream_method = "update" nothing streams natively.
func TestStreamMethodUpdate(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, func(o *Options) { o.StreamMethod = StreamUpdate })
	ctx := testContext(t)
	thread := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "q"}).TS
	ts, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", ThreadTS: thread, Text: "So far.", Partial: true, Recipient: "U1", TurnID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.web.PostReply(ctx, agents.Reply{Channel: "C1", ThreadTS: thread, Text: "So far. Done.", Update: ts, TurnID: "t"}); err != nil {
		t.Fatal(err)
	}
	if len(r.fake.CallsTo("chat.startStream"))+len(r.fake.CallsTo("chat.stopStream")) != 0 || len(r.fake.Updates()) != 1 {
		t.Errorf("calls %v: want a post and an update only", r.fake.Calls())
	}
}
