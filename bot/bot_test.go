package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/internal/testlog"
)

// recorder is a Handler that keeps what it is given. before, when set, runs
// first and may fail or block.
type recorder struct {
	mu      sync.Mutex
	events  []agents.Event
	changed chan struct{}
	before  func(ctx context.Context, ev agents.Event, call int) error
	calls   int
	acked   []agents.Event // events whose ticket the Bot dispatched (after their ack)
	// dispatches is closed and replaced at each dispatch.
	dispatches chan struct{}
}

// dispatched records an event whose ticket the Bot dispatched.
func (r *recorder) dispatched(ev agents.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked = append(r.acked, ev)
	close(r.dispatches)
	r.dispatches = make(chan struct{})
}

// waitDispatched returns the events whose ticket was dispatched once there
// are at least n.
func (r *recorder) waitDispatched(t *testing.T, n int) []agents.Event {
	t.Helper()
	return r.waitCount(t, n, "%d tickets dispatched, want %d", func() ([]agents.Event, chan struct{}) { return r.acked, r.dispatches })
}

// waitCount returns a copy of the events read gives (under r.mu) once
// there are at least n, waiting on the channel it gives, closed at each
// change; fail says how many there were and how many were wanted.
func (r *recorder) waitCount(t *testing.T, n int, fail string, read func() ([]agents.Event, chan struct{})) []agents.Event {
	t.Helper()
	ctx := testContext(t)
	for {
		r.mu.Lock()
		got, ch := read()
		evs := append([]agents.Event(nil), got...)
		r.mu.Unlock()
		if len(evs) >= n {
			return evs
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf(fail, len(evs), n)
		}
	}
}

func (r *recorder) ackedEvents() []agents.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]agents.Event(nil), r.acked...)
}

func newRecorder() *recorder {
	return &recorder{changed: make(chan struct{}), dispatches: make(chan struct{})}
}

func (r *recorder) Record(ctx context.Context, ev agents.Event) (agents.Ticket, error) {
	r.mu.Lock()
	r.calls++
	call := r.calls
	before := r.before
	r.mu.Unlock()
	if before != nil {
		if err := before(ctx, ev, call); err != nil {
			return agents.Ticket{}, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	close(r.changed)
	r.changed = make(chan struct{})
	return agents.NewTicket(func() { r.dispatched(ev) }), nil
}

// wait returns the recorded events once there are at least n.
func (r *recorder) wait(t *testing.T, n int) []agents.Event {
	t.Helper()
	return r.waitCount(t, n, "handler got %d events, want %d", func() ([]agents.Event, chan struct{}) { return r.events, r.changed })
}

// waitFor returns the recorded events once one has the given ts and kind.
func (r *recorder) waitFor(t *testing.T, ts string, kind agents.EventKind) []agents.Event {
	t.Helper()
	for n := 1; ; n++ {
		evs := r.wait(t, n)
		for _, ev := range evs {
			if ev.TS == ts && ev.Kind == kind {
				return evs
			}
		}
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var (
	testUsers = []fakeslack.User{
		{ID: "U1", Name: "ada", RealName: "Ada Lovelace", DisplayName: "ada.l"},
		{ID: "U2", Name: "bob", RealName: "Bob Stone"},
	}
	testChannels = []fakeslack.Channel{
		{ID: "C1", Name: "claims", Purpose: "Claims desk: <#C2|ops> &amp; <@U1>"},
		{ID: "C2", Name: "ops"},
	}
)

type rig struct {
	fake *fakeslack.Server
	web  *WebAPI
	bot  *Bot
	rec  *recorder
	logs *testlog.Buffer
}

// newRig starts a fake Slack and a Bot connected to it, stopped at the end
// of the test.
func newRig(t *testing.T, fopts fakeslack.Options, edit func(*Options)) *rig {
	t.Helper()
	if fopts.Users == nil {
		fopts.Users = testUsers
	}
	if fopts.Channels == nil {
		fopts.Channels = testChannels
	}
	fake := fakeslack.New(t, fopts)
	r := &rig{fake: fake, rec: newRecorder(), logs: &testlog.Buffer{}}
	opts := Options{
		AppToken: fakeslack.AppToken, BotToken: fakeslack.BotToken, APIURL: fake.APIURL(),
		IPFSGateway: "https://gw.example/ipfs", PingTimeout: 5 * time.Second, WorkingReaction: "hourglass_flowing_sand",
	}
	if edit != nil {
		edit(&opts)
	}
	r.web = NewWebAPI(opts, slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	r.bot = New(r.web, r.rec, nil)
	return r
}

// answerCommands gives the rig's transport a command handler (before run).
func (r *rig) answerCommands(h CommandHandler) {
	r.bot = New(r.web, r.rec, h)
}

// run starts the Bot and waits for its socket; Run's result is checked at
// the end of the test.
func (r *rig) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.bot.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if err := r.fake.WaitOpen(testContext(t), 1); err != nil {
		t.Fatal(err)
	}
}

func TestEventIsAcknowledgedRightAfterHandle(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	var seqAtReturn int64
	r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
		close(entered)
		<-release
		seqAtReturn = r.fake.Seq()
		return nil
	}
	r.run(t)
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "hi <@U2> &amp; <#C2|ops>"})
	<-entered
	if acks := r.fake.Acks(); len(acks) != 0 {
		t.Fatalf("acknowledged before Handle returned: %+v", acks)
	}
	close(release)
	ack, err := r.fake.WaitAck(testContext(t), d.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Seq != seqAtReturn+1 {
		t.Errorf("ack is record %d, Handle returned at %d: something came between (%+v)", ack.Seq, seqAtReturn, r.fake.Calls())
	}
	ev := r.rec.wait(t, 1)[0]
	want := agents.Event{
		ID: d.EventID, Team: "T0001", Channel: "C1", TS: d.TS, UserID: "U1",
		Raw: "hi <@U2> &amp; <#C2|ops>", Text: "hi @Bob Stone & #ops", UserName: "ada.l", At: agents.TSTime(d.TS),
	}
	if ev != want {
		t.Errorf("event\n got %+v\nwant %+v", ev, want)
	}
}

func TestHandleErrorLeavesEnvelopeForRedelivery(t *testing.T) {
	// The redelivery comes after AckTimeout; the successful delivery must
	// be acknowledged before another, which a loaded machine may take a
	// while to do.
	r := newRig(t, fakeslack.Options{AckTimeout: 1500 * time.Millisecond}, nil)
	r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
		if call == 1 {
			return errors.New("store unreachable")
		}
		return nil
	}
	r.run(t)
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "keep me"})
	evs := r.rec.wait(t, 1)
	ack, err := r.fake.WaitAck(testContext(t), d.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.RetryAttempt != 1 {
		t.Errorf("acknowledged delivery attempt %d, want the retry (1)", ack.RetryAttempt)
	}
	if evs[0].ID != d.EventID || evs[0].Text != "keep me" {
		t.Errorf("handled %+v", evs[0])
	}
	for _, a := range r.fake.Acks() {
		if a.Key == d.EventID && a.RetryAttempt == 0 {
			t.Errorf("the failed delivery was acknowledged: %+v", a)
		}
	}
	if !strings.Contains(r.logs.String(), "store unreachable") {
		t.Errorf("the failure was not logged:\n%s", r.logs)
	}
}

func TestOwnEchoNeverReachesHandle(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true}, nil)
	r.run(t)
	ctx := testContext(t)
	if _, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", ThreadTS: "1690000000.000001", Text: "an answer", Username: "Elen"}); err != nil {
		t.Fatal(err)
	}
	// Envelopes are handled in order: once the next message is handled,
	// the echo has been dealt with.
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "after"})
	evs := r.rec.wait(t, 1)
	if len(evs) != 1 || evs[0].TS != d.TS {
		t.Fatalf("handled %+v, want only the person's message", evs)
	}
	if _, err := r.fake.WaitAck(ctx, d.EventID); err != nil {
		t.Fatal(err)
	}
	if acks := r.fake.Acks(); len(acks) != 2 {
		t.Errorf("acks = %+v, want the echo acknowledged too", acks)
	}
}

func TestNoiseNeverReachesHandle(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	r.run(t)
	ignored := []fakeslack.Delivery{
		r.fake.SendMessage(fakeslack.Message{Channel: "D1", User: "U1", Text: "a DM"}),
		r.fake.SendMessage(fakeslack.Message{Channel: "G5", ChannelType: "mpim", User: "U1", Text: "a group DM"}),
		r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Subtype: "channel_join", Text: "<@U1> has joined the channel"}),
		r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Subtype: "channel_topic", Text: "set the channel topic"}),
		r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "UBOT", BotID: "BBOT", Subtype: "bot_message", Text: "own"}),
		r.fake.SendEvent(map[string]any{"type": "reaction_added", "user": "U1", "reaction": "eyes"}, 0),
		r.fake.SendEnvelope("events_api", json.RawMessage(`{"type":"event_callback","event_id":"EvBad","event":{"type":"message","channel":"C1","ts":7}}`), 0),
	}
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "counts"})
	evs := r.rec.wait(t, 1)
	if len(evs) != 1 || evs[0].TS != d.TS {
		t.Fatalf("handled %+v, want only the last message", evs)
	}
	ctx := testContext(t)
	for _, ig := range ignored {
		if _, err := r.fake.WaitAck(ctx, ig.Key()); err != nil {
			t.Errorf("ignored envelope %s not acknowledged: %v", ig.Key(), err)
		}
	}
}

func TestEditsAndDeletes(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	r.run(t)
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "teh claim", ThreadTS: "1690000000.000001"})
	r.fake.SendEdit("C1", d.TS, "the claim <@U2>")
	r.fake.SendDelete("C1", d.TS)
	evs := r.rec.wait(t, 3)
	kinds := []agents.EventKind{evs[0].Kind, evs[1].Kind, evs[2].Kind}
	if kinds[0] != agents.EventMessage || kinds[1] != agents.EventEdited || kinds[2] != agents.EventDeleted {
		t.Fatalf("kinds = %v", kinds)
	}
	for _, ev := range evs {
		if ev.TS != d.TS || ev.ThreadTS != "1690000000.000001" || ev.Channel != "C1" {
			t.Errorf("event %+v does not point at the message", ev)
		}
	}
	if evs[1].Text != "the claim @Bob Stone" || evs[1].Raw != "the claim <@U2>" {
		t.Errorf("edit text = %q / %q", evs[1].Text, evs[1].Raw)
	}
}

func TestNamesAreLookedUpOnce(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	r.run(t)
	r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "one <@U1>"})
	r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "two <@U1>"})
	r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U404", Text: "who? <@U404>"})
	evs := r.rec.wait(t, 3)
	if evs[2].UserName != "U404" || evs[2].Text != "who? @U404" {
		t.Errorf("unknown user event = %+v", evs[2])
	}
	perUser := map[string]int{}
	for _, c := range r.fake.CallsTo("users.info") {
		perUser[c.Form.Get("user")]++
	}
	if perUser["U1"] != 1 {
		t.Errorf("users.info per user = %v, want U1 looked up once", perUser)
	}
}

func TestReconnectsAndLosesNothing(t *testing.T) {
	tests := []struct {
		name  string
		fault func(f *fakeslack.Server)
	}{
		{"connection dropped", func(f *fakeslack.Server) { f.Drop(0) }},
		{"disconnect requested", func(f *fakeslack.Server) { f.Disconnect(0, "refresh_requested") }},
		{"pings stop", func(f *fakeslack.Server) { f.SetPinging(false) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{PingInterval: 50 * time.Millisecond}, func(o *Options) {
				o.PingTimeout = 400 * time.Millisecond
			})
			entered, release := make(chan struct{}), make(chan struct{})
			r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
				if call == 1 {
					close(entered)
					<-release
				}
				return nil
			}
			r.run(t)
			ctx := testContext(t)
			inFlight := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "in flight"})
			<-entered
			tt.fault(r.fake)
			meanwhile := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "meanwhile"})
			close(release)
			if err := r.fake.WaitOpened(ctx, 2); err != nil {
				t.Fatalf("no reconnection: %v", err)
			}
			after := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "after"})
			r.rec.waitFor(t, after.TS, agents.EventMessage)
			for _, d := range []fakeslack.Delivery{inFlight, meanwhile, after} {
				r.rec.waitFor(t, d.TS, agents.EventMessage)
				if _, err := r.fake.WaitAck(ctx, d.EventID); err != nil {
					t.Errorf("%s never acknowledged: %v", d.TS, err)
				}
			}
			if err := r.bot.Ready(); err != nil {
				t.Errorf("Ready after reconnecting: %v", err)
			}
		})
	}
}

func TestReadyToleratesReconnecting(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	clock := testclock.New(time.Unix(1800000000, 0))
	r.bot.now = clock.Now
	if err := r.bot.Ready(); err == nil {
		t.Fatal("ready before connecting")
	}
	r.run(t)
	ctx := testContext(t)
	waitReady := func(want bool) {
		t.Helper()
		for (r.bot.Ready() == nil) != want {
			select {
			case <-ctx.Done():
				t.Fatalf("Ready never became %v: %v", want, r.bot.Ready())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	waitReady(true)
	// Keep the socket from coming back: every apps.connections.open fails.
	r.fake.FailNext("apps.connections.open", fakeslack.Failure{Times: 1000, Error: "internal_error"})
	r.fake.Drop(0)
	for r.bot.isConnected() {
		select {
		case <-ctx.Done():
			t.Fatal("the dropped socket went unnoticed")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if _, err := r.fake.WaitCalls(ctx, "apps.connections.open", 3); err != nil {
		t.Fatal(err)
	}
	if err := r.bot.Ready(); err != nil {
		t.Errorf("not ready right after the socket dropped: %v", err)
	}
	clock.Advance(29 * time.Second)
	if err := r.bot.Ready(); err != nil {
		t.Errorf("not ready 29s after the socket dropped: %v", err)
	}
	clock.Advance(2 * time.Second)
	if err := r.bot.Ready(); err == nil {
		t.Error("still ready 31s after the socket dropped")
	}
}

func TestRefusedTokens(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"app token", func(o *Options) { o.AppToken = "xapp-1-wrong" }, "invalid_auth"},
		{"bot token", func(o *Options) { o.BotToken = "xoxb-wrong" }, "invalid_auth"},
		{"no app token", func(o *Options) { o.AppToken = "" }, "no app-level token"},
		{"no bot token", func(o *Options) { o.BotToken = "" }, "no bot token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{}, tt.edit)
			err := r.bot.Run(testContext(t))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestIdentifyReportsMissingScopes(t *testing.T) {
	r := newRig(t, fakeslack.Options{Scopes: []string{"chat:write", "channels:history", "users:read"}}, nil)
	self, err := r.web.Identify(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if self != (Identity{TeamID: "T0001", Team: "Fake", UserID: "UBOT", BotID: "BBOT"}) {
		t.Errorf("identity = %+v", self)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "missing=chat:write.customize,reactions:write,groups:history,channels:read,groups:read,commands") {
		t.Errorf("missing scopes not reported:\n%s", logs)
	}
	if _, err := r.web.Identify(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(r.fake.CallsTo("auth.test")); n != 1 {
		t.Errorf("auth.test called %d times, want once", n)
	}
}

// postFirst posts r and returns the ts of its first part.
func postFirst(ctx context.Context, b *WebAPI, r agents.Reply) (string, error) {
	posted, err := b.PostReply(ctx, r)
	if len(posted) == 0 {
		return "", err
	}
	return posted[0], err
}

func TestPostReplyIsInert(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	text := "Hey <!channel> and <!here>, ask <@U123> or <!subteam^S1>. See <http://evil.example|safe> or [docs](http://evil.example/x). R&D > sales.\n> a quote"
	ts, err := postFirst(ctx, r.web, agents.Reply{
		Channel: "C1", ThreadTS: "1690000000.000001", Text: text, Username: "Elen",
		IconURL: "ipfs://bafyAvatar/elen.png", TurnID: "turn-1", Mention: []string{"U7", "U8> <!channel"},
	})
	if err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Posts()
	if len(posts) != 1 || posts[0].TS != ts {
		t.Fatalf("posts = %+v, ts %s", posts, ts)
	}
	p := posts[0]
	wantMD := "Hey &lt;!channel&gt; and &lt;!here&gt;, ask @U123 or &lt;!subteam^S1&gt;. See &lt;http://evil.example|safe&gt; or docs (http://evil.example/x). R&amp;D &gt; sales.\n> a quote"
	if md := p.MarkdownTexts(); len(md) != 1 || md[0] != wantMD {
		t.Errorf("markdown = %q\nwant       %q", md, wantMD)
	}
	if p.Text != "<@U7> "+wantMD {
		t.Errorf("fallback text = %q", p.Text)
	}
	var blocks []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	var section struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Verbatim bool   `json:"verbatim"`
	}
	if err := json.Unmarshal(p.Blocks, &blocks); err != nil || len(blocks) != 2 || blocks[0].Type != "section" ||
		json.Unmarshal(blocks[0].Text, &section) != nil || section.Text != "<@U7>" || section.Type != "mrkdwn" ||
		!section.Verbatim || blocks[1].Type != "markdown" {
		t.Errorf("blocks = %s (%v), want a mention section then the markdown", p.Blocks, err)
	}
	if strings.Count(p.Text, "<") != 1 {
		t.Errorf("the fallback text holds a control sequence besides the mention: %q", p.Text)
	}
	if p.Channel != "C1" || p.ThreadTS != "1690000000.000001" || p.Username != "Elen" ||
		p.IconURL != "https://gw.example/ipfs/bafyAvatar/elen.png" ||
		p.UnfurlLinks != "false" || p.UnfurlMedia != "false" || p.LinkNames != "false" {
		t.Errorf("post = %+v", p)
	}
	if p.Metadata == nil || p.Metadata.EventType != "conclave_turn" || p.Metadata.EventPayload["turn_id"] != "turn-1" {
		t.Errorf("metadata = %+v", p.Metadata)
	}
}

// Users the model mentions are written by name: the post pings nobody, and
// reads as the thread does. A display name is data like any model text.
func TestPostReplyNamesUsers(t *testing.T) {
	r := newRig(t, fakeslack.Options{Users: append(slices.Clone(testUsers),
		fakeslack.User{ID: "U5", Name: "mallory", DisplayName: "<!channel> [safe](http://evil.example)"})}, nil)
	text := "Thanks <@U1>, <@U2|bobby> and <@UBOT>; <@U404|ghost>, <@W9> and <@U5>.\n```\n<@U1> is code\n```"
	if _, err := postFirst(testContext(t), r.web, agents.Reply{Channel: "C1", ThreadTS: "1690000000.000001", Text: text}); err != nil {
		t.Fatal(err)
	}
	// In code the mention stays as written but cannot form: a zero-width
	// space follows its '<'.
	prose := "Thanks @ada.l, @Bob Stone and @conclave; @ghost, @W9 and @&lt;!channel&gt; safe (http://evil.example).\n```\n"
	want := prose + "<\u200b@U1> is code\n```"
	p := r.fake.Posts()[0]
	if md := p.MarkdownTexts(); len(md) != 1 || md[0] != want {
		t.Errorf("markdown = %q\nwant       %q", md, want)
	}
	if fallback := prose + "&lt;\u200b@U1&gt; is code\n```"; p.Text != fallback {
		t.Errorf("fallback = %q\nwant       %q", p.Text, fallback)
	}
}

func TestPostEphemeralNamesUsers(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	if err := r.web.PostEphemeral(testContext(t), "C1", "U2", "<@U1> asked for you"); err != nil {
		t.Fatal(err)
	}
	if e := r.fake.Ephemerals(); len(e) != 1 || e[0].Text != "@ada.l asked for you" {
		t.Errorf("ephemerals = %+v", e)
	}
}

func TestPostReplySplitsLongText(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	var b strings.Builder
	for i := range 40 {
		b.WriteString(strings.Repeat("A sentence about claims <and> limits. ", 12))
		b.WriteString("\n\n")
		if i == 20 {
			b.WriteString("```go\n" + strings.Repeat("if a < b && c > d { return }\n", 30) + "```\n\n")
		}
	}
	text := b.String()
	ts, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", ThreadTS: "1690000000.000001", Text: text, TurnID: "t-long"})
	if err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Posts()
	if len(posts) < 2 {
		t.Fatalf("got %d posts, want the reply split", len(posts))
	}
	if ts != posts[0].TS {
		t.Errorf("returned ts %s, want the first post's %s", ts, posts[0].TS)
	}
	var joined []string
	for i, p := range posts {
		md := p.MarkdownTexts()
		if len(md) != 1 || len(md[0]) > blockLimit {
			t.Fatalf("post %d has markdown of %d bytes", i, len(md[0]))
		}
		if len(p.Text) > fallbackLimit+len(" …") {
			t.Errorf("post %d fallback is %d bytes", i, len(p.Text))
		}
		if strings.Count(md[0], "```")%2 != 0 {
			t.Errorf("post %d cuts the code block", i)
		}
		if strings.Contains(md[0], "&amp;&amp;") || strings.Contains(p.Text, "&&") {
			t.Errorf("post %d: code escaped in the markdown block, or raw in the fallback", i)
		}
		if p.ThreadTS != "1690000000.000001" || p.Metadata == nil || p.Metadata.EventPayload["turn_id"] != "t-long" ||
			p.Metadata.EventPayload["part"] != float64(i+1) || p.Metadata.EventPayload["parts"] != float64(len(posts)) {
			t.Errorf("post %d: thread %s, metadata %+v", i, p.ThreadTS, p.Metadata)
		}
		joined = append(joined, md[0])
	}
	if got, want := contentOf(strings.Join(joined, "\n")), contentOf(escapeMarkdown(strings.TrimSpace(text))); got != want {
		t.Error("the posts do not hold the whole reply")
	}
}

func TestPostReplyWaitsOutRateLimits(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	r.fake.FailNext("chat.postMessage", fakeslack.Failure{Times: 2, Status: http.StatusTooManyRequests, RetryAfter: 1})
	ts, err := postFirst(testContext(t), r.web, agents.Reply{Channel: "C1", Text: "eventually"})
	if err != nil {
		t.Fatal(err)
	}
	calls := r.fake.CallsTo("chat.postMessage")
	if len(calls) != 3 || calls[2].Status != http.StatusOK {
		t.Fatalf("calls = %+v, want two 429s then the post", calls)
	}
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].At.Sub(calls[i-1].At); gap < time.Second {
			t.Errorf("retry %d came %v after a Retry-After of 1s", i, gap)
		}
	}
	if posts := r.fake.Posts(); len(posts) != 1 || posts[0].TS != ts {
		t.Errorf("posts = %+v", posts)
	}
}

func TestPostReplyGivesUpWithItsContext(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	r.fake.FailNext("chat.postMessage", fakeslack.Failure{Times: 100, Status: http.StatusTooManyRequests, RetryAfter: 30})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", Text: "never"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the deadline", err)
	}
	if len(r.fake.Posts()) != 0 {
		t.Error("posted anyway")
	}
}

func TestPostReplyErrors(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	if _, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", Text: " \n "}); !errors.Is(err, ErrEmptyReply) {
		t.Errorf("blank reply: %v", err)
	}
	if _, err := postFirst(ctx, r.web, agents.Reply{Text: "x"}); err == nil {
		t.Error("a reply without a channel was accepted")
	}
	r.fake.FailNext("chat.postMessage", fakeslack.Failure{Error: "is_archived"})
	if _, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", Text: "x"}); err == nil || !strings.Contains(err.Error(), "is_archived") {
		t.Errorf("err = %v, want is_archived", err)
	}
	if n := len(r.fake.CallsTo("chat.postMessage")); n != 1 {
		t.Errorf("a refused post was tried %d times", n)
	}
	ts, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", Text: "", Mention: []string{"U1"}})
	if err != nil || ts == "" {
		t.Fatalf("mention-only reply: %v", err)
	}
	if p := r.fake.Posts()[0]; p.Text != "<@U1>" || len(p.MarkdownTexts()) != 0 {
		t.Errorf("mention-only post = %+v", p)
	}
}

func TestAvatarURL(t *testing.T) {
	b := NewWebAPI(Options{IPFSGateway: "https://gw.example/ipfs"}, nil)
	tests := []struct{ in, want string }{
		{"ipfs://bafy123/a.png", "https://gw.example/ipfs/bafy123/a.png"},
		{"ipfs://ipfs/bafy123", "https://gw.example/ipfs/bafy123"},
		{"https://x.example/a.png", "https://x.example/a.png"},
		{"eip155:1/erc721:0xabc/1", ""},
		{"javascript:alert(1)", ""},
		{"ipfs://", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := b.avatarURL(tt.in); got != tt.want {
				t.Errorf("avatarURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if got := NewWebAPI(Options{}, nil).avatarURL("ipfs://bafy123"); got != "" {
		t.Errorf("with no IPFS gateway, avatarURL = %q, want the avatar left out", got)
	}
}

func TestReactions(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "x"})
	steps := []struct {
		name string
		do   func() error
		want []string
	}{
		{"working reaction by default", func() error { return r.web.AddReaction(ctx, "C1", d.TS, "") }, []string{"hourglass_flowing_sand"}},
		{"already there", func() error { return r.web.AddReaction(ctx, "C1", d.TS, "hourglass_flowing_sand") }, []string{"hourglass_flowing_sand"}},
		{"colons trimmed", func() error { return r.web.AddReaction(ctx, "C1", d.TS, ":white_check_mark:") }, []string{"hourglass_flowing_sand", "white_check_mark"}},
		{"removed", func() error { return r.web.RemoveReaction(ctx, "C1", d.TS, "") }, []string{"white_check_mark"}},
		{"not there", func() error { return r.web.RemoveReaction(ctx, "C1", d.TS, "hourglass_flowing_sand") }, []string{"white_check_mark"}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := r.fake.Reactions("C1", d.TS); strings.Join(got, ",") != strings.Join(s.want, ",") {
			t.Errorf("%s: reactions = %v, want %v", s.name, got, s.want)
		}
	}
	if err := r.web.AddReaction(ctx, "C1", "1.000009", "eyes"); err == nil || !strings.Contains(err.Error(), "message_not_found") {
		t.Errorf("reaction on a missing message: %v", err)
	}
}

func TestPostEphemeral(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	if err := r.web.PostEphemeral(testContext(t), "C1", "U1", "foo.acme.137.protocol6022.eth is not in <!channel>"); err != nil {
		t.Fatal(err)
	}
	e := r.fake.Ephemerals()
	if len(e) != 1 || e[0].User != "U1" || e[0].Channel != "C1" || e[0].Text != "foo.acme.137.protocol6022.eth is not in &lt;!channel&gt;" {
		t.Errorf("ephemerals = %+v", e)
	}
}

func TestFindPost(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	root := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "root"})
	first, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", ThreadTS: root.TS, Text: "one", TurnID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", ThreadTS: root.TS, Text: "two", TurnID: "t2"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		thread, turn string
		found        bool
		ts           string
	}{
		{root.TS, "t1", true, first},
		{root.TS, "t3", false, ""},
		{"1.000404", "t1", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.turn+"@"+tt.thread, func(t *testing.T) {
			posted, err := r.web.FindPost(ctx, "C1", tt.thread, tt.turn)
			ts := ""
			if len(posted) > 0 {
				ts = posted[0]
			}
			if err != nil || len(posted) > 0 != tt.found || ts != tt.ts {
				t.Errorf("FindPost = %q, %v; want %q, %v", posted, err, tt.ts, tt.found)
			}
		})
	}
	for _, c := range r.fake.CallsTo("conversations.replies") {
		if c.Form.Get("include_all_metadata") != "1" {
			t.Errorf("conversations.replies without metadata: %v", c.Form)
		}
	}
}

func TestThreadHistory(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	ctx := testContext(t)
	if _, err := r.web.Identify(ctx); err != nil {
		t.Fatal(err)
	}
	root := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "root"})
	r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U2", Text: "early", ThreadTS: root.TS})
	r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U2", Subtype: "channel_join", Text: "joined", ThreadTS: root.TS})
	file := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U2", Subtype: "file_share", Text: "see &lt;this&gt;",
		ThreadTS: root.TS, Files: []fakeslack.File{{ID: "F1", Name: "scan.png"}}})
	own, err := postFirst(ctx, r.web, agents.Reply{Channel: "C1", ThreadTS: root.TS, Text: "agent says", Username: "Elen"})
	if err != nil {
		t.Fatal(err)
	}
	other := r.fake.SendMessage(fakeslack.Message{Channel: "C1", BotID: "B2", Username: "Jira", Subtype: "bot_message", Text: "JIRA-1 <@U1>", ThreadTS: root.TS})

	evs, err := r.web.ThreadHistory(ctx, "C1", root.TS, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []agents.Event{
		{Team: "T0001", Channel: "C1", TS: file.TS, ThreadTS: root.TS, UserID: "U2", Subtype: "file_share",
			Raw: "see &lt;this&gt;\n[file: scan.png]", Text: "see <this>\n[file: scan.png]", UserName: "Bob Stone", At: agents.TSTime(file.TS)},
		{Team: "T0001", Channel: "C1", TS: own, ThreadTS: root.TS, UserID: "UBOT", BotID: "BBOT", Subtype: "bot_message",
			Raw: "agent says", Text: "agent says", UserName: "Elen", At: agents.TSTime(own)},
		{Team: "T0001", Channel: "C1", TS: other.TS, ThreadTS: root.TS, BotID: "B2", Subtype: "bot_message",
			Raw: "JIRA-1 <@U1>", Text: "JIRA-1 @ada.l", UserName: "Jira", At: agents.TSTime(other.TS)},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(evs), evs, len(want))
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d\n got %+v\nwant %+v", i, evs[i], want[i])
		}
	}
	all, err := r.web.ThreadHistory(ctx, "C1", root.TS, 0)
	if err != nil || len(all) != 5 || all[0].TS != root.TS || all[0].ThreadTS != "" {
		t.Errorf("whole thread = %+v, %v; want 5 messages from the root", all, err)
	}
}

func TestChannelDescription(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	clock := testclock.New(time.Unix(1800000000, 0))
	r.web.names.now = clock.Now
	ctx := testContext(t)
	for range 2 {
		got, err := r.web.ChannelDescription(ctx, "C1")
		if err != nil || got != "Claims desk: #ops & @ada.l" {
			t.Fatalf("ChannelDescription = %q, %v", got, err)
		}
	}
	if n := len(r.fake.CallsTo("conversations.info")); n != 1 {
		t.Errorf("conversations.info called %d times, want the purpose cached", n)
	}
	r.fake.AddChannel(fakeslack.Channel{ID: "C1", Name: "claims", Purpose: "New purpose"})
	clock.Advance(5*time.Minute + time.Second)
	if got, err := r.web.ChannelDescription(ctx, "C1"); err != nil || got != "New purpose" {
		t.Errorf("after five minutes: %q, %v", got, err)
	}
	if _, err := r.web.ChannelDescription(ctx, "C404"); err == nil {
		t.Error("an unknown channel has a description")
	}
}

// commandFunc adapts a function to CommandHandler.
type commandFunc func(ctx context.Context, cmd slack.SlashCommand)

func (f commandFunc) HandleCommand(ctx context.Context, cmd slack.SlashCommand) { f(ctx, cmd) }

func TestSlashCommands(t *testing.T) {
	t.Run("no handler", func(t *testing.T) {
		r := newRig(t, fakeslack.Options{}, nil)
		r.run(t)
		d := r.fake.SendSlashCommand(fakeslack.SlashCommand{Command: "/list-agents", UserID: "U1", ChannelID: "C1"})
		ack, err := r.fake.WaitAck(testContext(t), d.EnvelopeID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(ack.Payload), "cannot answer commands") {
			t.Errorf("ack payload = %s", ack.Payload)
		}
	})
	t.Run("handler answers after the ack", func(t *testing.T) {
		r := newRig(t, fakeslack.Options{}, nil)
		got := make(chan slack.SlashCommand, 1)
		r.answerCommands(commandFunc(func(ctx context.Context, cmd slack.SlashCommand) {
			if err := r.web.ReplyToCommand(ctx, cmd, "No agents in this channel."); err != nil {
				cmd.Text = err.Error()
			}
			got <- cmd
		}))
		r.run(t)
		d := r.fake.SendSlashCommand(fakeslack.SlashCommand{Command: "/list-agents", Text: "x", UserID: "U1", ChannelID: "C1"})
		cmd := <-got
		if cmd.Command != "/list-agents" || cmd.Text != "x" {
			t.Errorf("command = %+v", cmd)
		}
		ack, err := r.fake.WaitAck(testContext(t), d.EnvelopeID)
		if err != nil || ack.Payload != nil {
			t.Errorf("ack = %+v, %v; want an empty ack", ack, err)
		}
		resp := r.fake.CommandResponses()
		if len(resp) != 1 || resp[0].Key != d.EnvelopeID || resp[0].Text != "No agents in this channel." || resp[0].ResponseType != "ephemeral" {
			t.Fatalf("responses = %+v", resp)
		}
		// A reply may carry a one-time link: no preview fetches it.
		var flags struct {
			UnfurlLinks *bool `json:"unfurl_links"`
			UnfurlMedia *bool `json:"unfurl_media"`
		}
		if err := json.Unmarshal(resp[0].Body, &flags); err != nil || flags.UnfurlLinks == nil || *flags.UnfurlLinks ||
			flags.UnfurlMedia == nil || *flags.UnfurlMedia {
			t.Errorf("reply body %s, want unfurl_links and unfurl_media false", resp[0].Body)
		}
	})
}

func TestReplicasShareTheEvents(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{Route: fakeslack.RouteRoundRobin, Users: testUsers, Channels: testChannels})
	var recs []*recorder
	for i := range 2 {
		rec := newRecorder()
		recs = append(recs, rec)
		b := New(NewWebAPI(Options{AppToken: fakeslack.AppToken, BotToken: fakeslack.BotToken, APIURL: fake.APIURL()}, nil), rec, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		})
		if err := fake.WaitOpen(testContext(t), i+1); err != nil {
			t.Fatal(err)
		}
	}
	const n = 10
	var ds []fakeslack.Delivery
	for range n {
		ds = append(ds, fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "m"}))
	}
	ctx := testContext(t)
	for _, d := range ds {
		if _, err := fake.WaitAck(ctx, d.EventID); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for i, rec := range recs {
		rec.mu.Lock()
		if len(rec.events) == 0 {
			t.Errorf("replica %d handled nothing", i)
		}
		for _, ev := range rec.events {
			seen[ev.ID]++
		}
		rec.mu.Unlock()
	}
	for _, d := range ds {
		if seen[d.EventID] != 1 {
			t.Errorf("event %s handled %d times", d.EventID, seen[d.EventID])
		}
	}
}

func TestRetriesAndDuplicatesReachTheEngine(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	r.run(t)
	ctx := testContext(t)
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "once"})
	if _, err := r.fake.WaitAck(ctx, d.EventID); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.fake.Redeliver(d.EventID, "timeout"); !ok {
		t.Fatal("no redelivery")
	}
	dup := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "once", TS: d.TS})
	evs := r.rec.wait(t, 3)
	ids := []string{evs[0].ID, evs[1].ID, evs[2].ID}
	if ids[0] != d.EventID || ids[1] != d.EventID || ids[2] != dup.EventID || dup.EventID == d.EventID {
		t.Errorf("event ids = %v, want the retry with its id and the duplicate with its own", ids)
	}
	for _, ev := range evs {
		if ev.TS != d.TS || ev.Channel != "C1" {
			t.Errorf("event %+v does not carry the message's channel and ts", ev)
		}
	}
}

func TestLargeAndOddMessagesAreData(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	r.run(t)
	body := strings.Repeat("x", 40000)
	texts := []struct{ raw, want string }{
		{body, body},
		{"tab\tbell\a nul\x00 line\u2028end", "tab\tbell\a nul\x00 line\u2028end"},
		{"{{ .Secret }} {{template \"x\"}} &lt;{{end}}&gt;", "{{ .Secret }} {{template \"x\"}} <{{end}}>"},
	}
	for _, tt := range texts {
		r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: tt.raw})
	}
	evs := r.rec.wait(t, len(texts))
	for i, tt := range texts {
		if evs[i].Raw != tt.raw || evs[i].Text != tt.want {
			t.Errorf("message %d: raw %q…, text %q…", i, abbreviate([]string{evs[i].Raw}), abbreviate([]string{evs[i].Text}))
		}
	}
}

// Slow slash commands never hold up message envelopes: with every command
// slot taken and more commands waiting, a message is still handled and
// acknowledged, and the waiting commands run once slots free up.
func TestSlowCommandsDoNotHoldUpEvents(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	release := make(chan struct{})
	started := make(chan string, 16)
	r.answerCommands(commandFunc(func(ctx context.Context, cmd slack.SlashCommand) {
		started <- cmd.Text
		select {
		case <-release:
		case <-ctx.Done():
		}
	}))
	r.run(t)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	slots := cap(r.bot.commandSlots)
	for i := range slots + 2 {
		r.fake.SendSlashCommand(fakeslack.SlashCommand{Command: "/list-agents", Text: fmt.Sprint(i), UserID: "U1", ChannelID: "C1"})
	}
	d := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "still heard"})
	ctx := testContext(t)
	if _, err := r.fake.WaitAck(ctx, d.EventID); err != nil {
		t.Fatalf("a message waited behind slow commands: %v", err)
	}
	if evs := r.rec.wait(t, 1); evs[0].TS != d.TS {
		t.Errorf("handled %+v", evs)
	}
	if n := len(started); n > slots {
		t.Errorf("%d commands ran at once, want at most %d", n, slots)
	}
	close(release)
	for range slots + 2 {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("a waiting command never ran")
		}
	}
}

// A command's response_url lets whoever holds it answer as conclave: a
// failed post to it is logged without it, and the reply still arrives.
func TestReplyToCommandKeepsTheResponseURLOutOfLogs(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, nil)
	cmd := slack.SlashCommand{
		Command: "/list-agents", UserID: "U1", ChannelID: "C1",
		ResponseURL: "http://127.0.0.1:1/commands/T0001/42/secret-hook-token",
	}
	if err := r.web.ReplyToCommand(testContext(t), cmd, "No agents in this channel."); err != nil {
		t.Fatal(err)
	}
	if e := r.fake.Ephemerals(); len(e) != 1 || e[0].Text != "No agents in this channel." {
		t.Errorf("ephemerals = %+v, want the reply by chat.postEphemeral", e)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "response_url failed") {
		t.Errorf("the failure was not logged:\n%s", logs)
	}
	if strings.Contains(logs, "secret-hook-token") {
		t.Errorf("the response_url reached the logs:\n%s", logs)
	}
}
