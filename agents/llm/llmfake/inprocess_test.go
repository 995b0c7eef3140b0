package llmfake_test

import (
	"context"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// The server answers a client in process, without its listener: the
// reply scripted, the request recorded, a quirk handled by the client as
// over the network.
func TestServerAnswersInProcess(t *testing.T) {
	srv := llmfake.New(t)
	srv.Reply(llmfake.Quirked(llmfake.QuirkThink, llmfake.Scene{Text: "Covered."}))
	client, err := llm.New(llm.Profile{BaseURL: "http://nowhere.invalid/v1", Model: "m"}, nil, llm.WithHTTPClient(srv))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Is it covered?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Covered." || resp.Reasoning == "" {
		t.Errorf("reply %q with reasoning %q, want %q with the reasoning apart", resp.Content, resp.Reasoning, "Covered.")
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Model != "m" {
		t.Errorf("the server recorded %+v, want one request for model m", reqs)
	}
}
