package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// TestRequestBodyIsWhatIsSent: the body shown to operators is the one the
// endpoint receives, whitespace aside.
func TestRequestBodyIsWhatIsSent(t *testing.T) {
	fake := llmfake.New(t)
	fake.Reply(llmfake.Text("ok"))
	zero := 0.0
	c, err := llm.New(llm.Profile{BaseURL: fake.URL(), APIKey: "sk-test", Model: "fake-model", Temperature: &zero, MaxTokens: 99, JSONMode: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{JSON: true, Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You are <Elen>."},
		{Role: llm.RoleUser, Content: "a & b"},
	}}
	url, body, err := c.RequestBody(req)
	if err != nil {
		t.Fatal(err)
	}
	if url != fake.URL()+"/chat/completions" {
		t.Errorf("url = %q", url)
	}
	if bytes.Contains(body, []byte("sk-test")) {
		t.Error("the body holds the API key")
	}
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sent := fake.Requests()[0].Body
	var a, b bytes.Buffer
	if err := json.Compact(&a, body); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&b, sent); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("shown body\n%s\ndiffers from sent body\n%s", a.String(), b.String())
	}
}

func TestRequestBodyUnknownProfile(t *testing.T) {
	c, err := llm.New(llm.Profile{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.RequestBody(llm.Request{Profile: "nope", Messages: []llm.Message{{Role: "user", Content: "x"}}}); err == nil {
		t.Error("unknown profile accepted")
	}
}

// TestResponseCarriesSentBody: a response holds the body the endpoint
// received, byte for byte, streamed or not, and never the API key.
func TestResponseCarriesSentBody(t *testing.T) {
	fake := llmfake.New(t)
	c, err := llm.New(llm.Profile{BaseURL: fake.URL(), APIKey: "sk-test", Model: "fake-model"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}}
	for i, call := range []func() (llm.Response, error){
		func() (llm.Response, error) { return c.Complete(t.Context(), req) },
		func() (llm.Response, error) { return c.Stream(t.Context(), req, func(string) {}) },
	} {
		fake.Reply(llmfake.Text("ok"))
		resp, err := call()
		if err != nil {
			t.Fatal(err)
		}
		sent := fake.Requests()[i].Body
		if !bytes.Equal(resp.Sent, sent) {
			t.Errorf("call %d: Response.Sent\n%s\nwant what the endpoint received\n%s", i, resp.Sent, sent)
		}
		if bytes.Contains(resp.Sent, []byte("sk-test")) {
			t.Errorf("call %d: the body holds the API key", i)
		}
	}
}
