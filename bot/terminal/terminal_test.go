package terminal

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
)

// recorder is an Engine that keeps the events it is given; settledAfter
// says how many Settled calls answer false before one answers true.
type recorder struct {
	mu           sync.Mutex
	events       []agents.Event
	settledAfter int
	settleCalls  int
	fail         error
}

func (r *recorder) Record(_ context.Context, ev agents.Event) (agents.Ticket, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return agents.Ticket{}, r.fail
	}
	r.events = append(r.events, ev)
	return agents.Ticket{}, nil
}

func (r *recorder) Settled(context.Context, string, string, string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settleCalls++
	return r.settleCalls > r.settledAfter, nil
}

type buffer struct {
	mu sync.Mutex
	strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Builder.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Builder.String()
}

func newTest(wait bool) (*Terminal, *buffer, *buffer) {
	var out, status buffer
	clock := time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)
	return New(Options{Channel: "C1", Person: "Ada Lovelace", Out: &out, Status: &status, Wait: wait, Poll: time.Millisecond,
		Now: func() time.Time { return clock }}), &out, &status
}

func TestLinesBecomeMessagesOfOneThread(t *testing.T) {
	term, _, status := newTest(false)
	eng := &recorder{}
	in := "first\n\n  second  \n/end\n/new\nthird\n/help\n/frobnicate\n/quit\nnever read\n"
	if err := term.Run(context.Background(), strings.NewReader(in), eng); err != nil {
		t.Fatal(err)
	}
	if len(eng.events) != 4 {
		t.Fatalf("events = %+v, want 4 messages", eng.events)
	}
	root, second, end, third := eng.events[0], eng.events[1], eng.events[2], eng.events[3]
	if root.ThreadTS != "" || second.ThreadTS != root.TS || end.ThreadTS != root.TS || third.ThreadTS != "" {
		t.Errorf("threads: root %q, second in %q, end in %q, third in %q", root.ThreadTS, second.ThreadTS, end.ThreadTS, third.ThreadTS)
	}
	if second.Text != "second" || end.Text != ":end:" || end.Raw != ":end:" {
		t.Errorf("texts: %q, %q", second.Text, end.Text)
	}
	for i, ev := range eng.events {
		if ev.Team != Team || ev.Channel != "C1" || ev.Kind != agents.EventMessage || ev.UserName != "Ada Lovelace" || ev.UserID != "terminal-ada-lovelace" {
			t.Errorf("event %d = %+v", i, ev)
		}
		if i > 0 && ev.TS <= eng.events[i-1].TS {
			t.Errorf("ts %s is not after %s, though the clock stood still", ev.TS, eng.events[i-1].TS)
		}
	}
	if !term.Owns(agents.ConversationID(Team, "C1", root.TS)) || !term.Owns(agents.ConversationID(Team, "C1", third.TS)) ||
		term.Owns(agents.ConversationID(Team, "C1", second.TS)) {
		t.Error("Owns does not name exactly the threads started here")
	}
	for _, want := range []string{Help, "unknown command /frobnicate", "new thread"} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	if eng.settleCalls != 0 {
		t.Errorf("interactive mode waited for the agents %d times", eng.settleCalls)
	}
}

func TestScriptedWaitsForTheAgents(t *testing.T) {
	term, _, _ := newTest(true)
	eng := &recorder{settledAfter: 3}
	if err := term.Run(context.Background(), strings.NewReader("one\ntwo\n"), eng); err != nil {
		t.Fatal(err)
	}
	if len(eng.events) != 2 || eng.settleCalls != 5 {
		t.Errorf("%d events, %d Settled calls; want 2 and 5 (3 unsettled answers, then one settled per line)", len(eng.events), eng.settleCalls)
	}
}

func TestScriptedBadInput(t *testing.T) {
	tests := []struct {
		name string
		in   string
		fail error
		want string
	}{
		{"unknown command", "hello\n/nope x\n", nil, "line 2: unknown command /nope"},
		{"store down", "hello\n", errors.New("redis: connection refused"), "record line 1: redis: connection refused"},
		{"line over 1 MiB", strings.Repeat("x", 2<<20) + "\n", nil, "read input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			term, _, _ := newTest(true)
			err := term.Run(context.Background(), strings.NewReader(tt.in), &recorder{fail: tt.fail})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one holding %q", err, tt.want)
			}
		})
	}
}

func TestPostsPrintAsNameAndText(t *testing.T) {
	term, out, status := newTest(false)
	ctx := context.Background()
	if err := term.Run(ctx, strings.NewReader("question\n"), &recorder{}); err != nil {
		t.Fatal(err)
	}
	thread := term.thread
	ts, err := term.PostReply(ctx, agents.Reply{Channel: "C1", ThreadTS: thread, Username: "Elen", Text: "  Line one.\nLine two.\n", TurnID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := term.FindPost(ctx, "C1", thread, "t1"); len(got) != 1 || len(ts) != 1 || got[0] != ts[0] {
		t.Errorf("FindPost(t1) = %q; want %q", got, ts)
	}
	if got, _ := term.FindPost(ctx, "C1", thread, "t2"); len(got) != 0 {
		t.Error("FindPost found a post never made")
	}
	if _, err := term.PostReply(ctx, agents.Reply{Channel: "C1", ThreadTS: "1.000001", Username: "Elen", Text: "Late."}); err != nil {
		t.Fatal(err)
	}
	if _, err := term.PostReply(ctx, agents.Reply{Channel: "C1", ThreadTS: thread, Username: "Elen", Text: " \n"}); err == nil {
		t.Error("an empty reply was posted")
	}
	if err := term.PostEphemeral(ctx, "C1", "U1", "zed.eth is not an agent of this channel"); err != nil {
		t.Fatal(err)
	}
	_ = term.AddReaction(ctx, "C1", thread, "hourglass_flowing_sand")
	_ = term.AddReaction(ctx, "C1", thread, "white_check_mark")
	want := "Elen: Line one.\nLine two.\n(in an earlier thread) Elen: Late.\n(only you see this) zed.eth is not an agent of this channel\n"
	if out.String() != want {
		t.Errorf("out:\n%s\nwant:\n%s", out, want)
	}
	if s := status.String(); strings.Contains(s, "hourglass") || !strings.Contains(s, "✅") {
		t.Errorf("status = %q, want only the conclusion", s)
	}
}

// answeringModel answers every request with its agent's name.
type answeringModel struct{}

func (answeringModel) Profile(name string) (llm.Profile, error) { return llm.Profile{Name: name}, nil }

func (answeringModel) Complete(_ context.Context, r llm.Request) (llm.Response, error) {
	return llm.Response{Content: "answer of " + r.Agent}, nil
}

func TestWorkingSaysWhoThinks(t *testing.T) {
	var status buffer
	term := New(Options{Channel: "C1", Out: io.Discard, Status: &status,
		Names: func(_ context.Context, ens string) string { return map[string]string{"elen.x.eth": "Elen"}[ens] }})
	m := term.Working(answeringModel{})
	resp, err := m.Complete(context.Background(), llm.Request{Agent: "elen.x.eth"})
	if err != nil || resp.Content != "answer of elen.x.eth" {
		t.Errorf("Complete = %+v, %v; want the model's answer", resp, err)
	}
	if status.String() != "… Elen is thinking\n" {
		t.Errorf("status = %q", status.String())
	}
	if p, err := m.Profile("cheap"); err != nil || p.Name != "cheap" {
		t.Errorf("Profile = %+v, %v", p, err)
	}
	// Without Names, the ENS name's first label.
	var plain buffer
	if _, err := New(Options{Channel: "C1", Out: io.Discard, Status: &plain}).Working(answeringModel{}).Complete(
		context.Background(), llm.Request{Agent: "cora.acme.eth"}); err != nil {
		t.Fatal(err)
	}
	if plain.String() != "… cora is thinking\n" {
		t.Errorf("status = %q", plain.String())
	}
}

// Say speaks as anyone, in a new thread or the current one, and waits.
func TestSayAsSeveralPeople(t *testing.T) {
	term, _, _ := newTest(false)
	eng := &recorder{settledAfter: 1}
	ctx := context.Background()
	steps := []struct {
		person, text string
		newThread    bool
	}{{"Bea", "first", true}, {"", "second", false}, {"Arnaud Petit", "third", true}}
	for _, s := range steps {
		if err := term.Say(ctx, eng, s.person, s.text, s.newThread); err != nil {
			t.Fatal(err)
		}
	}
	if len(eng.events) != 3 || eng.settleCalls != 4 {
		t.Fatalf("%d events, %d Settled calls; want 3 and 4 (each line waited)", len(eng.events), eng.settleCalls)
	}
	first, second, third := eng.events[0], eng.events[1], eng.events[2]
	if first.ThreadTS != "" || second.ThreadTS != first.TS || third.ThreadTS != "" {
		t.Errorf("threads: %q, %q (want %q), %q", first.ThreadTS, second.ThreadTS, first.TS, third.ThreadTS)
	}
	if first.UserName != "Bea" || first.UserID != "terminal-bea" || second.UserName != "Ada Lovelace" ||
		third.UserID != UserID("Arnaud Petit") || third.UserID != "terminal-arnaud-petit" {
		t.Errorf("authors: %+v", eng.events)
	}
	if !term.Owns(agents.ConversationID(Team, "C1", third.TS)) {
		t.Error("a thread started by Say is not owned")
	}
	if err := term.Say(ctx, &recorder{fail: errors.New("store down")}, "Bea", "x", false); err == nil || err.Error() != "terminal: record: store down" {
		t.Errorf("err = %v", err)
	}
}

// TestNoticesAreCounted: the ⚠️ notices printed are counted, replies are
// not.
func TestNoticesAreCounted(t *testing.T) {
	term, out, _ := newTest(false)
	ctx := context.Background()
	for _, r := range []agents.Reply{
		{Channel: "C1", Username: "Elen", Text: "An answer."},
		{Channel: "C1", Username: "Elen", Text: "⚠️ Elen could not answer: the model endpoint could not be reached (ref t1)", Notice: true},
		{Channel: "C1", Username: "Claudine", Text: "⚠️ Claudine could not answer: timeout (ref t2)", Notice: true},
	} {
		if _, err := term.PostReply(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if n := term.Notices(); n != 2 {
		t.Errorf("Notices() = %d, want 2\n%s", n, out)
	}
}

// TestTraceCommand: /trace asks for the current thread's conversation and
// prints its id and the answer on the status output; /trace all asks for
// every turn; before any line, or when the trace cannot be read, it says
// so; without Options.Trace it is unknown.
func TestTraceCommand(t *testing.T) {
	var out, status buffer
	var asked []string
	var all []bool
	term := New(Options{Channel: "C1", Out: &out, Status: &status, Now: time.Now,
		Trace: func(_ context.Context, w io.Writer, conv string, every bool) error {
			asked, all = append(asked, conv), append(all, every)
			if len(asked) > 1 {
				return errors.New("no traces kept")
			}
			_, err := io.WriteString(w, "turn t1  elen (facilitator)  default  ok\n")
			return err
		}})
	eng := &recorder{}
	if err := term.Run(context.Background(), strings.NewReader("/trace\nhello\n/trace\n/trace all\n"), eng); err != nil {
		t.Fatal(err)
	}
	if len(eng.events) != 1 {
		t.Fatalf("events = %+v: /trace is no message", eng.events)
	}
	want := agents.ConversationID(Team, "C1", eng.events[0].TS)
	if len(asked) != 2 || asked[0] != want || asked[1] != want {
		t.Errorf("asked for %q, want %s twice", asked, want)
	}
	if len(all) != 2 || all[0] || !all[1] {
		t.Errorf("every turn asked = %v, want [false true] (/trace, then /trace all)", all)
	}
	for _, w := range []string{"(no turn yet in this thread)", "conversation " + want, "turn t1  elen (facilitator)  default  ok", "(no trace: no traces kept)"} {
		if !strings.Contains(status.String(), w) {
			t.Errorf("status lacks %q:\n%s", w, status.String())
		}
	}
	if out.String() != "" {
		t.Errorf("/trace wrote to the transcript: %q", out.String())
	}
	plain, _, plainStatus := newTest(false)
	if err := plain.Run(context.Background(), strings.NewReader("/trace\n"), &recorder{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plainStatus.String(), "unknown command /trace") {
		t.Errorf("without Options.Trace: %q", plainStatus.String())
	}
}
