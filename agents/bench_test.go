package agents_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// BenchmarkConversation measures one whole conversation on the in-process
// store: a person's message, the facilitator calling an expert, threading,
// the answer and the facilitator's second turn.
func BenchmarkConversation(b *testing.B) {
	r := newRig(b)
	n := 0
	began := processCPU(b)
	for b.Loop() {
		r.model.on(elen, "default", cora+" please check claim C1.", "Done.")
		r.model.on(cora, "context-not-found", threading("C1", ""))
		r.send("", "U1", "Alice", "Is claim C1 covered?")
		r.settle()
		n++
	}
	// Three turns a conversation: the facilitator, the expert, the
	// facilitator again.
	b.ReportMetric(float64(processCPU(b)-began)/float64(time.Millisecond)/float64(3*n), "cpu-ms/turn")
}

// processCPU is the CPU time the test process used so far (user and
// system), the rig's fakes included.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// notRecorder hides a store's memory.Recorder: Record then looks up and
// records in two calls, as it does on stores that are no Recorder.
type notRecorder struct{ storePorts }

// BenchmarkRecord records a person's reply in a known thread, as the
// transport has the engine do before each ack: one store round trip
// (the store a memory.Recorder) or two.
func BenchmarkRecord(b *testing.B) {
	for _, store := range []struct {
		name string
		rig  []func(*rig)
	}{{"in-process", nil}, {"redis", []func(*rig){withRedis}}} {
		for _, way := range []struct {
			name string
			wrap func(storePorts) storePorts
		}{
			{"one-round-trip", func(s storePorts) storePorts { return s }},
			{"two-round-trips", func(s storePorts) storePorts { return notRecorder{s} }},
		} {
			b.Run(store.name+"/"+way.name, func(b *testing.B) {
				r := newRig(b, store.rig...)
				e := r.engine(fakePrompts{}, onStore(way.wrap(r.store)))
				ctx := context.Background()
				root := agents.Event{ID: "Ev0", Kind: agents.EventMessage, Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Alice", Text: "hello", Raw: "hello"}
				if _, err := e.Record(ctx, root); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					ev := agents.Event{ID: fmt.Sprintf("Ev%d", i+1), Kind: agents.EventMessage, Team: team, Channel: chanA, TS: r.nextTS(), ThreadTS: root.TS,
						UserID: "U1", UserName: "Alice", Text: "one more thing", Raw: "one more thing"}
					if t, err := e.Record(ctx, ev); err != nil || !t.Dispatches() {
						b.Fatalf("Record = %v, %v; want the reply recorded", t, err)
					}
				}
			})
		}
	}
}

// BenchmarkBuildRequest builds an expert's context-found request with the
// built-in templates and fixture, its thread 40 messages long.
func BenchmarkBuildRequest(b *testing.B) {
	lib, err := templates.Open("", templates.Options{Clock: func() time.Time { return time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		b.Fatal(err)
	}
	f := templates.BuiltinFixture()
	self, ok := f.Data.ChannelMembers[0].AgentInfo()
	if !ok {
		b.Fatal("the fixture's first member is not an agent")
	}
	a := ens.Agent{Name: self.Name, EnsDomain: self.EnsDomain, Role: ens.RoleExpert, Attributes: self.Attributes}
	p := agents.FixturePrompt(a, templates.PromptContextFound, f)
	for len(p.History) < 40 {
		p.History = append(p.History, p.History...)
	}
	p.History = p.History[:40]
	prompts, profiles := lib.Current(), newFakeModel()
	b.ReportAllocs()
	for b.Loop() {
		req, _, err := agents.BuildRequest(prompts, profiles, p)
		if err != nil || len(req.Messages) < 3 {
			b.Fatalf("request of %d messages, %v", len(req.Messages), err)
		}
	}
}
