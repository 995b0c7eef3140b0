package agents_test

import (
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"

	"github.com/conclavehq/conclave/templates"
)

// The facilitator's team list says whom a clone stands for: the clone's
// member carries its human agent (.StandsFor), which the built-in names.
func TestTeamListNamesTheClonesHuman(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.opts.Channels = []agents.ChannelConfig{{ID: chanA, Agents: []string{elen, cora, tina, twin}}}
	}, withBuiltinTemplates)
	r.model.on(elen, templates.PromptDefault, "🧭 :end:")
	r.send("", "U1", "Alice", "Who can tell me about Tina's week?")
	r.settle()
	calls := r.model.calls(elen, templates.PromptDefault)
	if len(calls) == 0 {
		t.Fatal("the facilitator was not asked")
	}
	sys := calls[0].Messages[0].Content
	if want := "It is the digital twin of Tina (" + tina + ") and answers in their place."; !strings.Contains(sys, want) {
		t.Errorf("the team list lacks %q:\n%s", want, sys)
	}
	if n := strings.Count(sys, "digital twin of"); n != 1 {
		t.Errorf("%d agents said to stand for someone, want the clone alone:\n%s", n, sys)
	}
	if m, _ := agents.TemplateMember(r.agents[twin], &r.opts).AgentInfo(); m.StandsFor != tina {
		t.Errorf("the twin's member stands for %q, want %q", m.StandsFor, tina)
	}
	if m, _ := agents.TemplateMember(r.agents[cora], &r.opts).AgentInfo(); m.StandsFor != "" {
		t.Errorf("an expert's member stands for %q, want nobody", m.StandsFor)
	}
}
