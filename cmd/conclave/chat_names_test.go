package main

import (
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/ens"
)

// TestAgentsToWrite: chat's header gives each agent's full name, the one
// that calls it, beside the name people know it by.
func TestAgentsToWrite(t *testing.T) {
	list := []agents.ChannelAgent{
		{Agent: ens.Agent{Name: "Elen", EnsDomain: elenENS, Role: ens.RoleFacilitator}},
		{Agent: ens.Agent{Name: "Claudine", EnsDomain: "claudine.acme.137.protocol6022.eth", Role: ens.RoleExpert}},
	}
	want := "To call an agent, write its full name:\n" +
		"  elen.acme.137.protocol6022.eth  Elen (facilitator)\n" +
		"  claudine.acme.137.protocol6022.eth  Claudine (expert)"
	if got := agentsToWrite(list); got != want {
		t.Errorf("agentsToWrite =\n%s\nwant\n%s", got, want)
	}
}
