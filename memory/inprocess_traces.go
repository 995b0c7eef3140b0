package memory

import (
	"container/list"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// inTraces is the part of the in-process store that keeps turn traces
// and feedback. It is guarded by the store's mutex, which a commit holds
// while it adds traces.
type inTraces struct {
	mu        *sync.Mutex // the store's
	clock     func() time.Time
	retention time.Duration
	maxBytes  int
	totalMax  int                    // over all conversations
	total     int                    // bytes held by traces, expired ones included until swept
	traces    map[string]*inTrace    // conversation → traces
	order     *list.List             // conversations with traces, the least recently traced first
	feedback  map[string]*inFeedback // conversation → feedback
	refs      map[string]inRef       // channel + thread → conversation
}

type inTrace struct {
	entries [][]byte
	bytes   int
	place   *list.Element // in order
	expires time.Time
}

type inFeedback struct {
	byTurnUser map[string]Feedback
	expires    time.Time
}

type inRef struct {
	conv    string
	expires time.Time
}

func newInTraces(mu *sync.Mutex, clock func() time.Time, o Options) inTraces {
	return inTraces{
		mu: mu, clock: clock, retention: o.TraceRetention, maxBytes: o.TraceMaxBytes, totalMax: o.TraceTotalMaxBytes,
		traces: map[string]*inTrace{}, order: list.New(), feedback: map[string]*inFeedback{}, refs: map[string]inRef{},
	}
}

func refKey(channel, threadTS string) string { return channel + "/" + threadTS }

// addTraces adds a commit's traces; callers hold mu.
func (p *inTraces) addTraces(conv Conversation, entries [][]byte, now time.Time) {
	if len(entries) == 0 {
		return
	}
	tr := p.traces[conv.ID]
	if tr == nil || !now.Before(tr.expires) {
		p.dropTraces(conv.ID)
		tr = &inTrace{place: p.order.PushBack(conv.ID)}
		p.traces[conv.ID] = tr
	}
	p.order.MoveToBack(tr.place)
	p.total -= tr.bytes
	for _, e := range entries {
		tr.entries = append(tr.entries, e)
		tr.bytes += len(e)
	}
	tr.entries, tr.bytes = capTraces(tr.entries, tr.bytes, p.maxBytes)
	p.total += tr.bytes
	tr.expires = now.Add(p.retention)
	p.refs[refKey(conv.Channel, conv.ThreadTS)] = inRef{conv: conv.ID, expires: tr.expires}
	p.evictTraces(conv.ID)
}

// evictTraces drops whole conversations' traces, the least recently
// traced first, until all of them weigh at most totalMax; keep's stay
// (the conversation just traced). Callers hold mu.
func (p *inTraces) evictTraces(keep string) {
	for e := p.order.Front(); e != nil && p.total > p.totalMax; {
		next := e.Next()
		if id := e.Value.(string); id != keep {
			p.dropTraces(id)
		}
		e = next
	}
}

// dropTraces forgets a conversation's traces (not its feedback); callers
// hold mu.
func (p *inTraces) dropTraces(convID string) {
	if tr := p.traces[convID]; tr != nil {
		p.total -= tr.bytes
		p.order.Remove(tr.place)
		delete(p.traces, convID)
	}
}

// sweepTraces drops what expired; callers hold mu.
func (p *inTraces) sweepTraces(now time.Time) {
	for id, t := range p.traces {
		if !now.Before(t.expires) {
			p.dropTraces(id)
		}
	}
	maps.DeleteFunc(p.feedback, func(_ string, f *inFeedback) bool { return !now.Before(f.expires) })
	maps.DeleteFunc(p.refs, func(_ string, r inRef) bool { return !now.Before(r.expires) })
}

// Traces implements Store.
func (p *inTraces) Traces(_ context.Context, convID string) (Traces, error) {
	p.mu.Lock()
	now := p.clock()
	var entries [][]byte
	if tr := p.traces[convID]; tr != nil && now.Before(tr.expires) {
		entries = slices.Clone(tr.entries)
	}
	var out Traces
	if f := p.feedback[convID]; f != nil && now.Before(f.expires) {
		out.Feedback = slices.SortedFunc(maps.Values(f.byTurnUser), compareFeedback)
	}
	p.mu.Unlock()
	for _, e := range entries {
		t, err := readTraceEntry(e)
		if err != nil {
			return Traces{}, fmt.Errorf("memory: traces of %s: %w", convID, err)
		}
		out.Turns = append(out.Turns, t)
	}
	return out, nil
}

// TraceRef implements Store.
func (p *inTraces) TraceRef(_ context.Context, channel, threadTS string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.refs[refKey(channel, threadTS)]
	if !ok || !p.clock().Before(r.expires) {
		return "", fmt.Errorf("memory: traces of %s/%s: %w", channel, threadTS, ErrNotFound)
	}
	return r.conv, nil
}

// RecordFeedback implements Store.
func (p *inTraces) RecordFeedback(_ context.Context, convID string, f Feedback) error {
	if err := checkFeedback(convID, f); err != nil {
		return fmt.Errorf("memory: record feedback: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock()
	fb := p.feedback[convID]
	if fb == nil || !now.Before(fb.expires) {
		fb = &inFeedback{byTurnUser: map[string]Feedback{}}
		p.feedback[convID] = fb
	}
	fb.byTurnUser[f.TurnID+"\x00"+f.User] = f
	fb.expires = now.Add(p.retention)
	return nil
}
