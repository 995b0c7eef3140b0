package fakemodel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents/fakemodel"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
)

const (
	elen     = "elen.acme.137.protocol6022.eth"
	claudine = "claudine.acme.137.protocol6022.eth"
	arnaud   = "arnaud.acme.137.protocol6022.eth"
	twin     = "arnaud-twin.acme.137.protocol6022.eth"
)

type profiles struct{}

func (profiles) Profile(name string) (llm.Profile, error) {
	if name != "" {
		return llm.Profile{}, llm.ErrUnknownProfile
	}
	return llm.Profile{Model: "m"}, nil
}

func directory(_ context.Context, name string) (ens.Agent, error) {
	known := map[string]ens.Agent{
		elen:     {Name: "Elen", EnsDomain: elen, Role: ens.RoleFacilitator},
		claudine: {Name: "Claudine", EnsDomain: claudine, Role: ens.RoleExpert},
		arnaud:   {Name: "Arnaud", EnsDomain: arnaud, Role: ens.RoleHuman},
		twin:     {Name: "Arnaud's twin", EnsDomain: twin, Role: ens.RoleClone, CloneOf: arnaud},
	}
	if a, ok := known[name]; ok {
		return a, nil
	}
	return ens.Agent{}, ens.ErrNotFound
}

// request is a request as the engine builds it: the system prompt, the
// history, the phase prompt.
func request(agent, role, prompt string, history ...string) llm.Request {
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: "You are someone."}}
	for _, h := range history {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: h})
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: "Answer the latest message (from Ada (person))."})
	return llm.Request{Agent: agent, Role: role, Prompt: prompt, Messages: msgs}
}

func TestAnswers(t *testing.T) {
	long := strings.Repeat("é", 79) + "xyz"
	bound := request(claudine, "expert", "context-found", "Ada (person): tell me about C45653")
	bound.Session = "C45653"
	tests := []struct {
		name string
		req  llm.Request
		want string
	}{
		{"facilitator", request(elen, "facilitator", "default", "Ada (person): Is customer C45653 covered?"),
			"(fake model) Elen heard: Is customer C45653 covered? :end:"},
		{"facilitator, the person's request after an agent's reply",
			request(elen, "facilitator", "default", "Ada (person): first", "Ada (person): Is C1 covered?",
				"Claudine ("+claudine+"): it is", "Ada (person): :end:"),
			"(fake model) Elen heard: Is C1 covered? :end:"},
		{"facilitator, a human agent is a person", request(elen, "facilitator", "default",
			"Ada (person): hi", "Arnaud ("+arnaud+"): what about C2?"),
			"(fake model) Elen heard: what about C2? :end:"},
		{"facilitator, 80 characters", request(elen, "facilitator", "default", "Ada (person): "+long),
			"(fake model) Elen heard: " + strings.Repeat("é", 79) + "x :end:"},
		{"facilitator, no person", request(elen, "facilitator", "default"), "(fake model) Elen heard: :end:"},
		{"conclude", request(elen, "facilitator", "conclude", "Ada (person): hi"), "(fake model) summary"},
		{"threading by the agent's pattern", request(claudine, "expert", "context-not-found",
			"Ada (person): claim CLM-1 of C456 or customer C45653?"), `{"session":"C45653","message":""}`},
		{"threading, no word matches", request(claudine, "expert", "context-not-found", "Ada (person): who are you?"),
			`{"session":"","message":""}`},
		{"threading by the default pattern", request("victor.acme.137.protocol6022.eth", "expert", "context-not-found",
			"Ada (person): about claim CLM-123456, please."), `{"session":"CLM-123456","message":""}`},
		{"an expert's answer", bound, "(fake model) Claudine on C45653"},
		{"a clone", request(twin, "clone", "default", "Ada (person): hi"), "(fake model) Arnaud's twin for Arnaud"},
	}
	m, err := fakemodel.New(fakemodel.Options{Profiles: profiles{}, Agents: directory,
		Patterns: map[string]string{claudine: "C[0-9]{5}"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := m.Complete(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != tt.want {
				t.Errorf("content %q, want %q", resp.Content, tt.want)
			}
			if resp.FinishReason != llm.FinishStop || resp.Attempts != 1 || resp.Model != fakemodel.ModelName {
				t.Errorf("response %+v", resp)
			}
		})
	}
}

// TestProfilesAndErrors: profiles come from the configured ones, a bad
// pattern is an error naming its agent, and an ended context fails the
// call.
func TestProfilesAndErrors(t *testing.T) {
	m, err := fakemodel.New(fakemodel.Options{Profiles: profiles{}, Agents: directory})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Profile("cheap"); !errors.Is(err, llm.ErrUnknownProfile) {
		t.Errorf("Profile(cheap) error %v, want llm.ErrUnknownProfile", err)
	}
	if _, err := fakemodel.New(fakemodel.Options{Patterns: map[string]string{claudine: "C[0-9"}}); err == nil ||
		!strings.Contains(err.Error(), "session pattern of "+claudine) {
		t.Errorf("bad pattern: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Complete(ctx, request(elen, "facilitator", "default")); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
}
