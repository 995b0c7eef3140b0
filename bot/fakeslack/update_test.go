package fakeslack_test

import (
	"context"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/bot/fakeslack"
)

func TestChatUpdate(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{Channels: []fakeslack.Channel{{ID: "C1", Name: "desk"}}})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("so far", false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "conclave_turn", EventPayload: map[string]any{"turn_id": "t1"}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("complete", false),
		slack.MsgOptionBlocks(slack.NewMarkdownBlock("", "**complete**"))); err != nil {
		t.Fatal(err)
	}
	got, ok := fake.Current("C1", ts)
	if !ok || got.Text != "complete" || len(got.MarkdownTexts()) != 1 || got.MarkdownTexts()[0] != "**complete**" {
		t.Errorf("current = %+v", got)
	}
	if got.Metadata == nil || got.Metadata.EventPayload["turn_id"] != "t1" {
		t.Errorf("metadata %+v: kept when the update sends none", got.Metadata)
	}
	if p := fake.Posts(); len(p) != 1 || p[0].Text != "so far" {
		t.Errorf("posts = %+v, want the post as it was made", p)
	}
	if u := fake.Updates(); len(u) != 1 || u[0].TS != ts || u[0].Text != "complete" {
		t.Errorf("updates = %+v", u)
	}

	msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: ts})
	if err != nil || len(msgs) != 1 || msgs[0].Text != "complete" {
		t.Errorf("conversations.replies = %+v, %v: want the updated text", msgs, err)
	}

	for _, tt := range []struct {
		name, ts, want string
	}{
		{"unknown message", "1.000001", "message_not_found"},
		{"someone else's", fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "hi"}).TS, "cant_update_message"},
	} {
		_, _, _, err := api.UpdateMessageContext(ctx, "C1", tt.ts, slack.MsgOptionText("x", false))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: err = %v, want %s", tt.name, err, tt.want)
		}
	}
}
