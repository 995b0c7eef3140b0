package fakeslack_test

import (
	"context"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/bot/fakeslack"
)

// TestWaitPostsAfter follows posts as a reader does: each call returns
// only what came after the posts already seen, and waits for one.
func TestWaitPostsAfter(t *testing.T) {
	fake := fakeslack.New(t, fakeslack.Options{})
	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()))
	ctx := testContext(t)
	post := func(text string) {
		t.Helper()
		if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText(text, false)); err != nil {
			t.Fatal(err)
		}
	}
	post("one")
	post("two")
	got, err := fake.WaitPostsAfter(ctx, 1)
	if err != nil || len(got) != 1 || got[0].Text != "two" {
		t.Fatalf("after 1: %+v, %v", got, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if got, err := fake.WaitPostsAfter(short, 2); err == nil || len(got) != 0 {
		t.Errorf("with no new post: %+v, %v; want the context's error", got, err)
	}
	posted := make(chan error, 1)
	go func() {
		_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("three", false))
		posted <- err
	}()
	got, err = fake.WaitPostsAfter(ctx, 2)
	if perr := <-posted; perr != nil {
		t.Fatal(perr)
	}
	if err != nil || len(got) != 1 || got[0].Text != "three" {
		t.Errorf("after 2: %+v, %v", got, err)
	}
}
