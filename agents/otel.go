package agents

import (
	"cmp"
	"context"
	"time"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/internal/clip"
	"github.com/conclavehq/conclave/memory"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of conclave's spans; those of model and tool calls follow
// OpenTelemetry's GenAI semantic conventions.
const (
	attrConversation = attribute.Key("conclave.conversation")
	attrTurn         = attribute.Key("conclave.turn")
	attrAgent        = attribute.Key("conclave.agent")
	attrRole         = attribute.Key("conclave.role")
	attrPhase        = attribute.Key("conclave.phase")
	attrOutcome      = attribute.Key("conclave.outcome")
	attrNotice       = attribute.Key("conclave.notice")
	attrChannel      = attribute.Key("conclave.channel")
	attrThread       = attribute.Key("conclave.thread_ts")
	attrCommit       = attribute.Key("conclave.prompts.commit")

	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrResponseModel = attribute.Key("gen_ai.response.model")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrFinish        = attribute.Key("gen_ai.response.finish_reasons")
	attrAgentName     = attribute.Key("gen_ai.agent.name")
	attrInput         = attribute.Key("gen_ai.input.messages")
	attrOutput        = attribute.Key("gen_ai.output.messages")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolArgs      = attribute.Key("gen_ai.tool.call.arguments")
	attrToolResult    = attribute.Key("gen_ai.tool.call.result")
	attrErrorType     = attribute.Key("error.type")
)

// The provider every model endpoint is spoken to as (OpenAI-compatible).
const genAIProvider = "openai"

// emitSpans sends a finished turn's spans to Deps.Tracer, at the times
// its steps happened: conclave.turn, the root of a trace of its own linked
// to the span of the event that woke it (which may have been received by
// another replica), and under it one `chat <model>` span per model call,
// one `execute_tool <name>` span per tool call and one slack.post span
// per post. Prompt and reply text only with Deps.CaptureContent.
func (c turnTracer) emitSpans(tr *Trace, msgs []memory.Message) {
	opts := []trace.SpanStartOption{
		trace.WithNewRoot(), trace.WithTimestamp(tr.Started), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attrConversation.String(tr.Conversation), attrTurn.String(tr.TurnID), attrAgent.String(tr.Agent),
			attrRole.String(tr.Role), attrPhase.String(tr.Phase), attrOutcome.String(tr.Outcome),
			attrChannel.String(tr.Channel), attrThread.String(tr.ThreadTS),
		),
	}
	if link := eventSpan(msgs); link.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: link}))
	}
	ctx, root := c.deps.Tracer.Start(context.Background(), "conclave.turn", opts...)
	if tr.Notice != "" {
		root.SetAttributes(attrNotice.String(tr.Notice))
	}
	if tr.PromptsCommit != "" {
		root.SetAttributes(attrCommit.String(tr.PromptsCommit))
	}
	if tr.Outcome == "failed" {
		root.SetStatus(codes.Error, cmp.Or(tr.Notice, "failed"))
	}
	for _, call := range tr.Calls {
		c.chatSpan(ctx, tr, call)
	}
	for _, tl := range tr.Tools {
		attrs := []attribute.KeyValue{attrOperation.String("execute_tool"), attrToolName.String(tl.Name), attrOutcome.String(tl.Outcome)}
		if c.deps.CaptureContent {
			attrs = append(attrs, contentAttr(attrToolArgs, tl.Arguments), contentAttr(attrToolResult, tl.Result))
		}
		_, s := c.deps.Tracer.Start(ctx, "execute_tool "+tl.Name, trace.WithTimestamp(tl.Started), trace.WithAttributes(attrs...))
		if tl.Outcome != turn.ToolOK {
			s.SetStatus(codes.Error, tl.Outcome)
			s.SetAttributes(attrErrorType.String(tl.Outcome))
		}
		s.End(trace.WithTimestamp(tl.Started.Add(time.Duration(tl.DurationMS) * time.Millisecond)))
	}
	for _, p := range tr.Posts {
		_, s := c.deps.Tracer.Start(ctx, "slack.post", trace.WithTimestamp(p.Began), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attrChannel.String(tr.Channel), attrThread.String(tr.ThreadTS)))
		s.End(trace.WithTimestamp(p.Began.Add(p.Took)))
	}
	root.End(trace.WithTimestamp(tr.Started.Add(time.Duration(tr.Timings.TotalMS) * time.Millisecond)))
}

// maxAttrBytes bounds a content attribute of a span (a prompt, a reply,
// a tool's arguments or result): a collector is no archive, and the
// stored trace holds the whole.
const maxAttrBytes = 16 << 10

// contentAttr is a content attribute, cut at maxAttrBytes with a mark.
func contentAttr(k attribute.Key, v string) attribute.KeyValue {
	return k.String(clip.Bytes(v, maxAttrBytes, " …[cut]"))
}

// chatSpan is one model call's span.
func (c turnTracer) chatSpan(ctx context.Context, tr *Trace, call TraceCall) {
	attrs := []attribute.KeyValue{
		attrOperation.String("chat"), attrProvider.String(genAIProvider), attrRequestModel.String(call.Model),
		attrAgentName.String(tr.Agent),
	}
	if r := call.Response; r != nil {
		attrs = append(attrs, attrResponseModel.String(r.Model),
			attrInputTokens.Int(r.PromptTokens), attrOutputTokens.Int(r.CompletionTokens),
			attrFinish.StringSlice([]string{r.FinishReason}))
		if c.deps.CaptureContent {
			attrs = append(attrs, contentAttr(attrOutput, r.Content))
		}
	}
	if c.deps.CaptureContent {
		attrs = append(attrs, contentAttr(attrInput, string(call.Request)))
	}
	name := "chat"
	if call.Model != "" {
		name += " " + call.Model // GenAI's span name: operation, then model
	}
	_, s := c.deps.Tracer.Start(ctx, name, trace.WithTimestamp(call.Started),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if call.Error != "" {
		s.SetStatus(codes.Error, call.Error)
		s.SetAttributes(attrErrorType.String(call.Error))
	}
	s.End(trace.WithTimestamp(call.Started.Add(time.Duration(call.DurationMS) * time.Millisecond)))
}

// eventSpan is the span of the newest message of the thread received
// with one: the event that woke the turn.
func eventSpan(msgs []memory.Message) trace.SpanContext {
	for i := len(msgs) - 1; i >= 0; i-- {
		if tp := msgs[i].Trace; tp != "" {
			return SpanContextOf(tp)
		}
	}
	return trace.SpanContext{}
}

// SpanContextOf reads a W3C traceparent (invalid when it is not one).
func SpanContextOf(traceparent string) trace.SpanContext {
	carrier := propagation.MapCarrier{"traceparent": traceparent}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// Traceparent is the W3C traceparent of the span in ctx ("" when none).
func Traceparent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier["traceparent"]
}
