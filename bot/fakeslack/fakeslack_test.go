package fakeslack_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/conclavehq/conclave/bot/fakeslack"
)

// client is a real socketmode client connected to the fake; envelopes (and
// hello) are forwarded to events.
type client struct {
	*socketmode.Client
	events chan socketmode.Event
}

func startClient(t *testing.T, fake *fakeslack.Server, opts ...socketmode.Option) *client {
	t.Helper()
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()), slack.OptionAppLevelToken(fakeslack.AppToken))
	c := &client{Client: socketmode.New(api, opts...), events: make(chan socketmode.Event, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.RunContext(ctx) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-c.Events:
				switch ev.Type {
				case socketmode.EventTypeHello, socketmode.EventTypeEventsAPI,
					socketmode.EventTypeSlashCommand, socketmode.EventTypeInteractive,
					socketmode.EventTypeErrorBadMessage:
					select {
					case c.events <- ev:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c
}

// next returns the next forwarded event that is not hello.
func (c *client) next(t *testing.T) socketmode.Event {
	t.Helper()
	ctx := testContext(t)
	for {
		select {
		case ev := <-c.events:
			if ev.Type != socketmode.EventTypeHello {
				return ev
			}
		case <-ctx.Done():
			t.Fatal("no envelope arrived")
		}
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHandshakeEnvelopeAndAck(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	c := startClient(t, fake)
	ctx := testContext(t)
	if err := fake.WaitOpen(ctx, 1); err != nil {
		t.Fatal(err)
	}
	open := fake.CallsTo("apps.connections.open")
	if len(open) != 1 || open[0].Auth != "app" {
		t.Fatalf("apps.connections.open calls = %+v, want one with the app token", open)
	}

	d := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "hello &lt;there&gt;", ThreadTS: "1690000000.000001"})
	ev := c.next(t)
	if ev.Type != socketmode.EventTypeEventsAPI {
		t.Fatalf("event type = %s", ev.Type)
	}
	api := ev.Data.(slackevents.EventsAPIEvent)
	msg, ok := api.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok {
		t.Fatalf("inner event = %T", api.InnerEvent.Data)
	}
	if msg.Channel != "C1" || msg.User != "U1" || msg.Text != "hello &lt;there&gt;" || msg.TimeStamp != d.TS ||
		msg.ThreadTimeStamp != "1690000000.000001" || msg.ChannelType != "channel" {
		t.Errorf("message event = %+v", msg)
	}
	var outer struct {
		EventID string `json:"event_id"`
		Type    string `json:"type"`
	}
	if err := json.Unmarshal(ev.Request.Payload, &outer); err != nil || outer.EventID != d.EventID || outer.Type != "event_callback" {
		t.Errorf("payload = %s (%v), want event_id %s", ev.Request.Payload, err, d.EventID)
	}
	if ev.Request.EnvelopeID != d.EnvelopeID || ev.Request.RetryAttempt != 0 {
		t.Errorf("request = %+v", ev.Request)
	}

	before := fake.Seq()
	if err := c.Ack(*ev.Request); err != nil {
		t.Fatal(err)
	}
	ack, err := fake.WaitAck(ctx, d.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if !ack.Known || ack.EnvelopeID != d.EnvelopeID || ack.Seq <= before || ack.Payload != nil {
		t.Errorf("ack = %+v", ack)
	}
}

func TestTicketsAreSingleUse(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()), slack.OptionAppLevelToken(fakeslack.AppToken))
	_, url, err := api.StartSocketModeContext(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "ws://") {
		t.Fatalf("url = %q", url)
	}
	first, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second dial: err=%v resp=%v, want 401", err, resp)
	}
	var hello struct {
		Type string `json:"type"`
	}
	if err := first.ReadJSON(&hello); err != nil || hello.Type != "hello" {
		t.Fatalf("first frame = %+v (%v), want hello", hello, err)
	}
}

func TestAppTokenRequired(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()), slack.OptionAppLevelToken("xapp-wrong"))
	_, _, err := api.StartSocketModeContext(testContext(t))
	if err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("err = %v, want invalid_auth", err)
	}
	bad := slack.New("xoxb-wrong", slack.OptionAPIURL(fake.APIURL()))
	if _, err := bad.AuthTestContext(testContext(t)); err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("auth.test with a wrong token: %v", err)
	}
}

func TestUnackedEnvelopeIsRetried(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{AckTimeout: 100 * time.Millisecond})
	c := startClient(t, fake)
	d := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "one"})
	first := c.next(t)
	retry := c.next(t)
	if retry.Request.RetryAttempt != 1 || retry.Request.RetryReason != "timeout" || retry.Request.EnvelopeID == first.Request.EnvelopeID {
		t.Fatalf("retry request = %+v (first %s)", retry.Request, first.Request.EnvelopeID)
	}
	if err := c.Ack(*retry.Request); err != nil {
		t.Fatal(err)
	}
	ack, err := fake.WaitAck(testContext(t), d.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.RetryAttempt != 1 || ack.EnvelopeID != retry.Request.EnvelopeID {
		t.Errorf("ack = %+v", ack)
	}
	// A late ack of the first envelope counts for the same delivery.
	if err := c.Ack(*first.Request); err != nil {
		t.Fatal(err)
	}
	acks, err := fake.WaitAcks(testContext(t), d.EventID, 2)
	if err != nil || len(acks) != 2 || acks[0].RetryAttempt != 1 || acks[1].EnvelopeID != first.Request.EnvelopeID {
		t.Errorf("acks = %+v, %v; want the retry's, then the first envelope's", acks, err)
	}
}

func TestReconnects(t *testing.T) {
	tests := []struct {
		name  string
		fault func(fake *fakeslack.Server)
	}{
		{"disconnect envelope", func(fake *fakeslack.Server) { fake.Disconnect(0, "refresh_requested") }},
		{"connection dropped", func(fake *fakeslack.Server) { fake.Drop(0) }},
		{"pings stop", func(fake *fakeslack.Server) { fake.SetPinging(false) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fakeslack.New(t, fakeslack.Options{PingInterval: 50 * time.Millisecond})
			c := startClient(t, fake, socketmode.OptionPingInterval(400*time.Millisecond))
			ctx := testContext(t)
			if err := fake.WaitOpen(ctx, 1); err != nil {
				t.Fatal(err)
			}
			tt.fault(fake)
			if err := fake.WaitOpened(ctx, 2); err != nil {
				t.Fatalf("no reconnection: %v", err)
			}
			d := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "after"})
			ev := c.next(t)
			if err := c.Ack(*ev.Request); err != nil {
				t.Fatal(err)
			}
			if _, err := fake.WaitAck(ctx, d.EventID); err != nil {
				t.Fatal(err)
			}
			if got := len(fake.CallsTo("apps.connections.open")); got < 2 {
				t.Errorf("apps.connections.open called %d times, want a fresh ticket per connection", got)
			}
		})
	}
}

func TestDroppedConnectionRedeliversAsRetry(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	c := startClient(t, fake)
	ctx := testContext(t)
	if err := fake.WaitOpen(ctx, 1); err != nil {
		t.Fatal(err)
	}
	d := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "lost?"})
	_ = c.next(t) // received, never acknowledged
	fake.Drop(0)
	retry := c.next(t)
	if retry.Request.RetryAttempt != 1 || retry.Request.RetryReason != "connection_closed" {
		t.Fatalf("redelivery = %+v", retry.Request)
	}
	if err := c.Ack(*retry.Request); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.WaitAck(ctx, d.EventID); err != nil {
		t.Fatal(err)
	}
	sent, err := fake.WaitDeliveries(ctx, d.EventID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if sent[0].Conn == sent[1].Conn {
		t.Errorf("retry went to the dead connection %d", sent[1].Conn)
	}
}

func TestEnvelopesWaitForAConnection(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	d := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "early"})
	if fake.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", fake.Pending())
	}
	c := startClient(t, fake)
	ev := c.next(t)
	if ev.Request.EnvelopeID != d.EnvelopeID {
		t.Fatalf("got %s, want %s", ev.Request.EnvelopeID, d.EnvelopeID)
	}
}

func TestSeveralConnections(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{Route: fakeslack.RouteRandom})
	a := startClient(t, fake)
	ctx := testContext(t)
	if err := fake.WaitOpen(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b := startClient(t, fake)
	if err := fake.WaitOpen(ctx, 2); err != nil {
		t.Fatal(err)
	}
	ids := fake.OpenConnections()

	d := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "to b", Conn: ids[1]})
	if ev := b.next(t); ev.Request.EnvelopeID != d.EnvelopeID {
		t.Fatalf("b got %s, want %s", ev.Request.EnvelopeID, d.EnvelopeID)
	}

	const n = 20
	for range n {
		fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "any"})
	}
	perConn := map[int]int{}
	for _, s := range fake.Deliveries()[1:] {
		perConn[s.Conn]++
	}
	if perConn[ids[0]] == 0 || perConn[ids[1]] == 0 || perConn[ids[0]]+perConn[ids[1]] != n {
		t.Errorf("random routing spread = %v, want both connections used", perConn)
	}
	for range perConn[ids[0]] {
		_ = a.next(t)
	}
	for range perConn[ids[1]] {
		_ = b.next(t)
	}
}

func TestSlashCommand(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	c := startClient(t, fake)
	ctx := testContext(t)
	d := fake.SendSlashCommand(fakeslack.SlashCommand{Command: "/list-agents", UserID: "U1", ChannelID: "C1", ChannelName: "general"})
	ev := c.next(t)
	cmd, ok := ev.Data.(slack.SlashCommand)
	if ev.Type != socketmode.EventTypeSlashCommand || !ok || cmd.Command != "/list-agents" || cmd.ChannelID != "C1" || !ev.Request.AcceptsResponsePayload {
		t.Fatalf("event = %s %+v", ev.Type, ev.Data)
	}
	if err := c.Ack(*ev.Request, map[string]any{"text": "No agents in this channel."}); err != nil {
		t.Fatal(err)
	}
	ack, err := fake.WaitAck(ctx, d.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ack.Payload), "No agents in this channel.") {
		t.Errorf("ack payload = %s", ack.Payload)
	}
	if err := slack.PostWebhookContext(ctx, cmd.ResponseURL, &slack.WebhookMessage{Text: "later", ResponseType: "ephemeral"}); err != nil {
		t.Fatal(err)
	}
	rs := fake.CommandResponses()
	if len(rs) != 1 || rs[0].Key != d.EnvelopeID || rs[0].Text != "later" || rs[0].ResponseType != "ephemeral" {
		t.Errorf("responses = %+v", rs)
	}
}

func TestMalformedFrames(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	c := startClient(t, fake)
	if err := fake.WaitOpen(testContext(t), 1); err != nil {
		t.Fatal(err)
	}
	fake.SendEnvelope("events_api", json.RawMessage(`{"type":"event_callback","event":{"type":"no_such_event"}}`), 0)
	if ev := c.next(t); ev.Type != socketmode.EventTypeErrorBadMessage {
		t.Errorf("unknown inner event: got %s, want error_bad_message", ev.Type)
	}
	fake.SendRaw(0, []byte(`{"type":"mystery","envelope_id":"x"}`))
	if ev := c.next(t); ev.Type != socketmode.EventTypeErrorBadMessage {
		t.Errorf("unknown envelope type: got %s, want error_bad_message", ev.Type)
	}
}

func TestAuthTestReportsScopes(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{Scopes: []string{"chat:write", "users:read"}})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	res, err := api.AuthTestContext(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.UserID != "UBOT" || res.BotID != "BBOT" || res.TeamID != "T0001" {
		t.Errorf("auth.test = %+v", res)
	}
	if got := res.Header.Get("X-OAuth-Scopes"); got != "chat:write,users:read" {
		t.Errorf("X-OAuth-Scopes = %q", got)
	}
}

func TestPostMessageRecordsAndEchoes(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{EchoPosts: true})
	c := startClient(t, fake)
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	ctx := testContext(t)
	_, ts, err := api.PostMessageContext(ctx, "C1",
		slack.MsgOptionText("fallback", false),
		slack.MsgOptionBlocks(slack.NewMarkdownBlock("", "**hi**")),
		slack.MsgOptionTS("1700000000.000001"),
		slack.MsgOptionUsername("Elen"),
		slack.MsgOptionIconURL("https://example.com/a.png"),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "conclave_turn", EventPayload: map[string]any{"turn_id": "t1"}}),
		slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl(),
	)
	if err != nil {
		t.Fatal(err)
	}
	posts := fake.Posts()
	if len(posts) != 1 {
		t.Fatalf("posts = %d", len(posts))
	}
	p := posts[0]
	if p.TS != ts || p.Channel != "C1" || p.ThreadTS != "1700000000.000001" || p.Text != "fallback" ||
		p.Username != "Elen" || p.IconURL != "https://example.com/a.png" ||
		p.UnfurlLinks != "false" || p.UnfurlMedia != "false" {
		t.Errorf("post = %+v", p)
	}
	if md := p.MarkdownTexts(); len(md) != 1 || md[0] != "**hi**" {
		t.Errorf("markdown blocks = %q", md)
	}
	if p.Metadata == nil || p.Metadata.EventType != "conclave_turn" || p.Metadata.EventPayload["turn_id"] != "t1" {
		t.Errorf("metadata = %+v", p.Metadata)
	}

	ev := c.next(t)
	msg, ok := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || msg.BotID != "BBOT" || msg.User != "UBOT" || msg.TimeStamp != ts || msg.SubType != "bot_message" || msg.Username != "Elen" {
		t.Errorf("echo = %+v", msg)
	}

	_, ts2, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("second", false))
	if err != nil || ts2 <= ts {
		t.Errorf("second post ts %q (err %v) is not after %q", ts2, err, ts)
	}
}

func TestPostMessageLimits(t *testing.T) {
	tests := []struct {
		name string
		opts []slack.MsgOption
		want string
	}{
		{"no text", nil, "no_text"},
		{"text too long", []slack.MsgOption{slack.MsgOptionText(strings.Repeat("a", 40001), false)}, "msg_too_long"},
		{"markdown too long", []slack.MsgOption{slack.MsgOptionBlocks(slack.NewMarkdownBlock("", strings.Repeat("a", 12001)))}, "msg_blocks_too_long"},
		{"feedback without a negative button", []slack.MsgOption{slack.MsgOptionText("x", false), slack.MsgOptionBlocks(
			slack.NewContextActionsBlock("b1", slack.NewFeedbackButtonsBlockElement("fb", feedbackButton("👍", "up"), nil)))}, "invalid_blocks"},
		{"feedback button without a value", []slack.MsgOption{slack.MsgOptionText("x", false), slack.MsgOptionBlocks(
			slack.NewContextActionsBlock("b1", slack.NewFeedbackButtonsBlockElement("fb", feedbackButton("👍", "up"), feedbackButton("👎", ""))))}, "invalid_blocks"},
		{"feedback block id too long", []slack.MsgOption{slack.MsgOptionText("x", false), slack.MsgOptionBlocks(
			slack.NewContextActionsBlock(strings.Repeat("b", 256), slack.NewFeedbackButtonsBlockElement("fb", feedbackButton("👍", "up"), feedbackButton("👎", "down"))))}, "invalid_blocks"},
		{"context actions without elements", []slack.MsgOption{slack.MsgOptionText("x", false), slack.MsgOptionBlocks(
			slack.NewContextActionsBlock("b1"))}, "invalid_blocks"},
	}
	fake := fakeslack.New(t, fakeslack.Options{})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := api.PostMessageContext(testContext(t), "C1", tt.opts...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %s", err, tt.want)
			}
		})
	}
	if len(fake.Posts()) != 0 {
		t.Errorf("failed posts were recorded: %+v", fake.Posts())
	}
}

func TestFailureInjection(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	ctx := testContext(t)
	fake.FailNext("chat.postMessage", fakeslack.Failure{Times: 2, Status: http.StatusTooManyRequests, RetryAfter: 7})
	fake.FailNext("chat.postMessage", fakeslack.Failure{Error: "fatal_error"})
	for range 2 {
		_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
			t.Fatalf("err = %v, want rate limited for 7s", err)
		}
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false)); err == nil || err.Error() != "fatal_error" {
		t.Fatalf("err = %v, want fatal_error", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false)); err != nil {
		t.Fatalf("after the failures: %v", err)
	}
	calls := fake.CallsTo("chat.postMessage")
	if len(calls) != 4 || calls[0].Status != 429 || calls[2].Error != "fatal_error" || calls[3].Error != "" {
		t.Errorf("calls = %+v", calls)
	}
}

func TestFailureWindowsHangsAndMatches(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	ctx := testContext(t)
	post := func(ctx context.Context, ch string, part int) error {
		_, _, err := api.PostMessageContext(ctx, ch, slack.MsgOptionText("x", false),
			slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "t", EventPayload: map[string]any{"part": part}}))
		return err
	}

	// An outage: 503 for as long as it lasts.
	var down atomic.Bool
	down.Store(true)
	fake.FailNext("chat.postMessage", fakeslack.Failure{Status: http.StatusServiceUnavailable, While: down.Load})
	for range 3 {
		var sc slack.StatusCodeError
		if err := post(ctx, "C1", 1); !errors.As(err, &sc) || sc.Code != http.StatusServiceUnavailable {
			t.Fatalf("during the outage: %v, want 503", err)
		}
	}
	down.Store(false)
	if err := post(ctx, "C1", 1); err != nil {
		t.Fatalf("after the outage: %v", err)
	}

	// Only part 2 fails; other parts go through and do not use it up.
	fake.FailNext("chat.postMessage", fakeslack.Failure{Error: "internal_error", Match: fakeslack.MatchPart(2)})
	if err := post(ctx, "C1", 1); err != nil {
		t.Fatalf("part 1: %v", err)
	}
	if err := post(ctx, "C1", 2); errString(err) != "internal_error" {
		t.Fatalf("part 2: %v, want internal_error", err)
	}
	if err := post(ctx, "C1", 2); err != nil {
		t.Fatalf("part 2 again: %v", err)
	}

	// A hung request in one channel ends only when the client gives up;
	// the other channel is answered meanwhile.
	fake.FailNext("chat.postMessage", fakeslack.Failure{Hang: true, Match: fakeslack.MatchChannel("C1")})
	hung := make(chan error, 1)
	hctx, cancel := context.WithCancel(ctx)
	go func() { hung <- post(hctx, "C1", 1) }()
	if _, err := fake.WaitCalls(ctx, "chat.postMessage", 8); err != nil {
		t.Fatal(err)
	}
	if err := post(ctx, "C2", 1); err != nil {
		t.Fatalf("another channel during the hang: %v", err)
	}
	cancel()
	if err := <-hung; !errors.Is(err, context.Canceled) {
		t.Errorf("hung request ended with %v, want the client's cancellation", err)
	}
	calls := fake.CallsTo("chat.postMessage")
	if len(calls) != 9 || calls[7].Error != "hung" || calls[7].Status != 0 || calls[8].Error != "" {
		t.Errorf("calls = %+v", calls)
	}
	if n := len(fake.Posts()); n != 4 {
		t.Errorf("posts = %d, want 4 (a failed or hung call posts nothing)", n)
	}
}

func TestRepliesReactionsAndDirectory(t *testing.T) {
	no := false
	fake := fakeslack.New(t, fakeslack.Options{
		Users: []fakeslack.User{{ID: "U1", Name: "ada", RealName: "Ada Lovelace", DisplayName: "ada.l"},
			{ID: "U2", Name: "admin", IsAdmin: true}, {ID: "U3", Name: "owner", IsOwner: true}},
		Channels: []fakeslack.Channel{{ID: "C1", Name: "claims", Purpose: "Claims desk"}, {ID: "C2", Name: "other", IsMember: &no}},
	})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	ctx := testContext(t)
	root := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "root"})
	for i := range 3 {
		fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "reply " + string(rune('a'+i)), ThreadTS: root.TS})
	}
	_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("agent", false), slack.MsgOptionTS(root.TS),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "conclave_turn", EventPayload: map[string]any{"turn_id": "t9"}}))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("replies paginate", func(t *testing.T) {
		var texts []string
		cursor := ""
		for {
			msgs, more, next, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: "C1", Timestamp: root.TS, Limit: 2, Cursor: cursor, IncludeAllMetadata: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				texts = append(texts, m.Text)
				if m.Text == "agent" && m.Metadata.EventPayload["turn_id"] != "t9" {
					t.Errorf("agent message metadata = %+v", m.Metadata)
				}
			}
			if !more {
				break
			}
			cursor = next
		}
		if got := strings.Join(texts, ","); got != "root,reply a,reply b,reply c,agent" {
			t.Errorf("thread = %s", got)
		}
	})
	t.Run("metadata only when asked", func(t *testing.T) {
		msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root.TS})
		if err != nil {
			t.Fatal(err)
		}
		if last := msgs[len(msgs)-1]; last.Metadata.EventType != "" {
			t.Errorf("metadata without include_all_metadata: %+v", last.Metadata)
		}
	})
	t.Run("unknown thread", func(t *testing.T) {
		_, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: "1.2"})
		if err == nil || err.Error() != "thread_not_found" {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("reactions", func(t *testing.T) {
		ref := slack.NewRefToMessage("C1", root.TS)
		steps := []struct {
			add  bool
			want string
		}{{true, ""}, {true, "already_reacted"}, {false, ""}, {false, "no_reaction"}}
		for i, s := range steps {
			var err error
			if s.add {
				err = api.AddReactionContext(ctx, "eyes", ref)
			} else {
				err = api.RemoveReactionContext(ctx, "eyes", ref)
			}
			if got := errString(err); got != s.want {
				t.Errorf("step %d: err = %q, want %q", i, got, s.want)
			}
		}
		if err := api.AddReactionContext(ctx, "eyes", slack.NewRefToMessage("C1", "9.9")); errString(err) != "message_not_found" {
			t.Errorf("reaction on unknown message: %v", err)
		}
		if err := api.AddReactionContext(ctx, "white_check_mark", ref); err != nil {
			t.Fatal(err)
		}
		if got := fake.Reactions("C1", root.TS); len(got) != 1 || got[0] != "white_check_mark" {
			t.Errorf("reactions = %v", got)
		}
	})
	t.Run("users and channels", func(t *testing.T) {
		u, err := api.GetUserInfoContext(ctx, "U1")
		if err != nil || u.Profile.DisplayName != "ada.l" || u.RealName != "Ada Lovelace" || u.Name != "ada" {
			t.Errorf("users.info = %+v, %v", u, err)
		}
		if u.IsAdmin || u.IsOwner {
			t.Errorf("U1 is an admin or owner: %+v", u)
		}
		if a, err := api.GetUserInfoContext(ctx, "U2"); err != nil || !a.IsAdmin || a.IsOwner {
			t.Errorf("users.info of an admin = %+v, %v", a, err)
		}
		if o, err := api.GetUserInfoContext(ctx, "U3"); err != nil || o.IsAdmin || !o.IsOwner {
			t.Errorf("users.info of an owner = %+v, %v", o, err)
		}
		if _, err := api.GetUserInfoContext(ctx, "U404"); errString(err) != "user_not_found" {
			t.Errorf("unknown user: %v", err)
		}
		ch, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "C1"})
		if err != nil || ch.Purpose.Value != "Claims desk" || ch.Name != "claims" {
			t.Errorf("conversations.info = %+v, %v", ch, err)
		}
		if _, _, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("x", false)); errString(err) != "not_in_channel" {
			t.Errorf("post where not a member: %v", err)
		}
		if _, err := api.PostEphemeralContext(ctx, "C1", "U1", slack.MsgOptionText("psst", false)); err != nil {
			t.Fatal(err)
		}
		if e := fake.Ephemerals(); len(e) != 1 || e[0].User != "U1" || e[0].Text != "psst" {
			t.Errorf("ephemerals = %+v", e)
		}
	})
}

func TestEditAndDeleteEvents(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	c := startClient(t, fake)
	d := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "befor"})
	_ = c.next(t)
	fake.SendEdit("C1", d.TS, "before")
	ev := c.next(t)
	msg := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if msg.SubType != "message_changed" || msg.Message.Text != "before" || msg.Message.Timestamp != d.TS || msg.PreviousMessage.Text != "befor" {
		t.Errorf("edit = %+v / %+v", msg, msg.Message)
	}
	fake.SendDelete("C1", d.TS)
	ev = c.next(t)
	msg = ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if msg.SubType != "message_deleted" || msg.DeletedTimeStamp != d.TS {
		t.Errorf("delete = %+v", msg)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func feedbackButton(emoji, value string) *slack.FeedbackButton {
	return slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, emoji, true, false), value)
}

// TestPressFeedback: a valid feedback block is posted, and its press is
// delivered as Slack delivers it, through the real socketmode client.
func TestPressFeedback(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()), slack.OptionAppLevelToken(fakeslack.AppToken))
	ctx := testContext(t)
	_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("answer", false), slack.MsgOptionBlocks(
		slack.NewMarkdownBlock("", "answer"),
		slack.NewContextActionsBlock("ref-1", slack.NewFeedbackButtonsBlockElement("fb", feedbackButton("👍", "positive"), feedbackButton("👎", "negative")))))
	if err != nil {
		t.Fatal(err)
	}
	client := socketmode.New(api)
	go func() { _ = client.RunContext(ctx) }()
	if _, ok := fake.PressFeedback(fake.Posts()[0], "U1", false); !ok {
		t.Fatal("no feedback buttons found in the post")
	}
	for {
		var ev socketmode.Event
		select {
		case ev = <-client.Events:
		case <-ctx.Done():
			t.Fatal("the press was not delivered")
		}
		if ev.Type != socketmode.EventTypeInteractive {
			continue
		}
		cb, _ := ev.Data.(slack.InteractionCallback)
		client.Ack(*ev.Request)
		acts := cb.ActionCallback.BlockActions
		if cb.Type != slack.InteractionTypeBlockActions || len(acts) != 1 || acts[0].ActionID != "fb" || acts[0].BlockID != "ref-1" || acts[0].Value != "negative" || cb.User.ID != "U1" {
			t.Errorf("press = %+v, actions %+v", cb, acts)
		}
		return
	}
}
