package llm_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// A tool round trip: tools offered as function tools, the assistant's
// calls and the tool results sent back in the next request.
func TestToolsOnTheWire(t *testing.T) {
	for _, merge := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "merge_consecutive"}[merge], func(t *testing.T) {
			r := newRig(t, func(p *llm.Profile) { p.MergeConsecutive = merge }, nil)
			r.fake.Reply(llmfake.Text("done"))
			req := ask("who is C42?")
			req.Tools = []llm.Tool{
				{Name: "crm__lookup", Description: "Looks a customer up.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)},
				{Name: "crm__ping"},
			}
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: "quickly"})
			req.ToolRounds = []llm.ToolRound{{
				Calls:   []llm.ToolCall{{ID: "a", Name: "crm__lookup", Arguments: `{"id":"C42"}`}, {ID: "b", Name: "crm__ping", Arguments: `{}`}},
				Results: []string{"Ada, since 2019", "pong"},
			}}
			if _, err := r.client.Complete(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			got := r.fake.Requests()[0]
			wantTools := []llmfake.Tool{
				{Name: "crm__lookup", Description: "Looks a customer up.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)},
				{Name: "crm__ping", Parameters: json.RawMessage(`{"type":"object"}`)},
			}
			if !reflect.DeepEqual(got.Tools, wantTools) {
				t.Errorf("tools = %+v\nwant %+v", got.Tools, wantTools)
			}
			user := []llmfake.Message{{Role: "user", Content: "who is C42?"}, {Role: "user", Content: "quickly"}}
			if merge {
				user = []llmfake.Message{{Role: "user", Content: "who is C42?\n\nquickly"}}
			}
			wantMsgs := append([]llmfake.Message{{Role: "system", Content: "You are Elen."}}, user...)
			wantMsgs = append(wantMsgs, []llmfake.Message{
				{Role: "assistant", ToolCalls: "a crm__lookup {\"id\":\"C42\"}\nb crm__ping {}"},
				{Role: "tool", ToolCallID: "a", Content: "Ada, since 2019"},
				{Role: "tool", ToolCallID: "b", Content: "pong"},
			}...)
			if !reflect.DeepEqual(got.Messages, wantMsgs) {
				t.Errorf("messages = %+v\nwant %+v", got.Messages, wantMsgs)
			}
		})
	}
}

func TestNoToolsNoKey(t *testing.T) {
	r := newRig(t, nil, nil)
	r.fake.Reply(llmfake.Text("hi"))
	if _, err := r.client.Complete(t.Context(), ask("hello")); err != nil {
		t.Fatal(err)
	}
	if got := r.fake.Requests()[0]; got.Has("tools") || got.Tools != nil {
		t.Errorf("a request without tools sent %q", got.Body)
	}
}

func TestToolRoundWithoutResults(t *testing.T) {
	r := newRig(t, nil, nil)
	req := ask("x")
	req.ToolRounds = []llm.ToolRound{{Calls: []llm.ToolCall{{ID: "a", Name: "t"}}}}
	_, err := r.client.Complete(t.Context(), req)
	if err == nil || !strings.Contains(err.Error(), "tool round 0: 1 calls and 0 results") {
		t.Fatalf("err = %v, want the message named", err)
	}
	if n := len(r.fake.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}
