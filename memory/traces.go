package memory

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
)

// Defaults of the trace bounds (config keys trace.retention,
// trace.max_bytes_per_conversation and trace.max_bytes).
const (
	DefaultTraceRetention     = 168 * time.Hour
	DefaultTraceMaxBytes      = 1 << 20
	DefaultTraceTotalMaxBytes = 256 << 20
)

// TurnTrace is one turn's trace as a commit hands it to the store: the
// engine's own encoding, which the store keeps compressed and never reads.
type TurnTrace struct {
	TurnID string
	Body   []byte
}

// Feedback is one person's rating of a turn's post.
type Feedback struct {
	TurnID string    `json:"turn"`
	User   string    `json:"user"`
	Value  string    `json:"value"`
	At     time.Time `json:"at"`
}

// Traces is what the store keeps of a conversation's turns.
type Traces struct {
	// Turns are the traces kept, oldest first, their bodies as committed.
	Turns []TurnTrace
	// Feedback is every rating given on a turn of the conversation, one
	// per turn and person, ordered by turn, then person.
	Feedback []Feedback
}

// traceEntry is how a trace is stored: its turn id, a zero byte, then its
// body compressed as an S2 block (github.com/klauspost/compress/s2), which
// costs a tenth of DEFLATE's CPU for about a third more bytes: a trace is
// compressed on every turn and read when someone asks.
func traceEntry(t TurnTrace) ([]byte, error) {
	if t.TurnID == "" {
		return nil, errors.New("trace without a turn id")
	}
	n := s2.MaxEncodedLen(len(t.Body))
	if n < 0 {
		return nil, fmt.Errorf("trace of turn %s: too large", t.TurnID)
	}
	head := len(t.TurnID) + 1
	e := make([]byte, head+n) // e[head-1] stays the zero byte
	copy(e, t.TurnID)
	enc := s2.Encode(e[head:], t.Body) // in e, which is large enough
	return e[:head+len(enc)], nil
}

// readTraceEntry decodes what traceEntry stored.
func readTraceEntry(e []byte) (TurnTrace, error) {
	id, body, ok := bytes.Cut(e, []byte{0})
	if !ok {
		return TurnTrace{}, errors.New("trace entry without a turn id")
	}
	out, err := s2.Decode(nil, body)
	if err != nil {
		return TurnTrace{}, fmt.Errorf("trace of turn %s: %w", id, err)
	}
	return TurnTrace{TurnID: string(id), Body: out}, nil
}

// traceEntries encodes a commit's traces.
func traceEntries(ts []TurnTrace) ([][]byte, error) {
	out := make([][]byte, 0, len(ts))
	for _, t := range ts {
		e, err := traceEntry(t)
		if err != nil {
			return nil, fmt.Errorf("encode trace: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// capTraces drops the oldest entries while they weigh more than max bytes,
// always keeping the newest; it returns what is kept and its weight.
func capTraces(entries [][]byte, total, max int) ([][]byte, int) {
	for len(entries) > 1 && total > max {
		total -= len(entries[0])
		entries = entries[1:]
	}
	return entries, total
}

// checkFeedback checks what RecordFeedback is given.
func checkFeedback(convID string, f Feedback) error {
	switch {
	case convID == "":
		return errNoConversation
	case f.TurnID == "" || f.User == "" || f.Value == "":
		return errors.New("feedback needs a turn, a user and a value")
	}
	return nil
}

// compareFeedback orders feedback by turn, then user.
func compareFeedback(a, b Feedback) int {
	return cmp.Or(strings.Compare(a.TurnID, b.TurnID), strings.Compare(a.User, b.User))
}
