package agents_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/templates"
)

// TestTurnSpansLinkToTheirEventAcrossReplicas: one engine records a
// message received under a span; another, on the same Redis, runs the
// turn: its conclave.turn span starts a trace of its own, links to the
// event's span, and holds the turn's chat span.
func TestTurnSpansLinkToTheirEventAcrossReplicas(t *testing.T) {
	r := newRig(t, withRedis)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")
	other := r.engine(fakePrompts{}, func(d *agents.Deps) { d.Tracer = tracer })
	r.model.on(elen, templates.PromptDefault, "Hello, Ada.")

	ctx, event := tracer.Start(context.Background(), "slack.event")
	ev := agents.Event{ID: "Ev1", Kind: agents.EventMessage, Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Ada",
		Raw: "hello", Text: "hello", At: r.clock.Now(), Trace: agents.Traceparent(ctx)}
	if _, err := r.e.Record(ctx, ev); err != nil { // recorded by the first replica, not dispatched
		t.Fatal(err)
	}
	event.End()
	settleEngines(t, r.store, r.clock, other) // run by the second

	var turn sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "conclave.turn" {
			turn = s
		}
	}
	if turn == nil {
		t.Fatalf("no conclave.turn span among %d", len(spans.Ended()))
	}
	want := event.SpanContext()
	if links := turn.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != want.TraceID() || links[0].SpanContext.SpanID() != want.SpanID() {
		t.Errorf("links = %+v, want the event's span %s", turn.Links(), want.SpanID())
	}
	if turn.SpanContext().TraceID() == want.TraceID() || turn.Parent().IsValid() {
		t.Error("the turn's span is not the root of a trace of its own")
	}
	var chats int
	for _, s := range spans.Ended() {
		if s.Name() == "chat" && s.Parent().SpanID() == turn.SpanContext().SpanID() {
			chats++
		}
	}
	if chats != 1 {
		t.Errorf("%d chat spans under the turn, want 1", chats)
	}
}
