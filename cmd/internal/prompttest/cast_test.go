package prompttest

import (
	"strings"
	"testing"

	"github.com/conclavehq/conclave/ens"
)

func TestBindNames(t *testing.T) {
	c := cast([]ens.Agent{
		{Name: "Elen", EnsDomain: "elen.acme.137.protocol6022.eth", Role: ens.RoleFacilitator},
		{Name: "Claudine", EnsDomain: "claudine.acme.137.protocol6022.eth", Role: ens.RoleExpert},
		{Name: "Claude", EnsDomain: "claudine.other.137.protocol6022.eth", Role: ens.RoleExpert},
		{Name: "Arnaud", EnsDomain: "arnaud.acme.137.protocol6022.eth", Role: ens.RoleHuman},
	})
	script := func(src string) Script {
		t.Helper()
		s, err := Parse("t.chat", strings.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	steps, err := c.bind(script("> Ada: hi\n< ELEN: a\n< claudine.acme.137.protocol6022.eth: b\n= Claude: c\n> arnaud in thread: yes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || len(steps[0].replies["elen.acme.137.protocol6022.eth"]) != 1 ||
		len(steps[0].replies["claudine.acme.137.protocol6022.eth"]) != 1 || steps[0].expects[0].agent.Name != "Claude" {
		t.Errorf("step 1: %+v", steps[0])
	}
	if steps[0].person != "Ada" || steps[0].human != "" || steps[1].person != "Arnaud" || steps[1].human != "arnaud.acme.137.protocol6022.eth" {
		t.Errorf("speakers: %q/%q, %q/%q", steps[0].person, steps[0].human, steps[1].person, steps[1].human)
	}

	_, err = c.bind(script("> Ada: hi\n< claudine: which one?\n"))
	want := `t.chat:2: "claudine" names claudine.acme.137.protocol6022.eth and claudine.other.137.protocol6022.eth: write the full ENS name`
	if err == nil || err.Error() != want {
		t.Errorf("an ambiguous name: %v\nwant %s", err, want)
	}
}
