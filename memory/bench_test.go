package memory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// turn is one expert's turn on the hot path, as the engine runs it: a
// person's message is looked at (the channel's agents, the author's
// pairing, whether the thread is a conversation) and recorded; a worker
// takes the lock and loads the thread with the channel's agents, reads the
// expert's session, commits its reply as pending before posting it, then
// commits the posted reply and releases the lock. Conversations hold 20
// messages.
func turn(ctx context.Context, s memory.Store, i int) error {
	convID := fmt.Sprintf("conv-%d", i/10)
	conv := memory.Conversation{ID: convID, Team: "T1", Channel: "C1", ThreadTS: "1700000000.000000"}
	text := strings.Repeat("word ", 40)
	ts := fmt.Sprintf("1700000000.%06d", 2*i+1)
	if _, err := s.Lookup(ctx, memory.Lookup{Channel: "C1", User: "U1", Conversation: convID}); err != nil {
		return err
	}
	if _, err := s.RecordMessage(ctx, conv, memory.Message{TS: ts, UserID: "U1", Kind: "person", Raw: text, Text: text, Name: "Ann", At: time.Now()}, "Ev"+ts); err != nil {
		return err
	}
	l, snap, _, err := s.AcquireAndLoad(ctx, convID, time.Minute, memory.Lookup{Channel: "C1"})
	if err != nil {
		return err
	}
	if _, err := s.ReadSession(ctx, "expert.acme.137.protocol6022.eth", "C45653", 50); err != nil {
		return err
	}
	reply := memory.Message{TS: fmt.Sprintf("1700000000.%06d", 2*i+2), Agent: "expert.acme.137.protocol6022.eth", Kind: "agent", Text: text, TurnID: "turn", At: time.Now()}
	c := memory.Commit{Conversation: snap.Conversation, Deadline: time.Now()}
	c.Conversation.State = []byte(strings.Repeat("s", 500)) // with the reply pending
	if _, err := s.Commit(ctx, l, c); err != nil {
		return err
	}
	c.Conversation.State = []byte(strings.Repeat("s", 400))
	c.Messages = []memory.Message{reply}
	c.Sessions = []memory.SessionAppend{{Namespace: "expert.acme.137.protocol6022.eth", Key: "C45653", Entries: []memory.SessionEntry{
		{Role: "user", Content: text, Author: "Ann (person)", ConversationID: convID, TS: ts},
		{Role: "assistant", Content: text, ConversationID: convID, TS: reply.TS},
	}}}
	c.Deadline = time.Now().Add(10 * time.Minute)
	c.Release = true
	_, err = s.Commit(ctx, l, c)
	return err
}

func BenchmarkTurn(b *testing.B) {
	b.Run("in-process", func(b *testing.B) {
		s := memory.NewInProcess(memory.Options{})
		for i := 0; b.Loop(); i++ {
			if err := turn(b.Context(), s, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redis", func(b *testing.B) {
		s, trips := redistest.New(b).CountedStore(b, memory.Options{})
		before := trips.Count()
		n := 0
		for i := 0; b.Loop(); i++ {
			if err := turn(b.Context(), s, i); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(trips.Count()-before)/float64(n), "roundtrips/turn")
	})
}

// BenchmarkRedisConversationBytes reports the Redis memory one typical
// conversation takes: 20 messages (10 recorded with their dedup marks, 10
// replies), a 400-byte engine state and a deadline.
func BenchmarkRedisConversationBytes(b *testing.B) {
	db := redistest.New(b)
	s := db.Store(b, memory.Options{})
	ctx := b.Context()
	for i := range 10 {
		if err := turn(ctx, s, i); err != nil {
			b.Fatal(err)
		}
	}
	c := db.Client(b)
	var total int64
	for b.Loop() {
		total = 0
		keys, err := c.Keys(ctx, db.Prefix+"*").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			if strings.Contains(k, "{n:") {
				continue // the expert's session is not the conversation's
			}
			n, err := c.MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				b.Fatal(err)
			}
			total += n
		}
	}
	b.ReportMetric(float64(total), "bytes/conversation")
}

// BenchmarkRecordEvent is what recording a person's reply costs before its
// acknowledgement: "lookup+record" as two calls (Lookup, then
// RecordMessage), "record-looked" as one (Recorder.RecordLooked).
func BenchmarkRecordEvent(b *testing.B) {
	text := strings.Repeat("word ", 40)
	conv := memory.Conversation{ID: "conv-1", Team: "T1", Channel: "C1", ThreadTS: "1700000000.000000"}
	q := memory.Lookup{Channel: "C1", User: "U1", Conversation: conv.ID}
	msg := func(i int) memory.Message {
		return memory.Message{TS: fmt.Sprintf("1700000001.%06d", i), UserID: "U1", Kind: "person", Raw: text, Text: text, Name: "Ann", At: time.Now()}
	}
	ways := []struct {
		name   string
		record func(ctx context.Context, s memory.Store, i int) error
	}{
		{"lookup+record", func(ctx context.Context, s memory.Store, i int) error {
			if _, err := s.Lookup(ctx, q); err != nil {
				return err
			}
			_, err := s.RecordMessage(ctx, conv, msg(i), fmt.Sprintf("Ev%d", i))
			return err
		}},
		{"record-looked", func(ctx context.Context, s memory.Store, i int) error {
			out, err := s.(memory.Recorder).RecordLooked(ctx, memory.Intake{Conversation: conv, Message: msg(i), EventID: fmt.Sprintf("Ev%d", i),
				Lookup: q, NeedUnpaired: true})
			if err == nil && !out.Recorded {
				err = fmt.Errorf("message %d not recorded: %+v", i, out)
			}
			return err
		}},
	}
	for _, w := range ways {
		b.Run("in-process/"+w.name, func(b *testing.B) {
			s := memory.NewInProcess(memory.Options{})
			for i := 0; b.Loop(); i++ {
				if err := w.record(b.Context(), s, i); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("redis/"+w.name, func(b *testing.B) {
			s, trips := redistest.New(b).CountedStore(b, memory.Options{})
			before := trips.Count()
			n := 0
			for i := 0; b.Loop(); i++ {
				if err := w.record(b.Context(), s, i); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(trips.Count()-before)/float64(n), "roundtrips/op")
		})
	}
}
