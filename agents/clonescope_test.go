package agents_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/templates"
)

// TestCloneMemoryStaysInItsChannel: what a human told the group in a
// private channel is not in its twin's prompt in another channel with
// memory.clone_scope = "channel" (the default), and is with "workspace".
func TestCloneMemoryStaysInItsChannel(t *testing.T) {
	const private, other = "CPRIVATE", "COTHER"
	for _, tt := range []struct {
		scope string
		want  bool
	}{{"", false}, {agents.ScopeChannel, false}, {agents.ScopeWorkspace, true}} {
		t.Run(fmt.Sprintf("scope %q", tt.scope), func(t *testing.T) {
			r := newRig(t, func(r *rig) {
				r.opts.CloneScope = tt.scope
				r.opts.Channels = []agents.ChannelConfig{{ID: private, Agents: []string{elen, twin}}, {ID: other, Agents: []string{elen, twin}}}
			})
			r.pair("UT", tina)
			send := func(channel, user, name, text string) {
				t.Helper()
				ev := agents.Event{ID: "Ev" + fmt.Sprint(r.seq+1), Kind: agents.EventMessage, Team: team, Channel: channel, TS: r.nextTS(),
					UserID: user, UserName: name, Raw: text, Text: text, At: r.clock.Now()}
				if err := handle(context.Background(), r.e, ev); err != nil {
					t.Fatal(err)
				}
				r.settle()
			}
			send(private, "UT", "Tina", "For the record, privately: the merger code is bluefin.")
			send(other, "UT", "Tina", twin+" what is the merger code?")
			calls := r.model.calls(twin, templates.PromptDefault)
			if len(calls) == 0 {
				t.Fatal("the twin did not answer in the other channel")
			}
			last := calls[len(calls)-1]
			if got := strings.Contains(strings.Join(contents(last), "\n"), "bluefin"); got != tt.want {
				t.Errorf("the private channel's words in the other channel's prompt: %v, want %v\n%s", got, tt.want, strings.Join(contents(last), "\n"))
			}
		})
	}
}
