package templates

import (
	"strings"
	"testing"
)

// The built-in team list says whom a clone stands for: by name and ENS
// name when that human agent is a member, by ENS name alone when it is
// not; an agent that is no clone gets no such sentence.
func TestTeamListSaysWhomACloneStandsFor(t *testing.T) {
	render := facilitatorRenderer(t, open(t, ""), PromptSystem)
	const twin = "• Arnaud's twin, arnaud-twin.acme.137.protocol6022.eth, clone; mission: Answers for Arnaud, the claims manager, while he is away."
	d := BuiltinFixtureFor(RoleFacilitator).Data
	got := render(d)
	if want := twin + " It is the digital twin of Arnaud (arnaud.acme.137.protocol6022.eth) and answers in their place."; !strings.Contains(got, want) {
		t.Errorf("the team list lacks %q:\n%s", want, got)
	}
	if n := strings.Count(got, "digital twin of"); n != 1 {
		t.Errorf("%d agents said to be twins, want 1:\n%s", n, got)
	}

	var without []Member // Arnaud left the channel; his twin stayed
	for _, m := range d.ChannelMembers {
		if m.Name() != "Arnaud" {
			without = append(without, m)
		}
	}
	d.ChannelMembers = without
	if want := twin + " It is the digital twin of arnaud.acme.137.protocol6022.eth and answers in their place."; !strings.Contains(render(d), want) {
		t.Errorf("without its human among the members, the team list lacks %q:\n%s", want, render(d))
	}
}

// .StandsFor reads as the human agent's ENS name on a clone, and as empty
// on any other agent and on a person; a fixture's person may not set it.
func TestStandsForField(t *testing.T) {
	const tmpl = `[{{.LatestRequest.Author.StandsFor}}][{{.InitialRequest.Author.StandsFor}}][{{(index .ChannelMembers 1).StandsFor}}]`
	lib := open(t, writeRepo(t, map[string]string{"facilitator/default.tmpl": tmpl}))
	d := BuiltinFixtureFor(RoleFacilitator).Data
	var twin Member
	for _, m := range d.ChannelMembers {
		if m.Name() == "Arnaud's twin" {
			twin = m
		}
	}
	d.LatestRequest.Author = twin
	d.InitialRequest.Author = Person("Alice Martin")
	got, err := lib.Current().Render("elen.acme.137.protocol6022.eth", RoleFacilitator, PromptDefault, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[arnaud.acme.137.protocol6022.eth][][]"; got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}
	_, err = ParseFixture("f.json", []byte(`{"ChannelMembers": [{"Name": "Pat", "StandsFor": "arnaud.acme.137.protocol6022.eth"}]}`))
	if err == nil || !strings.Contains(err.Error(), `member "Pat" has agent fields but IsAgent is false`) {
		t.Errorf("a person standing for someone: %v", err)
	}
}
