package turn

import (
	"maps"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/ens"
)

// The claims desk's agents the view's tests name.
const (
	elen = "elen.acme.137.protocol6022.eth"
	cora = "cora.acme.137.protocol6022.eth"
	tina = "tina.acme.137.protocol6022.eth"
)

// A person's request is a message of a person or human agent that says
// more than :end: with a signature, and that no silent close took as an
// acknowledgement.
func TestIsPersonRequest(t *testing.T) {
	v := view{in: Input{Acknowledged: []string{"9.0"}}}
	tests := []struct {
		name string
		m    Message
		want bool
	}{
		{"a person's question", Message{TS: "1.0", Kind: kindPerson, Text: "Is C1 covered?"}, true},
		{"a human agent's question", Message{TS: "1.0", Kind: kindHuman, Agent: tina, Text: "And C2?"}, true},
		{"an expert's answer", Message{TS: "1.0", Kind: kindAgent, Agent: cora, Text: "C1 is covered."}, false},
		{"another app's bot", Message{TS: "1.0", Kind: kindBot, Text: "Ticket 8 opened."}, false},
		{":end: alone", Message{TS: "1.0", Kind: kindPerson, Text: ":end:"}, false},
		{":end: with a signature", Message{TS: "1.0", Kind: kindPerson, Text: "🙏 :end:"}, false},
		{":end: with words", Message{TS: "1.0", Kind: kindPerson, Text: "Enough, thanks :end:"}, true},
		{"an acknowledgement closed silently", Message{TS: "9.0", Kind: kindPerson, Text: "thanks!"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := v.isPersonRequest(tt.m); got != tt.want {
				t.Errorf("isPersonRequest(%q) = %v, want %v", tt.m.Text, got, tt.want)
			}
		})
	}
}

// A facilitator's history marks as answers of the current exchange the
// agents' and human agents' messages (its own included) and the notes
// from the message that reopened the thread on; the people's messages,
// another app's bot and everything before the reopening are not.
func TestHistoryMarksTheExchangesAnswers(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	msgs := []Message{
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
	in := Input{ExchangeStart: "4.0", Notes: []conversation.Note{
		{Text: "old note", At: at(3)},
		{Text: "new note", At: at(12).Add(time.Second)},
	}}
	answers := func() map[string]bool {
		v := view{Team: &Team{Agents: deskAgents()}, in: in, msgs: msgs, cfg: &Config{}}
		got := map[string]bool{}
		for _, h := range v.history(deskAgents()[elen], msgs, true) {
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

	in.ExchangeStart = "" // never reopened: the whole thread is the exchange
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
