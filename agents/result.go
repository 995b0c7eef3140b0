package agents

import "github.com/conclavehq/conclave/agents/turn"

// turnResult is what a turn produced, as a value (turn.Result): the step
// feeds it into the machine and the outbox; it never reads the turn back.
type turnResult = turn.Result

// result ends a run of the turn's function: what it produced beside r
// is taken off the turn, whose scratch it was.
func (t *turnRun) result(r turnResult) turnResult {
	r.Notes, r.Streamed = t.notes, t.streamed
	t.notes, t.streamed = nil, nil
	return r
}
