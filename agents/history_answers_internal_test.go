package agents

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// A facilitator's history marks as answers of the current exchange the
// agents' and human agents' messages (its own included) and the notes
// from the message that reopened the thread on; the people's messages,
// another app's bot and everything before the reopening are not.
func TestHistoryMarksTheExchangesAnswers(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	msgs := []memory.Message{
		{TS: "1.0", Kind: kindPerson, Name: "Alice", Text: "root", At: at(0)},
		{TS: "2.0", Kind: kindAgent, Agent: cora, Text: "old answer", At: at(1)},
		{TS: "3.0", Kind: kindAgent, Agent: elen, Text: "old conclusion", At: at(2)},
		{TS: "4.0", Kind: kindPerson, Name: "Alice", Text: "follow-up", At: at(10)},
		{TS: "5.0", Kind: kindAgent, Agent: elen, Text: "call", At: at(11)},
		{TS: "6.0", Kind: kindAgent, Agent: cora, Text: "answer", At: at(12)},
		{TS: "7.0", Kind: kindHuman, Agent: tina, Text: "human answer", At: at(13)},
		{TS: "8.0", Kind: kindBot, Name: "Jira", Text: "bot", At: at(14)},
		{TS: "9.0", Kind: kindPerson, Name: "Alice", Text: "added", At: at(15)},
	}
	st := &convState{ExchangeStart: "4.0", Notes: []conversation.Note{
		{Text: "old note", At: at(3)},
		{Text: "new note", At: at(12).Add(time.Second)},
	}}
	answers := func() map[string]bool {
		v := view{roster: &roster{agents: deskAgents(), resolve: deskResolve, log: slog.New(slog.DiscardHandler)},
			msgs: threadOf(msgs), st: loadMachine(t, st, limits{}, "", "c").Read(), opts: &Options{}}
		got := map[string]bool{}
		for _, h := range v.history(t.Context(), deskAgents()[elen], threadOf(msgs), true) {
			got[h.Content] = h.Answer
		}
		return got
	}
	want := map[string]bool{
		"root": false, "old answer": false, "old conclusion": false, "old note": false,
		"follow-up": false, "call": true, "answer": true, "new note": true, "human answer": true, "bot": false, "added": false,
	}
	if got := answers(); !maps.Equal(got, want) {
		t.Errorf("answers %v\nwant    %v", got, want)
	}

	st.ExchangeStart = "" // never reopened: the whole thread is the exchange
	for _, s := range []string{"old answer", "old conclusion", "old note"} {
		want[s] = true
	}
	if got := answers(); !maps.Equal(got, want) {
		t.Errorf("never reopened: answers %v\nwant    %v", got, want)
	}
}

// deskAgents is the part of the claims desk the history test names.
func deskAgents() map[string]ens.Agent {
	return map[string]ens.Agent{
		elen: {Name: "Elen", EnsDomain: elen, Role: ens.RoleFacilitator},
		cora: {Name: "Cora", EnsDomain: cora, Role: ens.RoleExpert},
		tina: {Name: "Tina", EnsDomain: tina, Role: ens.RoleHuman},
	}
}

// deskResolve resolves the desk's agents.
func deskResolve(_ context.Context, name string) (ens.Agent, error) {
	if a, ok := deskAgents()[name]; ok {
		return a, nil
	}
	return ens.Agent{}, ens.ErrNotFound
}
