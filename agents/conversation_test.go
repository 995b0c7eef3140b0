package agents_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/templates"
)

func TestClaimsDesk(t *testing.T) {
	t.Run("in-process", func(t *testing.T) { testClaimsDesk(t, newRig(t, withBuiltinTemplates)) })
	t.Run("redis", func(t *testing.T) { testClaimsDesk(t, newRig(t, withRedis, withBuiltinTemplates)) })
}

func testClaimsDesk(t *testing.T, r *rig) {
	r.model.on(elen, templates.PromptDefault,
		"Let me check. "+cora+" please look at claim C45653; "+paul+" please check the policy behind claim C45653.",
		":end:")
	r.model.on(elen, templates.PromptConclude, "You are covered: claim C45653 is open and the policy covers collisions.")
	r.model.on(cora, templates.PromptContextNotFound, threading("C45653", "Looking at claim C45653."))
	r.model.on(cora, templates.PromptContextFound, "Claim C45653 is open; damage 1,200 EUR.")
	r.model.on(paul, templates.PromptContextNotFound, "```json\n"+threading("C45653", "")+"\n```")
	r.model.on(paul, templates.PromptContextFound, "The policy covers collisions.")

	root := r.send("", "U1", "Alice", "My car was hit yesterday, claim C45653. Am I covered?")
	r.settle()

	want := []string{
		"Elen: Let me check. " + cora + " please look at claim C45653; " + paul + " please check the policy behind claim C45653.",
		"Cora: Looking at claim C45653.",
		"Cora: Claim C45653 is open; damage 1,200 EUR.",
		"Paul: The policy covers collisions.",
		"Elen: You are covered: claim C45653 is open and the policy covers collisions.",
	}
	if got := r.chat.texts(); !slices.Equal(got, want) {
		t.Fatalf("posts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	defaults := r.model.calls(elen, templates.PromptDefault)
	if len(defaults) != 2 {
		t.Fatalf("facilitator default turns = %d, want 2 (start, then once after both experts)", len(defaults))
	}
	// The second default turn covers both experts' answers.
	second := strings.Join(contents(defaults[1]), "\n")
	for _, s := range []string{"Cora (" + cora + "): Claim C45653 is open", "Paul (" + paul + "): The policy covers collisions."} {
		if !strings.Contains(second, s) {
			t.Errorf("facilitator's second turn lacks %q", s)
		}
	}
	concludes := r.model.calls(elen, templates.PromptConclude)
	if len(concludes) != 1 {
		t.Fatalf("conclude turns = %d, want 1", len(concludes))
	}
	msgs := concludes[0].Messages
	if n := len(msgs); msgs[n-2].Role != llm.RoleAssistant || msgs[n-2].Content != ":end:" ||
		msgs[n-3].Role != llm.RoleUser || msgs[n-3].Content != lastUser(defaults[1]) {
		t.Errorf("conclude input does not end with the previous prompt and the :end: reply:\n%s", strings.Join(contents(concludes[0]), "\n"))
	}
	if !r.chat.reacted(root.TS, "white_check_mark") {
		t.Error("root has no ✅")
	}
	if r.chat.anyReaction("hourglass_flowing_sand") {
		t.Error("a working reaction was left behind")
	}
	st := r.state(root.TS)
	if st.Status != agents.StatusConcluded || st.Bindings[cora] != "C45653" || st.Bindings[paul] != "C45653" {
		t.Errorf("state: status %q, bindings %v", st.Status, st.Bindings)
	}
	// Two facilitator turns and one per expert (threading and
	// context-found are one turn); the conclusion does not count.
	if st.Turns != 4 {
		t.Errorf("turns %d, want 4", st.Turns)
	}
	var outcome string
	for _, m := range r.messages(root.TS) {
		if m.Text == "Looking at claim C45653." {
			outcome = m.Meta["threading"]
		}
	}
	if outcome != agents.ThreadingOK {
		t.Errorf("threading outcome on the stored message = %q, want ok", outcome)
	}
	entries, err := r.store.ReadSession(context.Background(), cora, "C45653", 0)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, e := range entries {
		roles = append(roles, e.Role+": "+e.Content)
	}
	wantEntries := []string{
		"user: Let me check. " + cora + " please look at claim C45653; " + paul + " please check the policy behind claim C45653.",
		"assistant: Looking at claim C45653.",
		"assistant: Claim C45653 is open; damage 1,200 EUR.",
	}
	if !slices.Equal(roles, wantEntries) {
		t.Errorf("cora's session:\n%s\nwant:\n%s", strings.Join(roles, "\n"), strings.Join(wantEntries, "\n"))
	}
}

func TestConcludeInputAndCount(t *testing.T) {
	tests := []struct {
		name      string
		run       func(r *rig, root agents.Event)
		wantCount int
		wantTail  bool
	}{
		{
			name: "facilitator :end:",
			run: func(r *rig, root agents.Event) {
				r.model.on(elen, templates.PromptDefault, "All clear. :end:")
				r.settle()
			},
			wantCount: 1 + 2, // root (the posted "All clear." is the :end: reply), previous prompt, :end: reply
			wantTail:  true,
		},
		{
			name: "person :end:",
			run: func(r *rig, root agents.Event) {
				r.settle()
				r.send(root.TS, "U1", "Alice", "thanks :end:")
				r.settle()
			},
			wantCount: 3, // root, Elen, the person's :end:
		},
		{
			name: "timeout",
			run: func(r *rig, root agents.Event) {
				r.settle()
				r.clock.Advance(11 * time.Minute)
				r.settle()
			},
			wantCount: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			root := r.send("", "U1", "Alice", "Is claim C1 covered?")
			tt.run(r, root)
			concludes := r.model.calls(elen, templates.PromptConclude)
			if len(concludes) != 1 {
				t.Fatalf("conclude turns = %d, want 1", len(concludes))
			}
			req := concludes[0]
			if !strings.Contains(lastUser(req), fmt.Sprintf("count=%d|", tt.wantCount)) {
				t.Errorf("conclude prompt %q, want count %d", lastUser(req), tt.wantCount)
			}
			n := len(req.Messages)
			endTail := req.Messages[n-2].Role == llm.RoleAssistant && strings.Contains(req.Messages[n-2].Content, agents.EndToken)
			if endTail != tt.wantTail {
				t.Errorf("conclude input tail with :end: = %v, want %v:\n%s", endTail, tt.wantTail, strings.Join(contents(req), "\n"))
			}
			if got := len(r.model.calls(elen, templates.PromptDefault)); tt.name == "person :end:" && got != 1 {
				t.Errorf("default turns = %d; a person's :end: goes straight to conclude", got)
			}
			if !r.chat.reacted(root.TS, "white_check_mark") || r.state(root.TS).Status != agents.StatusConcluded {
				t.Error("not concluded")
			}
			for _, p := range r.chat.texts() {
				if strings.Contains(p, agents.EndToken) {
					t.Errorf("posted %q with :end:", p)
				}
			}
		})
	}
}
