package bot

import (
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
)

// With direct conversations on, a one-to-one DM's messages, replies and
// edits decode as a channel's do; group DMs and conclave's own posts in a
// DM stay skipped.
func TestDecodeDirectConversations(t *testing.T) {
	self := Identity{UserID: "UBOT", BotID: "BBOT"}
	tests := []struct {
		name    string
		payload []byte
		want    agents.Event
		skip    skipReason
	}{
		{
			name:    "top-level message",
			payload: callback(`{"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":"1700000000.000001"}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "D1", TS: "1700000000.000001", UserID: "U1", Raw: "hi", At: time.Unix(1700000000, 1000).UTC()},
		},
		{
			name:    "reply in an assistant thread",
			payload: callback(`{"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":"1700000000.000002","thread_ts":"1700000000.000001"}`),
			want:    agents.Event{ID: "Ev1", Team: "T1", Channel: "D1", TS: "1700000000.000002", ThreadTS: "1700000000.000001", UserID: "U1", Raw: "hi", At: time.Unix(1700000000, 2000).UTC()},
		},
		{
			name:    "edit",
			payload: callback(`{"type":"message","subtype":"message_changed","channel":"D1","channel_type":"im","ts":"1700000000.000003","message":{"type":"message","user":"U1","text":"new","ts":"1700000000.000001"},"previous_message":{"type":"message","user":"U1","text":"old","ts":"1700000000.000001"}}`),
			want:    agents.Event{ID: "Ev1", Kind: agents.EventEdited, Team: "T1", Channel: "D1", TS: "1700000000.000001", UserID: "U1", Raw: "new", At: time.Unix(1700000000, 1000).UTC()},
		},
		{name: "group direct message", payload: callback(`{"type":"message","channel":"G9","channel_type":"mpim","user":"U1","text":"hi","ts":"1.000001"}`), skip: skipDirect},
		{name: "im type on a channel id", payload: callback(`{"type":"message","channel":"C9","channel_type":"im","user":"U1","text":"hi","ts":"1.000001"}`), skip: skipDirect},
		{name: "conclave's own post", payload: callback(`{"type":"message","channel":"D1","channel_type":"im","bot_id":"BBOT","user":"UBOT","text":"hi","ts":"1.000001"}`), skip: skipOwn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, skip, err := decodeMessageIn(tt.payload, self, true)
			if err != nil || skip != tt.skip || got != tt.want {
				t.Errorf("decodeMessageIn = %+v, %q, %v; want %+v, %q", got, skip, err, tt.want, tt.skip)
			}
			if _, skip, _ := decodeMessage(tt.payload, self); tt.skip == "" && skip != skipDirect {
				t.Errorf("without direct conversations: skip %q, want %q", skip, skipDirect)
			}
		})
	}
}

// assistant_thread_started is a direct event naming the DM and its thread;
// one without its thread is not.
func TestDecodeAssistantThreadStarted(t *testing.T) {
	d, ok := decodeDirect(callback(`{"type":"assistant_thread_started","assistant_thread":{"user_id":"U1","channel_id":"D1","thread_ts":"1700000000.000001","context":{}},"event_ts":"1700000000.000002"}`), Identity{})
	want := Direct{Kind: DirectThreadStarted, User: "U1", Channel: "D1", ThreadTS: "1700000000.000001"}
	if !ok || d != want {
		t.Errorf("decodeDirect = %+v, %v; want %+v", d, ok, want)
	}
	if d, ok := decodeDirect(callback(`{"type":"assistant_thread_started","assistant_thread":{"user_id":"U1","channel_id":"D1"}}`), Identity{}); ok {
		t.Errorf("without a thread: %+v", d)
	}
}
