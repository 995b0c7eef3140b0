package agents

// turnResult is what a turn produced, as a value: the step feeds it into
// the machine and the outbox; it never reads the turn back. A turn that
// failed still returns what it produced before failing (a tool it used, a
// message its reply was streamed in), which the step applies first.
type turnResult struct {
	text     string // the reply, to post
	prompt   string // the facilitator's: the phase prompt its reply answered
	threaded        // an unbound expert's threading request
	// notes are history lines never posted (the tools it used); streamed
	// the markers of the messages its replies were streamed in, by post
	// id.
	notes    []turnNote
	streamed map[string]streamMark
}

// result ends a run of the turn's function: what it produced beside r
// is taken off the turn, whose scratch it was.
func (t *turnRun) result(r turnResult) turnResult {
	r.notes, r.streamed = t.notes, t.streamed
	t.notes, t.streamed = nil, nil
	return r
}
