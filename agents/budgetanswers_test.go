package agents

import (
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// long is a person's message of n characters that starts with what it
// asks.
func long(ask string, n int) string {
	return (ask + " " + strings.Repeat("The car was parked by the river when the storm came. ", n/50+1))[:n]
}

// Two 12,000-character messages by the person in one exchange, experts'
// answers between them, the built-in prompts: the conclude request holds
// every answer of the exchange and stays within max_input_tokens (SPEC
// §14.2). At the budget SPEC names; at one too small for the person's two
// messages, which then go before any answer; and at one too small for the
// tail too, whose previous prompt quotes the request again: it goes
// before the answers, though it is newer.
func TestConcludeKeepsTheExchangesAnswers(t *testing.T) {
	for _, budget := range []int{12000, 4000, 1200} {
		t.Run(strconv.Itoa(budget), func(t *testing.T) {
			r := newRig(t, func(r *rig) { r.opts.MaxInputTokens = budget }, withBuiltinTemplates)
			coraSays, paulSays := "Claim C45653 is open; the damage is 1,200 EUR.", "Policy P-9 covers collisions, with a deductible of 500 EUR."
			r.model.on(elen, templates.PromptDefault,
				"🧭 "+cora+" please look at claim C45653.",
				"🧭 Which policy number covers the car?",
				"🧭 "+paul+" please check policy P-9.",
				"🧭 :end:")
			r.model.on(cora, templates.PromptContextNotFound, threading("C45653", ""))
			r.model.on(cora, templates.PromptContextFound, coraSays)
			r.model.on(paul, templates.PromptContextNotFound, threading("P-9", ""))
			r.model.on(paul, templates.PromptContextFound, paulSays)
			r.model.on(elen, templates.PromptConclude, "🧭 You are covered.")
			root := r.send("", "U1", "Alice", long("Is claim C45653 covered?", 12000))
			r.settle()
			r.send(root.TS, "U1", "Alice", long("It is policy P-9.", 12000))
			r.settle()

			concludes := r.model.calls(elen, templates.PromptConclude)
			if len(concludes) != 1 {
				t.Fatalf("%d conclude requests, want 1", len(concludes))
			}
			req := concludes[0]
			for _, answer := range []string{
				"Cora (" + cora + "): " + coraSays,
				"Paul (" + paul + "): " + paulSays,
				"🧭 " + cora + " please look at claim C45653.",
				"🧭 Which policy number covers the car?",
				"🧭 " + paul + " please check policy P-9.",
			} {
				if indexOf(req, answer) < 0 {
					t.Errorf("the conclude request lacks %q:\n%s", answer, summary(req))
				}
			}
			if got := requestTokens(req); got > budget {
				t.Errorf("the conclude request is about %d tokens, over the budget of %d", got, budget)
			}
			last := lastUser(req)
			if !strings.Contains(last, `The request to answer, from Alice: "Is claim C45653 covered?`) {
				t.Errorf("the conclude prompt does not quote the request:\n%s", last)
			}
			if got := r.chat.texts(); len(got) == 0 || got[len(got)-1] != "Elen: 🧭 You are covered." {
				t.Errorf("posts %q, want the conclusion last", got)
			}
		})
	}
}

// requestTokens is the budget's estimate of a request.
func requestTokens(r llm.Request) int {
	n := 0
	for _, m := range r.Messages {
		n += estimateTokens(m.Content)
	}
	return n
}

// summary shows a request's messages, each cut to 100 characters.
func summary(r llm.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Role + ": " + capText(m.Content, 100) + "\n")
	}
	return b.String()
}

// The budget cuts the rest of the history first, oldest first, then the
// tail, then the answers of the current exchange, oldest first; the
// messages kept keep their order.
func TestBudgetCutsAnswersLast(t *testing.T) {
	word := strings.Repeat("a", 40)
	msg := func(label string, answer bool) HistoryMessage {
		return HistoryMessage{Role: llm.RoleUser, Content: label + " " + word, Answer: answer}
	}
	base := TurnPrompt{
		Agent:  ens.Agent{Name: "Elen", EnsDomain: elen, Role: ens.RoleFacilitator},
		Prompt: templates.PromptConclude,
		History: []HistoryMessage{
			msg("memory", false), msg("root", false), msg("answer-1", true),
			msg("follow-up", false), msg("answer-2", true),
		},
		Tail: []HistoryMessage{{Role: llm.RoleUser, Content: "previous " + word}, {Role: llm.RoleAssistant, Content: "end " + word}},
	}
	tests := []struct {
		name string
		want []string // the budget is what they need, exactly
	}{
		{"all", []string{"memory", "root", "answer-1", "follow-up", "answer-2", "previous", "end"}},
		{"the memory goes first", []string{"root", "answer-1", "follow-up", "answer-2", "previous", "end"}},
		{"then the person's messages, the follow-up last", []string{"answer-1", "follow-up", "answer-2", "previous", "end"}},
		{"then the tail's prompt", []string{"answer-1", "answer-2", "end"}},
		{"then the tail", []string{"answer-1", "answer-2"}},
		{"then the oldest answer", []string{"answer-2"}},
		{"then every answer", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base
			p.MaxInputTokens = estimateTokens("S") + estimateTokens("P")
			for _, w := range tt.want {
				p.MaxInputTokens += estimateTokens(w + " " + word)
			}
			req, info, err := BuildRequest(fixedPrompts{system: "S", phase: "P"}, newFakeModel(), p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range req.Messages[1 : len(req.Messages)-1] {
				first, _, _ := strings.Cut(m.Content, " ")
				got = append(got, first)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("history %q, want %q", got, tt.want)
			}
			if info.Tokens != p.MaxInputTokens || info.Tokens != requestTokens(req) {
				t.Errorf("tokens %d (request %d), budget %d", info.Tokens, requestTokens(req), p.MaxInputTokens)
			}
			if want := 7 - len(tt.want); info.Dropped != want {
				t.Errorf("dropped %d, want %d", info.Dropped, want)
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
	st := &convState{ExchangeStart: "4.0", Notes: []note{
		{Text: "old note", At: at(3)},
		{Text: "new note", At: at(12).Add(time.Second)},
	}}
	v := view{roster: &roster{agents: testAgents(), resolve: fakeResolver{testAgents()}.Resolve, log: slog.New(slog.DiscardHandler)},
		msgs: msgs, st: st, opts: &Options{}}
	answers := func() map[string]bool {
		got := map[string]bool{}
		for _, h := range v.history(t.Context(), testAgents()[elen], msgs, true) {
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
