package fakeslack_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testclock"
)

func streamRig(t *testing.T, opts fakeslack.Options) (*fakeslack.Server, *slack.Client, string, context.Context) {
	t.Helper()
	opts.Channels = append(opts.Channels, fakeslack.Channel{ID: "C1", Name: "desk"})
	fake := fakeslack.New(t, opts)
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	root := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "a question"}).TS
	return fake, api, root, ctx
}

func recipient(user string) slack.MsgOption {
	return slack.MsgOptionCompose(slack.MsgOptionRecipientUserID(user), slack.MsgOptionRecipientTeamID("T0001"))
}

// A stream: started with text, appended to, stopped with blocks and
// metadata; the message reads as the text streamed, then the blocks.
func TestStreamStartAppendStop(t *testing.T) {
	fake, api, root, ctx := streamRig(t, fakeslack.Options{})
	_, ts, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS(root), recipient("U1"),
		slack.MsgOptionMarkdownText("Hello "), slack.MsgOptionUsername("Elen"))
	if err != nil {
		t.Fatal(err)
	}
	if !fake.Streaming("C1", ts) {
		t.Error("the message is not streaming after chat.startStream")
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText("world")); err != nil {
		t.Fatal(err)
	}
	feedback := slack.NewContextActionsBlock("ref", slack.NewFeedbackButtonsBlockElement("fb",
		slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, "👍", true, false), "good"),
		slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, "👎", true, false), "bad")))
	if _, _, err := api.StopStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText("."), slack.MsgOptionBlocks(feedback),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "conclave_turn", EventPayload: map[string]any{"turn_id": "t1"}})); err != nil {
		t.Fatal(err)
	}
	got, ok := fake.Current("C1", ts)
	if !ok || got.Text != "Hello world." || got.ThreadTS != root || got.Username != "Elen" {
		t.Errorf("message = %+v, want Hello world. by Elen in the thread", got)
	}
	if md := got.MarkdownTexts(); len(md) != 1 || md[0] != "Hello world." || !strings.Contains(string(got.Blocks), `"context_actions"`) {
		t.Errorf("blocks %s: want the markdown, then the feedback", got.Blocks)
	}
	if got.Metadata == nil || got.Metadata.EventPayload["turn_id"] != "t1" {
		t.Errorf("metadata %+v", got.Metadata)
	}
	if fake.Streaming("C1", ts) {
		t.Error("still streaming after chat.stopStream")
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText("more")); err == nil || err.Error() != "message_not_in_streaming_state" {
		t.Errorf("append after the stop: %v, want message_not_in_streaming_state", err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("edited", false)); err != nil {
		t.Errorf("chat.update of a stopped stream: %v", err)
	}
}

// Slack's checks on the streaming methods, each answered with its error.
func TestStreamChecks(t *testing.T) {
	clk := testclock.New(time.Time{})
	scopes := append(slices.Clone(fakeslack.DefaultScopes), "assistant:write")
	fake, api, root, ctx := streamRig(t, fakeslack.Options{Now: clk.Now, StreamExpiry: time.Minute, Scopes: scopes})
	start := func(opts ...slack.MsgOption) (string, error) {
		_, ts, err := api.StartStreamContext(ctx, "C1", append([]slack.MsgOption{slack.MsgOptionTS(root)}, opts...)...)
		return ts, err
	}
	open := func() string {
		t.Helper()
		ts, err := start(recipient("U1"), slack.MsgOptionMarkdownText("so far"))
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	appendTo := func(ts, text string) error {
		_, _, err := api.AppendStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText(text))
		return err
	}
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"no recipient in a channel", func() error { _, err := start(slack.MsgOptionMarkdownText("x")); return err }, "invalid_arguments"},
		{"over 12,000 characters", func() error {
			_, err := start(recipient("U1"), slack.MsgOptionMarkdownText(strings.Repeat("é", 12001)))
			return err
		}, "msg_too_long"},
		{"unknown thread", func() error {
			_, _, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS("1.000009"), recipient("U1"))
			return err
		}, "invalid_thread_ts"},
		{"append without text", func() error { return appendTo(open(), "") }, "invalid_arguments"},
		{"append over 12,000 characters", func() error { return appendTo(open(), strings.Repeat("a", 12001)) }, "msg_too_long"},
		{"append to a message never streamed", func() error {
			return appendTo(fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "x"}).TS, "y")
		}, "message_not_in_streaming_state"},
		{"append to a stream Slack ended", func() error {
			ts := open()
			fake.EndStream("C1", ts)
			return appendTo(ts, "y")
		}, "message_not_in_streaming_state"},
		{"append past the expiry", func() error {
			ts := open()
			clk.Advance(time.Minute)
			return appendTo(ts, "y")
		}, "message_not_in_streaming_state"},
		{"chat.update of an open stream", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx, "C1", open(), slack.MsgOptionText("x", false))
			return err
		}, "cant_update_message"},
		{"stop past the expiry", func() error {
			ts := open()
			clk.Advance(2 * time.Minute)
			_, _, err := api.StopStreamContext(ctx, "C1", ts)
			return err
		}, "message_not_in_streaming_state"},
		{"stop with bad blocks", func() error {
			_, _, err := api.StopStreamContext(ctx, "C1", open(), slack.MsgOptionBlocks(slack.NewContextActionsBlock("x")))
			return err
		}, "invalid_blocks"},
		{"status without a thread", func() error {
			return api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "C1", Status: "is thinking…"})
		}, "invalid_arguments"},
		{"status with 11 loading messages", func() error {
			return api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
				ChannelID: "C1", ThreadTS: root, Status: "is thinking…", LoadingMessages: strings.Split("a b c d e f g h i j k", " "),
			})
		}, "invalid_arguments"},
		{"five suggested prompts", func() error {
			p := slack.AssistantThreadsPrompt{Title: "t", Message: "m"}
			return api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
				ChannelID: "C1", ThreadTS: root, Prompts: []slack.AssistantThreadsPrompt{p, p, p, p, p},
			})
		}, "invalid_arguments"},
		{"a prompt without its message", func() error {
			return api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
				ChannelID: "C1", ThreadTS: root, Prompts: []slack.AssistantThreadsPrompt{{Title: "t"}},
			})
		}, "invalid_arguments"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %s", err, tt.want)
			}
		})
	}
	if err := api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: "C1", ThreadTS: root, Status: "is thinking…", LoadingMessages: []string{"Elen is thinking…"}, Username: "Elen",
	}); err != nil {
		t.Fatal(err)
	}
	if s := fake.Statuses(); len(s) != 1 || s[0].ThreadTS != root || s[0].Status != "is thinking…" || len(s[0].LoadingMessages) != 1 || s[0].Username != "Elen" {
		t.Errorf("statuses %+v", s)
	}
}

// A workspace that refuses streaming in channels still streams in DMs,
// where no recipient is needed.
func TestStreamRefusedForAChannelType(t *testing.T) {
	fake, api, root, ctx := streamRig(t, fakeslack.Options{})
	fake.RefuseStreams("channel")
	if _, _, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS(root), recipient("U1"), slack.MsgOptionMarkdownText("x")); err == nil || err.Error() != "channel_type_not_supported" {
		t.Errorf("in a channel: %v, want channel_type_not_supported", err)
	}
	dm := fake.SendMessage(fakeslack.Message{Channel: "D1", User: "U1", Text: "hi"}).TS
	if _, _, err := api.StartStreamContext(ctx, "D1", slack.MsgOptionTS(dm), slack.MsgOptionMarkdownText("x")); err != nil {
		t.Errorf("in a DM: %v", err)
	}
}

// Without the scopes they need, the agent methods answer missing_scope.
func TestAgentMethodsNeedTheirScopes(t *testing.T) {
	_, api, root, ctx := streamRig(t, fakeslack.Options{Scopes: []string{"channels:history"}})
	if _, _, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS(root), recipient("U1")); err == nil || err.Error() != "missing_scope" {
		t.Errorf("chat.startStream: %v", err)
	}
	if err := api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "C1", ThreadTS: root, Status: "x"}); err == nil || err.Error() != "missing_scope" {
		t.Errorf("assistant.threads.setStatus: %v", err)
	}
	if err := api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
		ChannelID: "C1", ThreadTS: root, Prompts: []slack.AssistantThreadsPrompt{{Title: "t", Message: "m"}},
	}); err == nil || err.Error() != "missing_scope" {
		t.Errorf("assistant.threads.setSuggestedPrompts: %v", err)
	}
}
