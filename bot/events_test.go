package bot

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack/slackevents"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

var testSelf = Identity{TeamID: "T1", UserID: "UBOT", BotID: "BBOT"}

// callback wraps an inner event in an event_callback payload.
func callback(inner string) []byte {
	return []byte(`{"type":"event_callback","team_id":"T1","event_id":"Ev1","event_time":1700000000,"event":` + inner + `}`)
}

func TestDecodeMessage(t *testing.T) {
	at := time.Unix(1700000100, 200000*1000).UTC() // agents.TSTime reads a ts in UTC
	tests := []struct {
		name    string
		payload []byte
		want    agents.Event
		skip    skipReason
		wantErr bool
	}{
		{
			name:    "top-level message",
			payload: callback(`{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"hi &amp; <@U2>","ts":"1700000100.200000","event_ts":"1700000100.200000"}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "C1", TS: "1700000100.200000", UserID: "U1", Raw: "hi &amp; <@U2>", At: at},
		},
		{
			name:    "thread reply",
			payload: callback(`{"type":"message","channel":"G1","channel_type":"group","user":"U1","text":"r","ts":"1700000100.200000","thread_ts":"1700000000.000001"}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "G1", TS: "1700000100.200000", ThreadTS: "1700000000.000001", UserID: "U1", Raw: "r", At: at},
		},
		{
			name:    "root carrying its own thread_ts",
			payload: callback(`{"type":"message","channel":"C1","user":"U1","text":"r","ts":"1700000100.200000","thread_ts":"1700000100.200000"}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "C1", TS: "1700000100.200000", UserID: "U1", Raw: "r", At: at},
		},
		{
			name:    "thread broadcast",
			payload: callback(`{"type":"message","subtype":"thread_broadcast","channel":"C1","user":"U1","text":"also here","ts":"1700000100.200000","thread_ts":"1700000000.000001","root":{"text":"x"}}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "C1", TS: "1700000100.200000", ThreadTS: "1700000000.000001", UserID: "U1", Subtype: "thread_broadcast", Raw: "also here", At: at},
		},
		{
			name:    "file share",
			payload: callback(`{"type":"message","subtype":"file_share","channel":"C1","user":"U1","text":"the claim","ts":"1700000100.200000","files":[{"id":"F1","name":"claim.pdf"},{"id":"F2","title":"Scan"}]}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "C1", TS: "1700000100.200000", UserID: "U1", Subtype: "file_share", Raw: "the claim\n[file: claim.pdf]\n[file: Scan]", At: at},
		},
		{
			name:    "file share without text",
			payload: callback(`{"type":"message","subtype":"file_share","channel":"C1","user":"U1","text":"","ts":"1700000100.200000","files":[{"id":"F1"}]}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "C1", TS: "1700000100.200000", UserID: "U1", Subtype: "file_share", Raw: "[file: F1]", At: at},
		},
		{
			name:    "me message",
			payload: callback(`{"type":"message","subtype":"me_message","channel":"C1","user":"U1","text":"waves","ts":"1700000100.200000"}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "C1", TS: "1700000100.200000", UserID: "U1", Subtype: "me_message", Raw: "waves", At: at},
		},
		{
			name:    "other app's bot message",
			payload: callback(`{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"B2","username":"Jira","text":"ticket","ts":"1700000100.200000"}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "C1", TS: "1700000100.200000", BotID: "B2", Subtype: "bot_message", Raw: "ticket", UserName: "Jira", At: at},
		},
		{
			name:    "other app's message without subtype",
			payload: callback(`{"type":"message","channel":"C1","user":"U9","bot_id":"B3","bot_profile":{"name":"Deploybot"},"text":"shipped","ts":"1700000100.200000"}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "C1", TS: "1700000100.200000", UserID: "U9", BotID: "B3", Raw: "shipped", UserName: "Deploybot", At: at},
		},
		{
			name:    "edit",
			payload: callback(`{"type":"message","subtype":"message_changed","hidden":true,"channel":"C1","ts":"1700000200.000001","event_ts":"1700000200.000001","message":{"type":"message","user":"U1","text":"new","ts":"1700000100.200000","thread_ts":"1700000000.000001"},"previous_message":{"type":"message","user":"U1","text":"old","ts":"1700000100.200000"}}`),
			want:    agents.Event{ID: "Ev1", Kind: agents.EventEdited, Team: "T1", Channel: "C1", TS: "1700000100.200000", ThreadTS: "1700000000.000001", UserID: "U1", Raw: "new", At: time.Unix(1700000200, 1000).UTC()},
		},
		{
			name:    "delete",
			payload: callback(`{"type":"message","subtype":"message_deleted","hidden":true,"channel":"C1","ts":"1700000200.000001","deleted_ts":"1700000100.200000","previous_message":{"type":"message","user":"U1","text":"old","ts":"1700000100.200000","thread_ts":"1700000000.000001"}}`),
			want:    agents.Event{ID: "Ev1", Kind: agents.EventDeleted, Team: "T1", Channel: "C1", TS: "1700000100.200000", ThreadTS: "1700000000.000001", UserID: "U1", At: at},
		},
		{name: "direct message", payload: callback(`{"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":"1.000001"}`), skip: skipDirect},
		{name: "group direct message", payload: callback(`{"type":"message","channel":"G9","channel_type":"mpim","user":"U1","text":"hi","ts":"1.000001"}`), skip: skipDirect},
		{name: "direct message without channel_type", payload: callback(`{"type":"message","channel":"D1","user":"U1","text":"hi","ts":"1.000001"}`), skip: skipDirect},
		{name: "edit in a direct message", payload: callback(`{"type":"message","subtype":"message_changed","channel":"D1","channel_type":"im","message":{"user":"U1","text":"x","ts":"1.1"}}`), skip: skipDirect},
		{name: "join", payload: callback(`{"type":"message","subtype":"channel_join","channel":"C1","user":"U1","text":"<@U1> has joined the channel","ts":"1.000001"}`), skip: skipSubtype},
		{name: "leave", payload: callback(`{"type":"message","subtype":"group_leave","channel":"G1","user":"U1","text":"left","ts":"1.000001"}`), skip: skipSubtype},
		{name: "topic", payload: callback(`{"type":"message","subtype":"channel_topic","channel":"C1","user":"U1","topic":"x","text":"set the topic","ts":"1.000001"}`), skip: skipSubtype},
		{name: "pin", payload: callback(`{"type":"message","subtype":"pinned_item","channel":"C1","user":"U1","text":"pinned","ts":"1.000001"}`), skip: skipSubtype},
		{name: "own post", payload: callback(`{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"BBOT","user":"UBOT","username":"Elen","text":"answer","ts":"1.000001"}`), skip: skipOwn},
		{name: "own post by user id", payload: callback(`{"type":"message","channel":"C1","user":"UBOT","text":"answer","ts":"1.000001"}`), skip: skipOwn},
		{name: "edit of own post", payload: callback(`{"type":"message","subtype":"message_changed","channel":"C1","message":{"bot_id":"BBOT","text":"b","ts":"1.1"},"previous_message":{"bot_id":"BBOT","text":"a","ts":"1.1"}}`), skip: skipOwn},
		{name: "edit that changes nothing said", payload: callback(`{"type":"message","subtype":"message_changed","channel":"C1","message":{"user":"U1","text":"same","ts":"1.1"},"previous_message":{"user":"U1","text":"same","ts":"1.1"}}`), skip: skipUnchanged},
		{name: "edit without message", payload: callback(`{"type":"message","subtype":"message_changed","channel":"C1"}`), skip: skipHiddenUnknown},
		{name: "other event", payload: callback(`{"type":"reaction_added","user":"U1","reaction":"eyes"}`), skip: skipNotMessage},
		{name: "rate limited", payload: []byte(`{"type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820}`), skip: skipRateLimited},
		{name: "url verification", payload: []byte(`{"type":"url_verification","challenge":"x"}`), skip: skipNotCallback},
		{name: "not json", payload: []byte(`{"type":`), wantErr: true},
		{name: "event not an object", payload: callback(`"message"`), wantErr: true},
		{name: "ts of the wrong type", payload: callback(`{"type":"message","channel":"C1","ts":1.5}`), wantErr: true},
		{name: "no ts", payload: callback(`{"type":"message","channel":"C1","user":"U1","text":"x"}`), wantErr: true},
		{name: "no channel", payload: callback(`{"type":"message","user":"U1","text":"x","ts":"1.000001"}`), wantErr: true},
		{name: "delete without deleted_ts", payload: callback(`{"type":"message","subtype":"message_deleted","channel":"C1","ts":"2.000001"}`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, skip, err := decodeMessage(tt.payload, testSelf)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			// The socketmode client's parse finds conclave's own posts
			// without decodeMessage, and nothing decodeMessage keeps.
			if parsed, perr := slackevents.ParseEvent(tt.payload, slackevents.OptionNoVerifyToken()); perr == nil {
				own := isOwnPost(parsed, testSelf)
				if own && skip != skipOwn {
					t.Errorf("isOwnPost is true for an event decodeMessage skips as %q", skip)
				}
				if !own && skip == skipOwn && !strings.HasPrefix(tt.name, "edit") {
					t.Errorf("isOwnPost is false for an own post")
				}
			}
			if skip != tt.skip {
				t.Fatalf("skip = %q, want %q", skip, tt.skip)
			}
			if got != tt.want {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(tt.want)
				t.Errorf("event\n got %s\nwant %s", g, w)
			}
		})
	}
}

// BenchmarkOwnPost is what Slack's echo of a conclave post costs the bot
// once the socketmode client has parsed it: told apart on the client's
// parse, against decoding the payload again.
func BenchmarkOwnPost(b *testing.B) {
	payload := callback(`{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"BBOT","user":"UBOT","username":"Elen","text":"🧭 The claim C45653 was filed on 3 May; the adjuster confirms it is covered.","ts":"1700000100.200000","thread_ts":"1700000000.000001","blocks":[{"type":"rich_text","block_id":"x","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"🧭 The claim C45653 was filed on 3 May; the adjuster confirms it is covered."}]}]}],"channel_type":"channel","event_ts":"1700000100.200000"}`)
	parsed, err := slackevents.ParseEvent(payload, slackevents.OptionNoVerifyToken())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("client parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !isOwnPost(parsed, testSelf) {
				b.Fatal("not own")
			}
		}
	})
	b.Run("decoded again", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, skip, _ := decodeMessage(payload, testSelf); skip != skipOwn {
				b.Fatal("not own")
			}
		}
	})
}

// TestThreadsAreRecordedApart holds the recording of a thread's first
// message: with HandleParallel above 1 a message of another thread is
// recorded and acknowledged meanwhile, and the held thread's second
// message waits for its first.
func TestThreadsAreRecordedApart(t *testing.T) {
	r := newRig(t, fakeslack.Options{}, func(o *Options) { o.HandleParallel = 4 })
	release := make(chan struct{})
	r.rec.before = func(ctx context.Context, ev agents.Event, call int) error {
		if ev.Text != "first of A" {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return errors.New("held past the handle timeout")
		}
	}
	r.run(t)
	ctx := testContext(t)
	a := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "first of A"})
	r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", ThreadTS: a.TS, Text: "second of A"})
	b := r.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "thread B"})
	if _, err := r.fake.WaitAck(ctx, b.Key()); err != nil {
		t.Fatalf("thread B waited behind thread A: %v", err)
	}
	if evs := r.rec.wait(t, 1); len(evs) != 1 || evs[0].Text != "thread B" {
		t.Fatalf("recorded %+v while A was held, want only thread B", evs)
	}
	close(release)
	evs := r.rec.wait(t, 3)
	if evs[1].Text != "first of A" || evs[2].Text != "second of A" {
		t.Errorf("thread A recorded as %q, %q", evs[1].Text, evs[2].Text)
	}
}
