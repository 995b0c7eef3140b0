package main

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

// slackAckTimeout is how long Slack waits for an acknowledgement before it
// delivers an envelope again.
const slackAckTimeout = 3 * time.Second

// outage is `conclave run` on a Redis reached through a proxy, with one
// conversation already answered.
type outage struct {
	r     *rig
	p     *process
	proxy *redistest.Proxy
	root  fakeslack.Delivery
}

// startOutage starts conclave on Redis behind a proxy, against a fake
// Slack that delivers unacknowledged envelopes again after Slack's 3 s,
// and has it answer the first message of a thread.
func startOutage(t *testing.T) outage {
	t.Helper()
	proxy, db := redistest.NewProxy(t, redistest.New(t))
	r := newRig(t, fakeslack.Options{EchoPosts: true, AckTimeout: slackAckTimeout})
	r.llm.Handle(echoLatest)
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)), nil)
	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "thread 0 message 0"})
	if err := waitReply(waitCtx(t), r.slack, root.TS, "answer to thread 0 message 0"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	return outage{r: r, p: p, proxy: proxy, root: root}
}

// send writes a message: the first of a new thread when root is nil, else
// a reply in root's thread.
func (o outage) send(root *fakeslack.Delivery, text string) fakeslack.Delivery {
	m := fakeslack.Message{Channel: testChannel, User: testPerson, Text: text}
	if root != nil {
		m.ThreadTS = root.TS
	}
	return o.r.slack.SendMessage(m)
}

// checkAnsweredOnce checks that the posts are the answers to messages, in
// order, each once, and that the model was asked once per message.
func (o outage) checkAnsweredOnce(t *testing.T, messages ...string) {
	t.Helper()
	var want []string
	for _, m := range messages {
		want = append(want, "answer to "+m)
	}
	if got := postTexts(o.r.slack); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("posts = %q, want %q\n%s", got, want, o.p.logs)
	}
	if n := len(o.r.llm.Requests()); n != len(messages) {
		t.Errorf("model called %d times, want %d", n, len(messages))
	}
}

// deliveriesOf lists the deliveries of one event so far.
func deliveriesOf(s *fakeslack.Server, key string) []fakeslack.Sent {
	var out []fakeslack.Sent
	for _, d := range s.Deliveries() {
		if d.Key == key {
			out = append(out, d)
		}
	}
	return out
}

// The message that arrives during an outage starts a thread of its own:
// the first thread's turn may still be writing its last state when Redis
// goes away, and would then hold its thread until its lock lapses.

// TestShortRedisOutageIsRiddenOut stops Redis for 1 s while a message
// arrives: its record is tried until Redis answers, and the message is
// acknowledged on its first delivery (1 s before the 2 s window ends) and
// answered, without waiting for Slack's redelivery.
func TestShortRedisOutageIsRiddenOut(t *testing.T) {
	o := startOutage(t)
	ctx := waitCtx(t)

	o.proxy.Down()
	back := time.Now().Add(time.Second)
	during := o.send(nil, "thread 1 message 0")
	time.Sleep(time.Until(back)) // the outage lasts 1 s, whatever conclave does meanwhile
	if n := ackCount(o.r.slack, during.Key()); n != 0 {
		t.Fatalf("acknowledged %d times while Redis was down", n)
	}
	o.proxy.Up()

	ack, err := o.r.slack.WaitAck(ctx, during.Key())
	if err != nil {
		t.Fatalf("not acknowledged: %v\n%s", err, o.p.logs)
	}
	if ack.RetryAttempt != 0 {
		t.Errorf("acknowledged delivery attempt %d, want the first (0): the message waited for a redelivery\n%s", ack.RetryAttempt, o.p.logs)
	}
	if err := waitReply(ctx, o.r.slack, during.TS, "answer to thread 1 message 0"); err != nil {
		t.Fatalf("%v\n%s", err, o.p.logs)
	}
	o.send(&during, "thread 1 message 1")
	if err := waitReply(ctx, o.r.slack, during.TS, "answer to thread 1 message 1"); err != nil {
		t.Fatalf("%v\n%s", err, o.p.logs)
	}
	if d := deliveriesOf(o.r.slack, during.Key()); len(d) != 1 {
		t.Errorf("message delivered %d times, want once: %+v", len(d), d)
	}
	o.checkAnsweredOnce(t, "thread 0 message 0", "thread 1 message 0", "thread 1 message 1")
}

// TestLongRedisOutageRunsOnceRecorded keeps Redis down past the window:
// the message is left unacknowledged, its record is tried on and runs once
// Redis is back, and its redelivery is recorded (and acknowledged) once:
// it is answered once.
func TestLongRedisOutageRunsOnceRecorded(t *testing.T) {
	o := startOutage(t)
	ctx := waitCtx(t)

	o.proxy.Down()
	during := o.send(nil, "thread 1 message 0")
	// Slack delivers it again 3 s after a delivery without an ack; Redis
	// is still down then.
	if _, err := o.r.slack.WaitDeliveries(ctx, during.Key(), 2); err != nil {
		t.Fatal(err)
	}
	if n := ackCount(o.r.slack, during.Key()); n != 0 {
		t.Fatalf("acknowledged %d times while Redis was down", n)
	}
	o.proxy.Up()

	ack, err := o.r.slack.WaitAck(ctx, during.Key())
	if err != nil {
		t.Fatalf("not acknowledged after Redis came back: %v\n%s", err, o.p.logs)
	}
	if ack.RetryAttempt == 0 {
		t.Errorf("the first delivery was acknowledged, past the window\n%s", o.p.logs)
	}
	if err := waitReply(ctx, o.r.slack, during.TS, "answer to thread 1 message 0"); err != nil {
		t.Fatalf("%v\n%s", err, o.p.logs)
	}
	o.send(&during, "thread 1 message 1")
	if err := waitReply(ctx, o.r.slack, during.TS, "answer to thread 1 message 1"); err != nil {
		t.Fatalf("%v\n%s", err, o.p.logs)
	}
	if !strings.Contains(o.p.logs.String(), "event not recorded; left unacknowledged") {
		t.Errorf("the first delivery was not given up\n%s", o.p.logs)
	}
	o.checkAnsweredOnce(t, "thread 0 message 0", "thread 1 message 0", "thread 1 message 1")
}

// TestRedisDownUnderTrafficCostsSeconds stops Redis for 4 s while new
// threads keep arriving (one every 400 ms, from 1 s before the outage to
// 1 s after it): a message whose record did not land within the ack window
// is left unacknowledged, but its record is tried on and it runs as soon
// as Redis answers, so every message is answered exactly once without
// waiting for Slack's redelivery, which is recorded once. The latencies
// are logged (the slowest is SPEC §14.6's measure, under 10 s); speed is
// not asserted here.
func TestRedisDownUnderTrafficCostsSeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps Redis down for 4 s")
	}
	o := startOutage(t)
	const (
		every   = 400 * time.Millisecond
		before  = 1 * time.Second
		outage  = 4 * time.Second
		after   = 1 * time.Second
		threads = int((before + outage + after) / every)
	)
	type sent struct {
		d    fakeslack.Delivery
		text string
		at   time.Time
	}
	var all []sent
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	down, up := false, false
	for i := 1; i <= threads; i++ {
		// The traffic's pace and the outage's length are wall-clock by
		// nature: Redis is down for 4 s of real time.
		<-tick.C
		switch since := time.Since(start); {
		case !down && since >= before:
			o.proxy.Down()
			down = true
		case down && !up && since >= before+outage:
			o.proxy.Up()
			up = true
		}
		text := fmt.Sprintf("thread %d message 0", i)
		all = append(all, sent{d: o.send(nil, text), text: text, at: time.Now()})
	}
	if !up {
		o.proxy.Up()
	}

	ctx := waitCtx(t)
	texts := []string{"thread 0 message 0"}
	var slowest time.Duration
	for _, s := range all {
		texts = append(texts, s.text)
		if err := waitReply(ctx, o.r.slack, s.d.TS, "answer to "+s.text); err != nil {
			t.Fatalf("%v\n%s", err, o.p.logs)
		}
		for _, p := range o.r.slack.Posts() {
			if p.ThreadTS == s.d.TS {
				slowest = max(slowest, p.At.Sub(s.at))
			}
		}
	}
	t.Logf("%d messages, Redis down %v: the slowest answer took %v", len(all), outage, slowest.Round(10*time.Millisecond))

	// Each redelivery is recorded once: no message is answered twice, the
	// model is asked once per message (checked once nothing is pending).
	for _, s := range all {
		if _, err := o.r.slack.WaitAck(ctx, s.d.Key()); err != nil {
			t.Fatalf("%s never acknowledged: %v\n%s", s.text, err, o.p.logs)
		}
	}
	got := postTexts(o.r.slack)
	sort.Strings(got)
	var want []string
	for _, m := range texts {
		want = append(want, "answer to "+m)
	}
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("posts = %q, want each message answered once: %q\n%s", got, want, o.p.logs)
	}
	if n := len(o.r.llm.Requests()); n != len(texts) {
		t.Errorf("model called %d times, want %d", n, len(texts))
	}
	if !strings.Contains(o.p.logs.String(), "event recorded after its acknowledgement window") {
		t.Errorf("no message outlived its window: the outage did not test the tries past it\n%s", o.p.logs)
	}
}
