package agents_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
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
		n += agents.EstimateTokens(m.Content)
	}
	return n
}

// summary shows a request's messages, each cut to 100 characters.
func summary(r llm.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Role + ": " + clip100(m.Content) + "\n")
	}
	return b.String()
}

// The budget cuts the rest of the history first, oldest first, then the
// tail, then the answers of the current exchange, oldest first; the
// messages kept keep their order.
func TestBudgetCutsAnswersLast(t *testing.T) {
	word := strings.Repeat("a", 40)
	msg := func(label string, answer bool) agents.HistoryMessage {
		return agents.HistoryMessage{Role: llm.RoleUser, Content: label + " " + word, Answer: answer}
	}
	base := agents.TurnPrompt{
		Agent:  ens.Agent{Name: "Elen", EnsDomain: elen, Role: ens.RoleFacilitator},
		Prompt: templates.PromptConclude,
		History: []agents.HistoryMessage{
			msg("memory", false), msg("root", false), msg("answer-1", true),
			msg("follow-up", false), msg("answer-2", true),
		},
		Tail: []agents.HistoryMessage{{Role: llm.RoleUser, Content: "previous " + word}, {Role: llm.RoleAssistant, Content: "end " + word}},
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
			p.MaxInputTokens = agents.EstimateTokens("S") + agents.EstimateTokens("P")
			for _, w := range tt.want {
				p.MaxInputTokens += agents.EstimateTokens(w + " " + word)
			}
			req, info, err := agents.BuildRequest(fixedPrompts{system: "S", phase: "P"}, newFakeModel(), p)
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

// clip100 is s cut to 100 characters.
func clip100(s string) string {
	if r := []rune(s); len(r) > 100 {
		return string(r[:100]) + "…"
	}
	return s
}
