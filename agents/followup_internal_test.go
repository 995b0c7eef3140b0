package agents

import (
	"testing"

	"github.com/conclavehq/conclave/memory"
)

// A person's request is a message of a person or human agent that says
// more than :end: with a signature, and that no silent close took as an
// acknowledgement.
func TestIsPersonRequest(t *testing.T) {
	v := view{st: loadMachine(t, &convState{Acknowledged: []string{"9.0"}}, limits{}, "", "c").Read()}
	tests := []struct {
		name string
		m    memory.Message
		want bool
	}{
		{"a person's question", memory.Message{TS: "1.0", Kind: kindPerson, Text: "Is C1 covered?"}, true},
		{"a human agent's question", memory.Message{TS: "1.0", Kind: kindHuman, Agent: tina, Text: "And C2?"}, true},
		{"an expert's answer", memory.Message{TS: "1.0", Kind: kindAgent, Agent: cora, Text: "C1 is covered."}, false},
		{"another app's bot", memory.Message{TS: "1.0", Kind: kindBot, Text: "Ticket 8 opened."}, false},
		{":end: alone", memory.Message{TS: "1.0", Kind: kindPerson, Text: ":end:"}, false},
		{":end: with a signature", memory.Message{TS: "1.0", Kind: kindPerson, Text: "🙏 :end:"}, false},
		{":end: with words", memory.Message{TS: "1.0", Kind: kindPerson, Text: "Enough, thanks :end:"}, true},
		{"an acknowledgement closed silently", memory.Message{TS: "9.0", Kind: kindPerson, Text: "thanks!"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := v.isPersonRequest(turnMessage(tt.m)); got != tt.want {
				t.Errorf("isPersonRequest(%q) = %v, want %v", tt.m.Text, got, tt.want)
			}
		})
	}
}
