package bot

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testclock"
)

// statusRig runs a Status over a rig's WebAPI, its checks ticked by the
// test on a fake clock.
type statusRig struct {
	*rig
	status *Status
	clock  *testclock.Clock
	ticks  chan time.Time
}

func newStatusRig(t *testing.T) *statusRig {
	t.Helper()
	clock := testclock.New(time.Unix(1_800_000_000, 0))
	r := newRig(t, fakeslack.Options{}, func(o *Options) { o.Now = clock.Now })
	ticks := make(chan time.Time)
	s := &statusRig{rig: r, clock: clock, ticks: ticks,
		status: NewStatus(r.web, func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} })}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.status.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

// waitStatuses waits for n statuses set in all.
func (s *statusRig) waitStatuses(t *testing.T, n int) []fakeslack.Status {
	t.Helper()
	if _, err := s.fake.WaitCalls(testContext(t), "assistant.threads.setStatus", n); err != nil {
		t.Fatalf("%v; statuses %+v", err, s.fake.Statuses())
	}
	return s.fake.Statuses()
}

// While turns run the thread says who works: the facilitator thinking,
// then the expert it asked; the status is set again before Slack's two
// minutes run out, and cleared when the last turn ends.
func TestStatusWhileTurnsRun(t *testing.T) {
	s := newStatusRig(t)
	thread := s.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "q"}).TS
	elen := agents.Work{Channel: "C1", ThreadTS: thread, TurnID: "t1", Agent: "Elen", Facilitator: true}
	claudine := agents.Work{Channel: "C1", ThreadTS: thread, TurnID: "t2", Agent: "Claudine"}

	s.status.TurnStarted(elen)
	st := s.waitStatuses(t, 1)
	if st[0].ThreadTS != thread || st[0].Status != "is thinking…" || !slices.Equal(st[0].LoadingMessages, []string{"Elen is thinking…"}) || st[0].Username != "Elen" {
		t.Errorf("first status %+v", st[0])
	}
	s.status.TurnStarted(claudine)
	st = s.waitStatuses(t, 2)
	if !slices.Equal(st[1].LoadingMessages, []string{"Elen is thinking…", "Asking Claudine…"}) {
		t.Errorf("status while the expert is asked: %+v", st[1])
	}

	s.clock.Advance(statusRefresh - time.Second)
	s.ticks <- s.clock.Now()
	s.ticks <- s.clock.Now() // taken once the check of the first is over
	if n := len(s.fake.CallsTo("assistant.threads.setStatus")); n != 2 {
		t.Errorf("%d statuses set before %v passed, want 2", n, statusRefresh)
	}
	s.clock.Advance(time.Second)
	s.ticks <- s.clock.Now()
	st = s.waitStatuses(t, 3)
	if len(st) != 3 || !slices.Equal(st[2].LoadingMessages, st[1].LoadingMessages) {
		t.Errorf("statuses %+v: want one refresh, once %v passed", st, statusRefresh)
	}

	s.status.TurnEnded(claudine)
	s.status.TurnEnded(elen)
	st = s.waitStatuses(t, 4)
	if last := st[len(st)-1]; last.Status != "" || last.LoadingMessages != nil {
		t.Errorf("status after the turns: %+v, want it cleared", last)
	}
}

// An error from the method turns the status off for that channel, logged
// once; other channels keep theirs.
func TestStatusOffAfterAnError(t *testing.T) {
	s := newStatusRig(t)
	s.fake.FailNext("assistant.threads.setStatus", fakeslack.Failure{Error: "not_allowed"})
	c1 := s.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "q"}).TS
	c2 := s.fake.SendMessage(fakeslack.Message{Channel: "C2", User: "U1", Text: "q"}).TS
	s.status.TurnStarted(agents.Work{Channel: "C1", ThreadTS: c1, TurnID: "t1", Agent: "Elen", Facilitator: true})
	if _, err := s.fake.WaitCalls(testContext(t), "assistant.threads.setStatus", 1); err != nil {
		t.Fatal(err)
	}
	s.status.TurnStarted(agents.Work{Channel: "C1", ThreadTS: c1, TurnID: "t2", Agent: "Claudine"})
	s.status.TurnStarted(agents.Work{Channel: "C2", ThreadTS: c2, TurnID: "t3", Agent: "Elen", Facilitator: true})
	s.waitStatuses(t, 2)
	for _, c := range s.fake.CallsTo("assistant.threads.setStatus")[1:] {
		if c.Form.Get("channel_id") == "C1" {
			t.Errorf("a status set in C1 after its error: %v", c.Form)
		}
	}
	if st := s.fake.Statuses(); len(st) != 1 || st[0].Channel != "C2" {
		t.Errorf("statuses %+v: want C2's only", st)
	}
	if n := strings.Count(s.logs.String(), "Slack refused a thread status"); n != 1 {
		t.Errorf("%d logs of the error, want 1", n)
	}
}

// A turn's status reaches Slack before the turn's post, however late the
// status call gets there: here it is held until a post has arrived (or
// for a quarter of statusWait), so a post that did not wait for it would
// come first.
func TestStatusComesBeforeTheTurnsPost(t *testing.T) {
	s := newStatusRig(t)
	thread := s.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "q"}).TS
	s.fake.Delay("assistant.threads.setStatus", func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, statusWait/4)
		defer cancel()
		_, _ = s.fake.WaitPosts(ctx, 1)
	})

	s.status.TurnStarted(agents.Work{Channel: "C1", ThreadTS: thread, TurnID: "t1", Agent: "Claudine"})
	if _, err := s.web.PostReply(testContext(t), agents.Reply{Channel: "C1", ThreadTS: thread, Text: "Covered.", Username: "Claudine"}); err != nil {
		t.Fatal(err)
	}
	st, posts := s.fake.Statuses(), s.fake.Posts()
	if len(st) != 1 || len(posts) != 1 {
		t.Fatalf("%d statuses, %d posts: want one of each", len(st), len(posts))
	}
	if st[0].Seq > posts[0].Seq {
		t.Errorf("Claudine asked (status %d) after her post (%d)", st[0].Seq, posts[0].Seq)
	}
}

// A setStatus that never answers delays a post in its thread by the
// bound only; a thread with no status asked does not wait at all.
func TestStatusDelaysAPostByTheBoundAtMost(t *testing.T) {
	s := newStatusRig(t)
	s.status.wait = 50 * time.Millisecond
	thread := s.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "q"}).TS
	other := s.fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "q"}).TS
	s.fake.FailNext("assistant.threads.setStatus", fakeslack.Failure{Hang: true})

	s.status.TurnStarted(agents.Work{Channel: "C1", ThreadTS: thread, TurnID: "t1", Agent: "Elen", Facilitator: true})
	if _, err := s.fake.WaitCalls(testContext(t), "assistant.threads.setStatus", 1); err != nil {
		t.Fatal(err)
	}
	for _, ts := range []string{other, thread} {
		if _, err := s.web.PostReply(testContext(t), agents.Reply{Channel: "C1", ThreadTS: ts, Text: "Thinking.", Username: "Elen"}); err != nil {
			t.Fatalf("post in %s: %v", ts, err)
		}
	}
	if posts := s.fake.Posts(); len(posts) != 2 || posts[0].ThreadTS != other || posts[1].ThreadTS != thread {
		t.Errorf("posts %+v: want one in each thread", posts)
	}
	if !strings.Contains(s.logs.String(), "posting before the thread status reached Slack") {
		t.Errorf("the post past the bound is not logged:\n%s", s.logs)
	}
}
