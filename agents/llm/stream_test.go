package llm_test

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// texts records what Stream shows of a reply as it grows.
type texts struct{ seen []string }

func (x *texts) on(s string) { x.seen = append(x.seen, s) }

func TestStreamGrowsToTheWholeReply(t *testing.T) {
	r := newRig(t, nil, nil)
	r.fake.Reply(llmfake.Reply{Content: "Hello there. How are you?", Chunks: []string{"Hello", " there.", " How are", " you?"},
		PromptTokens: 7, CompletionTokens: 5})
	var x texts
	resp, err := r.client.Stream(t.Context(), ask("hi"), x.on)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Hello", "Hello there.", "Hello there. How are", "Hello there. How are you?"}
	if !reflect.DeepEqual(x.seen, want) {
		t.Errorf("onText saw %q, want %q", x.seen, want)
	}
	if resp.Content != "Hello there. How are you?" || resp.FinishReason != llm.FinishStop || resp.Attempts != 1 {
		t.Errorf("response = %+v", resp)
	}
	if resp.PromptTokens != 7 || resp.CompletionTokens != 5 {
		t.Errorf("usage = %d/%d, want 7/5 from the stream's usage chunk", resp.PromptTokens, resp.CompletionTokens)
	}
	got := r.fake.Requests()[0]
	if !got.Stream || !got.IncludeUsage {
		t.Errorf("request stream=%v include_usage=%v, want both", got.Stream, got.IncludeUsage)
	}
}

// The streamed and the plain call of one scripted reply give the same
// Response content: the engine's final text does not depend on streaming.
func TestStreamEqualsComplete(t *testing.T) {
	for _, reply := range []llmfake.Reply{
		llmfake.Text("Plain `<code>` & more — ünïcode ✓.\n\nSecond paragraph."),
		llmfake.Truncated("Cut in the midd"),
	} {
		r := newRig(t, nil, nil)
		r.fake.Reply(reply, reply)
		plain, err := r.client.Complete(t.Context(), ask("hi"))
		if err != nil {
			t.Fatal(err)
		}
		streamed, err := r.client.Stream(t.Context(), ask("hi"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if plain.Content != streamed.Content || plain.FinishReason != streamed.FinishReason || plain.Truncated() != streamed.Truncated() {
			t.Errorf("plain %+v\nstreamed %+v", plain, streamed)
		}
	}
}

func TestStreamToolCallsAreNotShown(t *testing.T) {
	r := newRig(t, nil, nil)
	reply := llmfake.Calls(llmfake.Call("crm__lookup", `{"id":"C42"}`), llmfake.Call("crm__ping", ""))
	reply.Content = "Let me look."
	r.fake.Reply(reply)
	req := ask("who is C42?")
	req.Tools = []llm.Tool{{Name: "crm__lookup"}, {Name: "crm__ping"}}
	var x texts
	resp, err := r.client.Stream(t.Context(), req, x.on)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ToolCall{{ID: "call_1", Name: "crm__lookup", Arguments: `{"id":"C42"}`}, {ID: "call_2", Name: "crm__ping", Arguments: "{}"}}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", resp.ToolCalls, want)
	}
	if resp.Content != "Let me look." || resp.FinishReason != "tool_calls" {
		t.Errorf("response = %+v", resp)
	}
	if len(x.seen) == 0 || x.seen[len(x.seen)-1] != "Let me look." {
		t.Errorf("onText saw %q: the content before the calls is shown", x.seen)
	}
}

// A stream cut before its finish is retried from the start: onText sees
// the text start over, and the reply is the complete one.
func TestStreamCutIsRetried(t *testing.T) {
	r := newRig(t, nil, nil)
	r.fake.Reply(
		llmfake.Reply{Content: "Half a rep", Chunks: []string{"Half", " a rep"}, Cut: true},
		llmfake.Reply{Content: "Whole reply.", Chunks: []string{"Whole", " reply."}},
	)
	var x texts
	resp, err := r.client.Stream(t.Context(), ask("hi"), x.on)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Whole reply." || resp.Attempts != 2 {
		t.Errorf("response = %+v, want the second attempt's whole reply", resp)
	}
	if want := []string{"Half", "Half a rep", "Whole", "Whole reply."}; !reflect.DeepEqual(x.seen, want) {
		t.Errorf("onText saw %q, want %q", x.seen, want)
	}
	if !strings.Contains(r.logs.String(), `reason="connection failed"`) {
		t.Errorf("the cut was not retried as a connection failure:\n%s", r.logs)
	}
}

func TestStreamErrorsAreComplete(t *testing.T) {
	r := newRig(t, func(p *llm.Profile) { p.MaxRetries = 0 }, nil)
	r.fake.Reply(llmfake.Error(http.StatusBadRequest, "bad request"))
	var x texts
	_, err := r.client.Stream(t.Context(), ask("hi"), x.on)
	var e *llm.Error
	if !errors.As(err, &e) || e.Reason != llm.ReasonRejected || e.Status != http.StatusBadRequest {
		t.Fatalf("err = %v, want a rejected *llm.Error", err)
	}
	if len(x.seen) != 0 {
		t.Errorf("onText saw %q of a failed call", x.seen)
	}
}
