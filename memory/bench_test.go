package memory_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// roundTrips counts what a client sends to Redis: one per command, one per
// pipeline.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// countingRedis opens a Redis store whose round trips are counted.
func countingRedis(b *testing.B) (*memory.Redis, *roundTrips, redistest.DB) {
	b.Helper()
	db := redistest.New(b)
	c := db.Client(b)
	counter := &roundTrips{}
	c.AddHook(counter)
	s, err := memory.NewRedis(b.Context(), memory.RedisOptions{Client: c, KeyPrefix: db.Prefix})
	if err != nil {
		b.Fatal(err)
	}
	return s, counter, db
}

// turn is one turn on the hot path: a person's message is recorded, an
// agent takes the lock, loads the thread and its session, checks the lock
// before posting, commits its reply and releases. Conversations hold 20
// messages.
func turn(ctx context.Context, s memory.Store, i int) error {
	convID := fmt.Sprintf("conv-%d", i/10)
	conv := memory.Conversation{ID: convID, Team: "T1", Channel: "C1", ThreadTS: "1700000000.000000"}
	text := strings.Repeat("word ", 40)
	ts := fmt.Sprintf("1700000000.%06d", 2*i+1)
	if _, err := s.RecordMessage(ctx, conv, memory.Message{TS: ts, UserID: "U1", Kind: "person", Raw: text, Text: text, Name: "Ann", At: time.Now()}, "Ev"+ts); err != nil {
		return err
	}
	l, err := s.AcquireLock(ctx, convID, time.Minute)
	if err != nil {
		return err
	}
	snap, err := s.Load(ctx, l)
	if err != nil {
		return err
	}
	if _, err := s.ReadSession(ctx, "expert.acme.137.protocol6022.eth", "C45653", 50); err != nil {
		return err
	}
	if err := s.CheckLock(ctx, l); err != nil {
		return err
	}
	reply := memory.Message{TS: fmt.Sprintf("1700000000.%06d", 2*i+2), Agent: "expert.acme.137.protocol6022.eth", Kind: "agent", Text: text, TurnID: "turn", At: time.Now()}
	snap.Conversation.State = []byte(strings.Repeat("s", 400))
	err = s.Commit(ctx, l, memory.Commit{
		Conversation: snap.Conversation,
		Messages:     []memory.Message{reply},
		Sessions: []memory.SessionAppend{{Namespace: "expert.acme.137.protocol6022.eth", Key: "C45653", Entries: []memory.SessionEntry{
			{Role: "user", Content: text, Author: "Ann (person)", ConversationID: convID, TS: ts},
			{Role: "assistant", Content: text, ConversationID: convID, TS: reply.TS},
		}}},
		Deadline: time.Now().Add(10 * time.Minute),
	})
	if err != nil {
		return err
	}
	_, err = s.ReleaseLock(ctx, l)
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
		s, counter, _ := countingRedis(b)
		counter.n.Store(0)
		n := 0
		for i := 0; b.Loop(); i++ {
			if err := turn(b.Context(), s, i); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(counter.n.Load())/float64(n), "roundtrips/turn")
	})
}

// BenchmarkRedisConversationBytes reports the Redis memory one typical
// conversation takes: 20 messages (10 recorded with their dedup marks, 10
// replies), a 400-byte engine state and a deadline.
func BenchmarkRedisConversationBytes(b *testing.B) {
	s, _, db := countingRedis(b)
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
