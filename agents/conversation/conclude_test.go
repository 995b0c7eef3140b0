package conversation

import (
	"slices"
	"testing"
	"time"
)

// A wordless conclusion in a reopened thread makes the people's messages
// since the reopening acknowledgements; one with words, or in a thread
// never concluded, leaves them requests.
func TestWordlessConclusionAcknowledges(t *testing.T) {
	tests := []struct {
		name     string
		reopened bool
		silent   bool
		want     []string
	}{
		{"an acknowledgement", true, true, []string{"5.0", "6.0"}},
		{"with words", true, false, nil},
		{"never concluded", false, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &State{Status: StatusOpen, Reopened: tt.reopened, SinceReopen: []string{"5.0", "6.0"},
				Conclude: &ConcludeRequest{Reason: ConcludeByEnd}, AgentTurns: map[string]int{mFac: 1},
				Routed: map[string]bool{}, Working: map[string]int{}, Noticed: map[string]bool{}}
			m := &Machine{st: st, lim: Limits{MaxTurns: 40, MaxQueued: 10}, facilitator: mFac}
			m.Concluded(time.Unix(100, 0), true, tt.silent)
			if st.Status != StatusConcluded || st.Conclude != nil || st.SinceReopen != nil || st.Reopened {
				t.Errorf("status %q, conclude %v, since reopen %v, reopened %v", st.Status, st.Conclude, st.SinceReopen, st.Reopened)
			}
			if !slices.Equal(st.Acknowledged, tt.want) {
				t.Errorf("acknowledged %v, want %v", st.Acknowledged, tt.want)
			}
		})
	}
}

// A call the conclusion cancels leaves the facilitator a history note: a
// queued expert turn and a human agent's pending call; the facilitator's
// own queued turn leaves none.
func TestCancelledCallsLeaveNotes(t *testing.T) {
	m := newMachine(t, mFac)
	m.Receive(byPerson("1.1", "cora?", false, namedExp), true, mT0)
	m.st.Calls = append(m.st.Calls, HumanCall{Agent: "tina.test.eth", Trigger: "1.1", Deadline: mT0.Add(time.Hour)})
	if len(m.st.Queue) == 0 {
		t.Fatal("no turn queued")
	}
	m.RequestConclude(&ConcludeRequest{Reason: ConcludeByPerson})
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
