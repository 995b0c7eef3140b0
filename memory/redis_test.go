package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
	"github.com/conclavehq/conclave/memory/storetest"
)

// redisFactory makes stores on the server at url (found per test when
// empty), each with a fresh key prefix.
func redisFactory(url string, adjust func(*memory.Redis)) storetest.Factory {
	return func(t *testing.T, o memory.Options) memory.Store {
		t.Helper()
		var db redistest.DB
		if url == "" {
			db = redistest.New(t)
		} else {
			db = redistest.WithPrefix(t, url)
		}
		s := db.Store(t, o)
		if adjust != nil {
			adjust(s)
		}
		return s
	}
}

func TestRedis(t *testing.T) {
	storetest.Run(t, redisFactory("", nil))
}

// TestRedisParkedSessions runs the suite with session appends going
// through the outbox, the path Redis Cluster takes.
func TestRedisParkedSessions(t *testing.T) {
	storetest.Run(t, redisFactory("", (*memory.Redis).ParkSessions))
}

// TestRedisCluster runs the suite on a local three-node Redis Cluster
// (opt-in: CONCLAVE_REDIS_CLUSTER=1, which .ci/run sets).
func TestRedisCluster(t *testing.T) {
	storetest.Run(t, redisFactory(redistest.Cluster(t), nil))
}

// TestRedisSentinel runs the suite through a local Sentinel (opt-in:
// CONCLAVE_REDIS_SENTINEL=1).
func TestRedisSentinel(t *testing.T) {
	storetest.Run(t, redisFactory(redistest.Sentinel(t), nil))
}

func newTestRedis(t testing.TB) (*memory.Redis, redistest.DB) {
	t.Helper()
	db := redistest.New(t)
	return db.Store(t, memory.Options{}), db
}

func TestRedisParkedCommitIsAppliedByLoad(t *testing.T) {
	s, db := newTestRedis(t)
	s.ParkSessions()
	ctx := t.Context()
	l, err := s.AcquireLock(ctx, "c1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	entry := memory.SessionEntry{Role: "user", Content: "remember C45653"}
	c := memory.Commit{
		Conversation: memory.Conversation{ID: "c1", Channel: "C1"},
		Sessions:     []memory.SessionAppend{{Namespace: "x.eth", Key: "C45653", Entries: []memory.SessionEntry{entry}}},
	}
	if err := s.CommitParked(ctx, l, c); err != nil {
		t.Fatalf("CommitParked: %v", err)
	}
	read := func() int {
		t.Helper()
		got, err := s.ReadSession(ctx, "x.eth", "C45653", 0)
		if err != nil {
			t.Fatalf("ReadSession: %v", err)
		}
		return len(got)
	}
	if n := read(); n != 0 {
		t.Fatalf("a parked append is already applied (%d entries)", n)
	}
	for range 2 {
		if _, err := s.Load(ctx, l); err != nil {
			t.Fatalf("Load: %v", err)
		}
		if n := read(); n != 1 {
			t.Errorf("after Load: %d entries, want the parked one exactly once", n)
		}
	}
	left, err := db.Client(t).Keys(ctx, db.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range left {
		if strings.Contains(k, ":applied:") || strings.Contains(k, ":outbox:") {
			t.Errorf("%s is left once the parked append is applied", k)
		}
	}
}

func TestRedisAppendOnce(t *testing.T) {
	s, _ := newTestRedis(t)
	a := memory.SessionAppend{Namespace: "x.eth", Key: "k", Entries: []memory.SessionEntry{{Role: "user", Content: "a"}}}
	for range 3 {
		if err := s.AppendOnce(t.Context(), a, "commit-1"); err != nil {
			t.Fatalf("AppendOnce: %v", err)
		}
	}
	got, err := s.ReadSession(t.Context(), "x.eth", "k", 0)
	if err != nil || len(got) != 1 {
		t.Errorf("ReadSession = %d entries, %v; want 1", len(got), err)
	}
}

// TestRedisKeys checks the key schema: one hash tag per conversation's
// keys, dedup marks kept DedupTTL, conversations their retention, sessions
// and pairings for good.
func TestRedisKeys(t *testing.T) {
	s, db := newTestRedis(t)
	ctx := t.Context()
	conv := memory.Conversation{ID: "6f1c5e0e-0000-5000-8000-000000000001", Channel: "C1", ThreadTS: "1700000000.000100"}
	if _, err := s.RecordMessage(ctx, conv, memory.Message{TS: "1700000000.000100", Text: "hi"}, "Ev1"); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLock(ctx, conv.ID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Commit(ctx, l, memory.Commit{Conversation: conv, Deadline: time.Now().Add(time.Hour),
		Sessions: []memory.SessionAppend{{Namespace: "x.eth", Key: "k", Entries: []memory.SessionEntry{{Role: "user", Content: "a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PairHuman(ctx, "U1", "ann.eth"); err != nil {
		t.Fatal(err)
	}
	c := db.Client(t)
	keys, err := c.Keys(ctx, db.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	var tags []string
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(k, db.Prefix)
		switch {
		case strings.Contains(name, ":seen:"):
			if ttl <= memory.DedupTTL-time.Hour || ttl > memory.DedupTTL {
				t.Errorf("%s: ttl %v, want about %v", name, ttl, memory.DedupTTL)
			}
		case strings.Contains(name, ":conv:") || strings.Contains(name, ":msgs:"):
			if ttl <= memory.DefaultConversationTTL-time.Hour || ttl > memory.DefaultConversationTTL {
				t.Errorf("%s: ttl %v, want about %v", name, ttl, memory.DefaultConversationTTL)
			}
		case strings.Contains(name, ":lock:"):
			if ttl <= 0 || ttl > time.Minute {
				t.Errorf("%s: ttl %v, want the lock's", name, ttl)
			}
		default:
			if ttl != -1 {
				t.Errorf("%s: ttl %v, want none", name, ttl)
			}
		}
		if strings.Contains(name, ":seen:") || strings.Contains(name, ":conv:") || strings.Contains(name, ":msgs:") ||
			strings.Contains(name, ":lock:") || strings.HasSuffix(name, ":due") {
			tags = append(tags, name[:strings.Index(name, "}")+1])
		}
	}
	if len(tags) != 6 {
		t.Errorf("conversation keys = %d, want 6 (conv, msgs, two marks, lock, due) in %q", len(tags), keys)
	}
	if len(slices.Compact(slices.Clone(tags))) != 1 {
		t.Errorf("a conversation's keys use hash tags %q, want one", tags)
	}
}

// TestRedisRestart restarts Redis mid-conversation: what was acknowledged
// is still there (appendonly), a retry is still a duplicate, the lock
// still guards the conversation, and the scripts are sent again.
func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	db := redistest.WithPrefix(t, srv.URL())
	s := db.Store(t, memory.Options{})
	ctx := t.Context()
	conv := memory.Conversation{ID: "c1", Channel: "C1", ThreadTS: "1700000000.000100"}
	m := memory.Message{TS: "1700000000.000100", Text: "before"}
	if ok, err := s.RecordMessage(ctx, conv, m, "Ev1"); err != nil || !ok {
		t.Fatalf("RecordMessage = %v, %v", ok, err)
	}
	l, err := s.AcquireLock(ctx, "c1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	srv.Restart()

	if ok, err := s.RecordMessage(ctx, conv, m, "Ev1"); err != nil || ok {
		t.Errorf("a retry after the restart: RecordMessage = %v, %v; want a duplicate", ok, err)
	}
	if _, err := s.AcquireLock(ctx, "c1", time.Minute); !errors.Is(err, memory.ErrLocked) {
		t.Errorf("AcquireLock after the restart: %v, want ErrLocked", err)
	}
	// The restart emptied the script cache: the load script, sent by its
	// hash in a pipeline, is sent again.
	if _, _, found, err := s.AcquireAndLoad(ctx, "c2", time.Minute, memory.Lookup{Conversation: "c1"}); err != nil || !found.Exists {
		t.Errorf("AcquireAndLoad after the restart: %+v, %v; want c1 found", found, err)
	}
	snap, err := s.Load(ctx, l)
	if err != nil {
		t.Fatalf("Load after the restart: %v", err)
	}
	if len(snap.Messages) != 1 || snap.Messages[0].Text != "before" {
		t.Errorf("messages after the restart = %+v", snap.Messages)
	}
	if _, err := s.Commit(ctx, l, memory.Commit{Conversation: conv}); err != nil {
		t.Errorf("Commit after the restart: %v", err)
	}
	if _, err := s.Due(ctx, time.Now(), 0); err != nil {
		t.Errorf("Due after the restart: %v", err)
	}
}

func TestNewRedisBadInput(t *testing.T) {
	url := redistest.Find(t)
	tests := []struct {
		name string
		o    memory.RedisOptions
	}{
		{"brace in prefix", memory.RedisOptions{URL: url, KeyPrefix: "app{1}:"}},
		{"unknown scheme", memory.RedisOptions{URL: "http://secret-pass@127.0.0.1:6379"}},
		{"no scheme", memory.RedisOptions{URL: "127.0.0.1:6379"}},
		{"bad port", memory.RedisOptions{URL: "redis://user:secret-pass@127.0.0.1:notaport"}},
		{"sentinel without master", memory.RedisOptions{URL: "redis+sentinel://127.0.0.1:26379"}},
		{"nobody answers", memory.RedisOptions{URL: "redis://user:secret-pass@127.0.0.1:1/0?dial_timeout=1s&max_retries=-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			s, err := memory.NewRedis(ctx, tt.o)
			if err == nil {
				s.Close()
				t.Fatal("NewRedis succeeded")
			}
			if strings.Contains(err.Error(), "secret-pass") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}

func TestNewRedisWithClient(t *testing.T) {
	db := redistest.New(t)
	c := db.Client(t)
	s, err := memory.NewRedis(t.Context(), memory.RedisOptions{Client: c, KeyPrefix: db.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Errorf("the caller's client was closed with the store: %v", err)
	}
}

// TestRedisDown: with Redis unreachable, recording fails (so the Slack
// envelope is not acknowledged and comes again), and works again once
// Redis is back.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	s := redistest.WithPrefix(t, srv.URL()).Store(t, memory.Options{})
	conv := memory.Conversation{ID: "c1", Channel: "C1", ThreadTS: "1700000000.000100"}
	m := memory.Message{TS: "1700000000.000100", Text: "hi"}

	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if ok, err := s.RecordMessage(ctx, conv, m, "Ev1"); err == nil {
		t.Fatalf("RecordMessage with Redis down = %v, nil; want an error", ok)
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping with Redis down succeeded")
	}

	srv.Restart()
	if ok, err := s.RecordMessage(t.Context(), conv, m, "Ev1"); err != nil || !ok {
		t.Errorf("RecordMessage once Redis is back = %v, %v; want recorded", ok, err)
	}
}

// TestRedisReplicasLoseNoWakeup runs the engine's protocol (Due, lock,
// Load, release, again while pending) on two replicas while messages
// arrive through both: once everything settles, the last Load of every
// conversation saw all of its messages.
func TestRedisReplicasLoseNoWakeup(t *testing.T) {
	db := redistest.New(t)
	replicas := []*memory.Redis{db.Store(t, memory.Options{}), db.Store(t, memory.Options{})}
	ctx := t.Context()
	const convs, perConv = 5, 40

	var mu sync.Mutex
	seen := map[string]int{} // conversation → messages in its latest Load
	work := func(s *memory.Redis) error {
		ids, err := s.Due(ctx, time.Now(), 10)
		if err != nil {
			return err
		}
		for _, id := range ids {
			for {
				l, err := s.AcquireLock(ctx, id, time.Minute)
				if errors.Is(err, memory.ErrLocked) {
					break
				}
				if err != nil {
					return err
				}
				snap, err := s.Load(ctx, l)
				if err != nil {
					return err
				}
				mu.Lock()
				seen[id] = max(seen[id], len(snap.Messages))
				mu.Unlock()
				pending, err := s.ReleaseLock(ctx, l)
				if err != nil {
					return err
				}
				if !pending {
					break
				}
			}
		}
		return nil
	}

	var producers, workers sync.WaitGroup
	done := make(chan struct{})
	for i := range convs {
		producers.Go(func() {
			conv := memory.Conversation{ID: fmt.Sprintf("c%d", i), Channel: "C1"}
			for j := range perConv {
				m := memory.Message{TS: fmt.Sprintf("1700000000.%06d", j), Text: "x"}
				if _, err := replicas[j%2].RecordMessage(ctx, conv, m, ""); err != nil {
					t.Errorf("RecordMessage: %v", err)
				}
			}
		})
	}
	for w := range 4 {
		workers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := work(replicas[w%2]); err != nil {
					t.Errorf("worker: %v", err)
					return
				}
			}
		})
	}
	producers.Wait()
	close(done)
	workers.Wait()
	// Whatever is still due is picked up now, as the next sweep would.
	for range 10 {
		if err := work(replicas[0]); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := replicas[1].Due(ctx, time.Now(), 0); err != nil || len(ids) != 0 {
		t.Errorf("still due after settling: %q, %v", ids, err)
	}
	for i := range convs {
		id := fmt.Sprintf("c%d", i)
		if seen[id] != perConv {
			t.Errorf("%s: the latest Load saw %d messages, want %d", id, seen[id], perConv)
		}
	}
}
