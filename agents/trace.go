package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/memory"
)

// TraceLog reads the turn traces the commits wrote and records feedback
// on them (memory's stores implement it).
type TraceLog interface {
	// Traces reads a conversation's traces and their feedback; none reads
	// as empty.
	Traces(ctx context.Context, convID string) (memory.Traces, error)
	// TraceRef finds the conversation of a thread (memory.ErrNotFound
	// when it has no traces).
	TraceRef(ctx context.Context, channel, threadTS string) (string, error)
	// RecordFeedback records a person's rating of a turn, replacing that
	// person's earlier one.
	RecordFeedback(ctx context.Context, convID string, f memory.Feedback) error
}

// The trace types live in agents/turn, which fills them; these are
// their engine names.
type (
	Trace         = turn.Trace
	TracePrompt   = turn.TracePrompt
	TraceCall     = turn.TraceCall
	TraceResponse = turn.TraceResponse
	TraceToolCall = turn.TraceToolCall
	TraceTool     = turn.TraceTool
	TraceTimings  = turn.TraceTimings
)

// turnTracer finishes the turns' traces: a finished one's record and
// spans.
type turnTracer struct {
	opts *Options
	deps tracePorts
	log  *slog.Logger
}

// tracePorts are the engine's ports the tracer uses, each on its own.
type tracePorts struct {
	Tracer         trace.Tracer
	CaptureContent bool
}

// finishTrace completes a turn's trace from its report and the messages
// it posted and encodes it with the secrets masked, for the step's next
// commit; false when it is not kept.
func (c turnTracer) finishTrace(t *turn.Turn, msgs []memory.Message, log *slog.Logger) (memory.TurnTrace, bool) {
	tr := t.Trace
	if tr == nil {
		return memory.TurnTrace{}, false
	}
	r := t.Report
	tr.Phase, tr.Outcome = r.Phase, r.Outcome
	tr.Timings.QueuedMS = r.Wait.Milliseconds()
	tr.Timings.TotalMS = r.Duration.Milliseconds()
	tr.InputTokens, tr.OutputTokens, tr.CostUSD = usageTotals(r.Usage)
	for _, m := range msgs {
		if m.TurnID == t.ID || strings.HasPrefix(m.TurnID, t.ID+"-") {
			tr.Posted = append(tr.Posted, m.TS)
		}
	}
	if c.deps.Tracer == nil && !c.opts.Traces {
		return memory.TurnTrace{}, false
	}
	body, err := json.Marshal(tr)
	if err != nil {
		log.Warn("encode a turn's trace", slog.String(logTurn, t.ID), slog.Any(logError, err))
		return memory.TurnTrace{}, false
	}
	body = c.opts.Mask.Bytes(body)
	var m *Trace
	if c.deps.Tracer != nil {
		m = masked(tr, body)
		c.emitSpans(m, msgs)
	}
	if !c.opts.Traces {
		return memory.TurnTrace{}, false
	}
	if limit := c.opts.TraceEntryMaxBytes; limit > 0 && len(body) > limit {
		if m == nil {
			m = masked(tr, body)
		}
		if body, err = capTraceEntry(m, limit); err != nil {
			log.Warn("encode a turn's trace", slog.String(logTurn, t.ID), slog.Any(logError, err))
			return memory.TurnTrace{}, false
		}
	}
	return memory.TurnTrace{TurnID: t.ID, Body: body}, true
}

// masked is the trace the spans are built from: tr as its masked
// encoding body decodes, so that no span carries what the stored trace
// does not (the posts' timings, not encoded, are tr's).
func masked(tr *Trace, body []byte) *Trace {
	var m Trace
	if err := json.Unmarshal(body, &m); err != nil {
		// The masks replace text inside JSON strings with text that needs
		// no escaping, so body stays valid; were it not, no content goes.
		m = Trace{Conversation: tr.Conversation, TurnID: tr.TurnID, Agent: tr.Agent, Role: tr.Role, Phase: tr.Phase,
			Outcome: tr.Outcome, Channel: tr.Channel, ThreadTS: tr.ThreadTS, Started: tr.Started, Timings: tr.Timings}
	}
	m.Posts = tr.Posts
	return &m
}

// ReadTraces reads a conversation's traces, oldest first, each with its
// feedback. A trace that cannot be decoded is an error naming its turn.
func ReadTraces(ctx context.Context, log TraceLog, convID string) ([]Trace, error) {
	kept, err := log.Traces(ctx, convID)
	if err != nil {
		return nil, err
	}
	out := make([]Trace, 0, len(kept.Turns))
	for _, k := range kept.Turns {
		var tr Trace
		if err := json.Unmarshal(k.Body, &tr); err != nil {
			return nil, fmt.Errorf("agents: trace of turn %s: %w", k.TurnID, err)
		}
		for _, f := range kept.Feedback {
			if f.TurnID == tr.TurnID {
				tr.Feedback = append(tr.Feedback, turn.Feedback(f))
			}
		}
		out = append(out, tr)
	}
	return out, nil
}
