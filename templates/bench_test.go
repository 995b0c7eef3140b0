package templates

import (
	"fmt"
	"testing"
)

// benchData is a conversation of 20 members: the agent itself, 11 other
// agents and 8 people.
func benchData() Data {
	d := BuiltinFixture().Data
	d.ChannelMembers = d.ChannelMembers[:1]
	for i := range 11 {
		d.ChannelMembers = append(d.ChannelMembers, Agent(AgentInfo{
			Name:       fmt.Sprintf("Agent %d", i),
			EnsDomain:  fmt.Sprintf("agent%d.acme.137.protocol6022.eth", i),
			Owner:      "0x5B38Da6a701c568545dCfcB03FcB875f56beddC4",
			Addresses:  map[string]string{"evm": "0xAb8483F64d9C6d1EcF9b849Ae677dD3315835cb2"},
			Attributes: map[string]string{"role": "expert", "expertise": "claims", "mission": "Check what a policy covers"},
		}))
	}
	for i := range 8 {
		d.ChannelMembers = append(d.ChannelMembers, Person(fmt.Sprintf("Person %d", i)))
	}
	return d
}

// BenchmarkRender renders built-in prompts with 20 members: the system
// prompts list every other agent, the phase prompts are the short ones a
// turn ends with.
func BenchmarkRender(b *testing.B) {
	lib := open(b, "")
	d := benchData()
	for _, p := range []struct{ role, prompt string }{
		{RoleFacilitator, PromptSystem},
		{RoleFacilitator, PromptDefault},
		{RoleExpert, PromptSystem},
		{RoleExpert, PromptContextFound},
	} {
		b.Run(p.role+"/"+p.prompt, func(b *testing.B) {
			set := lib.Current()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := set.Render(testAgent, p.role, p.prompt, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
