package agents

import (
	"slices"
	"testing"
	"time"
)

// A call the conclusion cancels leaves the facilitator a history note: a
// queued expert turn and a human agent's pending call; the facilitator's
// own queued turn leaves none.
func TestCancelledCallsLeaveNotes(t *testing.T) {
	m := newMachine(t, mFac)
	m.receive(byPerson("1.1", "cora?", false, namedExp), true, mT0)
	m.st.Calls = append(m.st.Calls, humanCall{Agent: "tina.test.eth", Trigger: "1.1", Deadline: mT0.Add(time.Hour)})
	if len(m.st.Queue) == 0 {
		t.Fatal("no turn queued")
	}
	m.requestConclude(&concludeRequest{Reason: concludeByPerson})
	var got []string
	for _, n := range m.st.Notes {
		got = append(got, n.Text)
	}
	want := []string{
		"(" + mExp + " did not answer: the call was cancelled when the conversation concluded)",
		"(tina.test.eth did not answer: the call was cancelled when the conversation concluded)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("notes %q\nwant %q", got, want)
	}
	if len(m.st.Queue) != 0 || len(m.st.Calls) != 0 {
		t.Errorf("queue %v, calls %v: not cancelled", m.st.Queue, m.st.Calls)
	}
}
