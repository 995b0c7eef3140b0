package templates

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuiltinFixture(t *testing.T) {
	f := BuiltinFixture()
	d := f.Data
	if len(d.ChannelMembers) != 5 || !d.ChannelMembers[0].IsAgent() || d.ChannelMembers[4].IsAgent() {
		t.Fatalf("members: %+v", d.ChannelMembers)
	}
	if d.InitialRequest.Author.IsAgent() || !d.LatestRequest.Author.IsAgent() {
		t.Error("want a person's initial request and an agent's latest")
	}
	if a, ok := d.LatestRequest.Author.AgentInfo(); !ok || a.EnsDomain != "elen.acme.137.protocol6022.eth" {
		t.Errorf("latest author: %+v", a)
	}
	if len(f.Messages) != 2 || len(f.SessionHistory) != 2 || f.Messages[1].Author.Name() != "Elen" {
		t.Errorf("messages %+v, history %+v", f.Messages, f.SessionHistory)
	}
}

// Each role with prompts has a built-in fixture in which the agent itself,
// the first member, has that role, with the session that role runs on.
func TestBuiltinFixtureFor(t *testing.T) {
	for _, role := range Roles() {
		t.Run(role, func(t *testing.T) {
			f := BuiltinFixtureFor(role)
			if f.Role != role || f.Name != "the built-in "+role+" fixture" {
				t.Errorf("role %q, name %q", f.Role, f.Name)
			}
			self, ok := f.Data.ChannelMembers[0].AgentInfo()
			if !ok || self.Attributes["role"] != role {
				t.Errorf("the first member is %+v, want an agent with role %s", self, role)
			}
			if len(f.Messages) == 0 || f.Data.ConversationMessageCount != len(f.Messages) {
				t.Errorf("%d messages, ConversationMessageCount %d", len(f.Messages), f.Data.ConversationMessageCount)
			}
			switch session := f.Data.MemorySessionId; role {
			case RoleFacilitator:
				if session != f.Data.ConversationId {
					t.Errorf("a facilitator's session is the conversation id, not %q", session)
				}
			case RoleClone:
				if !strings.HasPrefix(session, "grp-") || len(session) != len("grp-")+32 {
					t.Errorf("a clone's session is a group id, not %q", session)
				}
			}
		})
	}
	if f := BuiltinFixtureFor("human"); f.Role != RoleExpert {
		t.Errorf("a role without prompts gets the expert fixture, not %q", f.Role)
	}
	if f := BuiltinFixture(); f.Role != RoleExpert {
		t.Errorf("BuiltinFixture is the expert's, not %q", f.Role)
	}
}

func TestLoadFixture(t *testing.T) {
	f, err := LoadFixture("testdata/examples-fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	if f.Role != RoleClone || f.Name != "testdata/examples-fixture.json" || f.Data.LatestRequest.Author.Name() != "Bea Novak" {
		t.Errorf("fixture: %+v", f)
	}
	if _, err := LoadFixture(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseFixtureErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"syntax error names the line", "{\n  \"role\": \"expert\",\n  oops\n}", "f.json:3: invalid character"},
		{"wrong type names the line", "{\n\"ConversationMessageCount\": \"two\"\n}", "f.json:2: json: cannot unmarshal string"},
		{"unknown key", `{"Conversation": "x"}`, `unknown field "Conversation"`},
		{"unknown member key", `{"ChannelMembers": [{"Name": "x", "Role": "expert"}]}`, `unknown field "Role"`},
		{"role without prompts", `{"role": "human"}`, `role "human" has no prompts`},
		{"person with agent fields", `{"ChannelMembers": [{"Name": "Pat", "EnsDomain": "pat.eth"}]}`, `ChannelMembers[0]: member "Pat" has agent fields but IsAgent is false`},
		{"author naming no member", `{"LatestRequest": {"Content": "hi", "Author": "Nobody"}}`, `LatestRequest: author "Nobody" is not the Name or EnsDomain of a channel member`},
		{"message author naming no member", `{"messages": [{"author": "Nobody", "content": "hi"}]}`, `messages[0]: author "Nobody"`},
		{"history role", `{"session_history": [{"role": "tool", "content": "x"}]}`, `session_history[0]: role "tool" is not user, assistant or system`},
		{"person with a key format", `{"ChannelMembers": [{"Name": "Pat", "SessionFormat": "C#####"}]}`, `ChannelMembers[0]: member "Pat" has agent fields but IsAgent is false`},
		{"person's request naming no member", `{"LatestPersonRequest": {"Content": "hi", "Author": "Nobody"}}`, `LatestPersonRequest: author "Nobody" is not the Name or EnsDomain of a channel member`},
		{"unknown conclude reason", `{"ConcludeReason": "timeout"}`, `ConcludeReason "timeout" is not one of end, person, inactivity, max_turns, stalled, budget or empty`},
		{"attribute not a string", `{"ChannelMembers": [{"Name": "A", "IsAgent": true, "Attributes": {"n": 1}}]}`, "cannot unmarshal number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFixture("f.json", []byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// Authors may be given inline, or by the Name or EnsDomain of a member.
func TestParseFixtureAuthors(t *testing.T) {
	body := `{
  "ChannelMembers": [
    {"Name": "Kim", "IsAgent": true, "EnsDomain": "kim.acme.137.protocol6022.eth"},
    {"Name": "Pat"}
  ],
  "InitialRequest": {"Content": "a", "Author": {"Name": "Guest"}},
  "LatestRequest": {"Content": "b", "Author": "KIM.acme.137.protocol6022.eth"},
  "messages": [{"author": "Pat", "content": "c"}, {"author": {"Name": "Bot", "IsAgent": true, "EnsDomain": "bot.eth"}, "content": "d"}]
}`
	f, err := ParseFixture("f.json", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got := []string{
		f.Data.InitialRequest.Author.Name(),
		f.Data.LatestRequest.Author.Name(),
		f.Messages[0].Author.Name(),
		f.Messages[1].Author.Name(),
	}
	if want := "Guest Kim Pat Bot"; strings.Join(got, " ") != want {
		t.Errorf("authors %v, want %s", got, want)
	}
	if !f.Data.LatestRequest.Author.IsAgent() || f.Data.InitialRequest.Author.IsAgent() || !f.Messages[1].Author.IsAgent() {
		t.Error("agent flags lost")
	}
}
