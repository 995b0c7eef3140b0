package templates

import (
	"strings"
	"testing"
)

// followUpData is the facilitator's fixture after a follow-up: the person
// asked again after the conclusion, the facilitator called Claudine, and
// Claudine answered. The request to answer is the follow-up; the latest
// message is Claudine's answer.
func followUpData() Data {
	d := BuiltinFixtureFor(RoleFacilitator).Data
	claudine := d.ChannelMembers[1]
	alice := d.InitialRequest.Author // the person who began the thread
	d.ConversationMessageCount = 6
	d.LatestPersonRequest = Request{Content: "And the side mirror, is it covered too?", Author: alice}
	d.Request = d.LatestPersonRequest // the follow-up reopened the thread: a new exchange
	for i := range d.Messages {
		d.Messages[i].InExchange = false
	}
	d.ExchangeMessageCount = 0
	d.LatestRequest = Request{Content: "📚 C45653's policy covers glass and mirrors since January.", Author: claudine}
	return d
}

// The built-in facilitator prompts answer the person's latest request, with
// a later agent's message as material, and the conclusion says why it runs;
// each case is kept in a golden file.
func TestBuiltinFacilitatorCasesGolden(t *testing.T) {
	lib := open(t, "")
	cases := map[string]struct {
		prompt string
		data   func() Data
	}{
		"default.follow-up": {PromptDefault, followUpData},
		"conclude.follow-up": {PromptConclude, func() Data {
			d := followUpData()
			d.ConcludeReason = ConcludeEnd
			d.ConversationMessageCount += 2
			return d
		}},
		"conclude.reason-end":        {PromptConclude, reasonData(ConcludeEnd)},
		"conclude.reason-person":     {PromptConclude, reasonData(ConcludePerson)},
		"conclude.reason-inactivity": {PromptConclude, reasonData(ConcludeInactivity)},
		"conclude.reason-max_turns":  {PromptConclude, reasonData(ConcludeMaxTurns)},
		"conclude.reason-stalled":    {PromptConclude, reasonData(ConcludeStalled)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := lib.Current().Render("elen.acme.137.protocol6022.eth", RoleFacilitator, c.prompt, c.data())
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "testdata/builtin/facilitator/"+name+".golden", got+"\n")
		})
	}
}

func reasonData(reason string) func() Data {
	return func() Data {
		d := BuiltinFixtureFor(RoleFacilitator).Data
		d.ConcludeReason = reason
		if reason == ConcludeEnd {
			d.ConversationMessageCount += 2 // the previous prompt and the :end: reply
		}
		return d
	}
}

// What the built-in facilitator prompts must say in those cases.
func TestBuiltinFacilitatorSaysTrueThings(t *testing.T) {
	lib := open(t, "")
	render := func(prompt string, d Data) string {
		t.Helper()
		got, err := lib.Current().Render("elen.acme.137.protocol6022.eth", RoleFacilitator, prompt, d)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	followUp := render(PromptDefault, followUpData())
	for _, want := range []string{
		`The request to answer, from Alice Martin: "And the side mirror, is it covered too?".`,
		`The latest message, from Claudine (claudine.acme.137.protocol6022.eth): "📚 C45653's policy covers glass and mirrors since January.", is material for the answer, not a new request.`,
		`It began with a request from Alice Martin: "Customer C45653 reports`,
		"several agents may be called in one message",
	} {
		if !strings.Contains(followUp, want) {
			t.Errorf("the follow-up's default lacks %q:\n%s", want, followUp)
		}
	}
	// Counts are the thread's own: after :end: the conclusion's count
	// includes the previous prompt and the reply, so none is printed.
	for reason, want := range map[string]string{
		ConcludeEnd:        "",
		ConcludePerson:     "the person ended it.",
		ConcludeInactivity: "say in one sentence that the answer may be incomplete",
		ConcludeMaxTurns:   "it stopped at its limit of agent turns.",
		ConcludeStalled:    "the agents could not settle it",
	} {
		got := render(PromptConclude, reasonData(reason)())
		if strings.Contains(got, "The thread has") == (reason == ConcludeEnd) {
			t.Errorf("conclude (%s) and the thread's count:\n%s", reason, got)
		}
		if !strings.Contains(got, want) {
			t.Errorf("conclude (%s) lacks %q:\n%s", reason, want, got)
		}
		if reason == ConcludeEnd || reason == ConcludePerson {
			if strings.Contains(got, "may be incomplete") {
				t.Errorf("conclude (%s) speaks of a limit:\n%s", reason, got)
			}
		}
	}
	if sys := render(PromptSystem, BuiltinFixtureFor(RoleFacilitator).Data); !strings.Contains(sys, "expertise: customer records. Its memory keys: customer id, a C and five digits, e.g. C45653.") {
		t.Errorf("the team list lacks Claudine's key format:\n%s", sys)
	}
	if sys := render(PromptSystem, BuiltinFixtureFor(RoleFacilitator).Data); !strings.Contains(sys, "may be called in the same message") {
		t.Errorf("the system prompt does not allow several experts in one message:\n%s", sys)
	}
}

// Optional blocks of the built-in prompts leave no two spaces, whatever
// the data leaves out.
func TestBuiltinPromptsHaveNoDoubleSpaces(t *testing.T) {
	lib := open(t, "")
	bare := Agent(AgentInfo{Name: "Solo", EnsDomain: "solo.acme.137.protocol6022.eth"})
	variants := map[string]func(role string) Data{
		"fixture": func(role string) Data { return BuiltinFixtureFor(role).Data },
		"zero":    func(string) Data { return Data{} },
		"bare agent": func(string) Data {
			return Data{ChannelMembers: []Member{bare, Person("Pat")}, LatestRequest: Request{Content: "hi", Author: Person("Pat")}}
		},
		"no description, no mission, no keys": func(role string) Data {
			d := BuiltinFixtureFor(role).Data
			d.ChannelDescription, d.MemorySessionId, d.KnownSessions, d.CloneOf = "", "", nil, Member{}
			d.ChannelMembers = append([]Member{bare}, d.ChannelMembers[1:]...)
			return d
		},
		"follow-up": func(string) Data { return followUpData() },
	}
	for name, data := range variants {
		for _, role := range Roles() {
			for _, prompt := range Prompts(role) {
				for _, reason := range []string{"", ConcludeEnd, ConcludeInactivity} {
					d := data(role)
					d.ConcludeReason = reason
					got, err := lib.Current().Render("solo.acme.137.protocol6022.eth", role, prompt, d)
					if err != nil {
						t.Fatalf("%s %s/%s: %v", name, role, prompt, err)
					}
					if i := strings.Index(got, "  "); i >= 0 {
						t.Errorf("%s %s/%s (reason %q): two spaces at %d in:\n%s", name, role, prompt, reason, i, got)
					}
				}
			}
		}
	}
}

// The clone's default names the person it answers for.
func TestBuiltinCloneNamesItsHuman(t *testing.T) {
	lib := open(t, "")
	got, err := lib.Current().Render("arnaud-twin.acme.137.protocol6022.eth", RoleClone, PromptDefault, BuiltinFixtureFor(RoleClone).Data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "You answer for Arnaud (arnaud.acme.137.protocol6022.eth), the person you stand for.") {
		t.Errorf("the clone's default does not name Arnaud first:\n%s", got)
	}
}
