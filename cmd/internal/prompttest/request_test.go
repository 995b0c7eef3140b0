package prompttest

import (
	"encoding/json"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
)

func TestRenderRequest(t *testing.T) {
	temp := 0.2
	r := llm.Request{
		Agent: "claudine.acme.137.protocol6022.eth", Role: "expert", Prompt: "context-not-found",
		Profile: "cheap", Model: "small", Temperature: &temp, MaxTokens: 300, JSON: true,
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "You are Claudine. Answer briefly.\n"}, {Role: llm.RoleUser, Content: "Which customer?"}},
		Tools:    []llm.Tool{{Name: "crm__lookup", Description: "Look a customer up.", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ToolRounds: []llm.ToolRound{{
			Calls:   []llm.ToolCall{{ID: "1", Name: "crm__lookup", Arguments: `{"id":"C45653"}`}},
			Results: []string{"gold cover"},
		}},
	}
	want := `agent: claudine.acme.137.protocol6022.eth
role: expert
prompt: context-not-found
profile: cheap
model: small
temperature: 0.2
max_tokens: 300
json: true

===== system =====
You are Claudine.
  Answer briefly.

===== user =====
Which customer?

===== tool crm__lookup =====
Look a customer up.
{
  "type": "object"
}

===== assistant (tool calls) =====
call crm__lookup {
  "id": "C45653"
}

===== tool result crm__lookup =====
gold cover
`
	if got := RenderRequest(r); got != want {
		t.Errorf("got:\n%s\nwant:\n%s\n%s", got, want, UnifiedDiff("want", want, "got", got))
	}
	bare := RenderRequest(llm.Request{Agent: "elen.acme.137.protocol6022.eth", Role: "facilitator", Prompt: "default"})
	if bare != "agent: elen.acme.137.protocol6022.eth\nrole: facilitator\nprompt: default\n" {
		t.Errorf("a request that sets nothing: %q", bare)
	}
}
