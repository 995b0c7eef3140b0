package agents_test

import (
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// Reasoning and text tool calls are never posted, nor read: a model
// client that speaks to the fake endpoint, the real transport and the
// fake Slack, streamed or not. The reasoning of the think quirks holds
// :end:, a call and a threading object: had anything read it, the
// conversation would have concluded after the first reply.
func TestReasoningNeverPostedNorRead(t *testing.T) {
	const text = "Claim C42 is covered."
	scene := llmfake.Scene{Text: text, Call: facilitator.EnsDomain, Tool: "crm__lookup", Args: `{"id": "C42"}`}
	for _, quirk := range []string{llmfake.QuirkThink, llmfake.QuirkThinking, llmfake.QuirkReasoning,
		llmfake.QuirkReasoningContent, llmfake.QuirkEmptyThink, llmfake.QuirkPythonTag} {
		for _, streamed := range []bool{false, true} {
			name := quirk
			var configure []func(*deliveryRig)
			if streamed {
				name += "/streamed"
				configure = append(configure, streaming(nil)) // the first sentence is shown, then the whole reply
			}
			t.Run(name, func(t *testing.T) {
				r, ctx := startDelivery(t, configure...)
				reply := llmfake.Quirked(quirk, scene)
				want := text
				if quirk == llmfake.QuirkPythonTag {
					// The facilitator has no tools: the call goes, its words stay.
					reply.Content = text + " " + reply.Content
				}
				r.llm.Reply(reply)
				root := r.ask("", "q1")
				r.waitPosts(ctx, root.TS, 1)
				r.ask(root.TS, "q2")
				posts := r.settled(ctx, root.TS, 2)
				holds(t, posts, want, "answer to q2")
				if n := len(r.llm.Requests()); n != 2 {
					t.Errorf("%d model requests, want 2: the first reply was read as more than its text", n)
				}
				for _, u := range r.slack.Updates() {
					if strings.Contains(u.Text, "think") || strings.Contains(u.Text, ":end:") || strings.Contains(u.Text, "python_tag") {
						t.Errorf("an update showed %q", u.Text)
					}
				}
			})
		}
	}
}
