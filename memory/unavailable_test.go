package memory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// replyError is a Redis error reply, as go-redis reports one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// TestUnavailableSaysTheStoreDidNotAnswer: the errors of a Redis that is
// away (refused, cut, timed out, loading) are unavailability; a wrong call,
// a missing record, a cancelled caller and a closed store are not.
func TestUnavailableSaysTheStoreDidNotAnswer(t *testing.T) {
	proxy, db := redistest.NewProxy(t, redistest.New(t))
	s := db.Store(t, memory.Options{})
	ctx := t.Context()
	conv := memory.Conversation{ID: "c1", Channel: "C1", ThreadTS: "1700000000.000100"}
	m := memory.Message{TS: "1700000000.000100", Text: "hi"}
	if _, err := s.RecordMessage(ctx, conv, m, "Ev1"); err != nil {
		t.Fatal(err)
	}
	errs := map[string]error{}
	_, errs["no ts"] = s.RecordMessage(ctx, conv, memory.Message{Text: "hi"}, "Ev2")
	errs["missing"] = s.UpdateMessage(ctx, "c1", "1700000000.000999", "x", "x")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, errs["cancelled"] = s.RecordMessage(cancelled, conv, m, "Ev3")

	proxy.Down()
	_, errs["refused"] = s.RecordMessage(ctx, conv, m, "Ev4")
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	_, errs["timed out"] = s.RecordMessage(short, conv, m, "Ev5")
	cancelShort()
	proxy.Up()

	closed := db.Store(t, memory.Options{})
	_ = closed.Close()
	_, errs["closed"] = closed.RecordMessage(ctx, conv, m, "Ev6")

	errs["loading"] = fmt.Errorf("memory: record: %w", replyError("LOADING Redis is loading the dataset in memory"))
	errs["failing over"] = replyError("MASTERDOWN Link with MASTER is down")
	errs["script error"] = replyError("ERR Error running script")
	errs["other"] = errors.New("memory: message ts is empty")

	want := map[string]bool{
		"no ts": false, "missing": false, "cancelled": false, "closed": false, "script error": false, "other": false,
		"refused": true, "timed out": true, "loading": true, "failing over": true,
	}
	for name, w := range want {
		err := errs[name]
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if got := memory.Unavailable(err); got != w {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", name, err, got, w)
		}
	}
	if memory.Unavailable(nil) {
		t.Error("Unavailable(nil) = true")
	}
	if ok, err := s.RecordMessage(ctx, conv, m, "Ev1"); err != nil || ok {
		t.Errorf("once the store is back, the first record is a duplicate: %v, %v", ok, err)
	}
}
