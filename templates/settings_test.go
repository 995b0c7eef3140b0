package templates

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestSettingsMergeAgentRoleAll(t *testing.T) {
	set := open(t, writeRepo(t, map[string]string{
		"agents/" + testAgent + "/system.toml": `model = "agent-model"`,
		"expert/system.toml":                   "model = \"role-model\"\ntemperature = 0.3",
		"all/system.toml":                      "max_tokens = 100\ninclude_history = false\nllm_profile = \"cheap\"",
		// Settings apply without a template beside them at that level.
		"agents/" + testAgent + "/context-found.toml": "max_input_tokens = 8000",
		// json = false overrides the built-in json = true.
		"expert/context-not-found.toml": "json = false",
		// A role gets tools; one of its prompts takes them away.
		"facilitator/system.toml":   `tools = ["crm", "search/fetch_page"]`,
		"facilitator/conclude.toml": `tools = []`,
	})).Current()
	tests := []struct {
		agent, role, prompt string
		want                Settings
	}{
		{testAgent, RoleExpert, PromptSystem, Settings{LLMProfile: "cheap", Model: "agent-model", Temperature: ptr(0.3), MaxTokens: 100, IncludeHistory: ptr(false)}},
		{strings.ToUpper(testAgent), RoleExpert, PromptSystem, Settings{LLMProfile: "cheap", Model: "agent-model", Temperature: ptr(0.3), MaxTokens: 100, IncludeHistory: ptr(false)}},
		{"marc.acme.137.protocol6022.eth", RoleExpert, PromptSystem, Settings{LLMProfile: "cheap", Model: "role-model", Temperature: ptr(0.3), MaxTokens: 100, IncludeHistory: ptr(false)}},
		{"elen.acme.137.protocol6022.eth", RoleFacilitator, PromptSystem, Settings{LLMProfile: "cheap", MaxTokens: 100, IncludeHistory: ptr(false), Tools: &[]string{"crm", "search/fetch_page"}}},
		{testAgent, RoleExpert, PromptContextFound, Settings{MaxInputTokens: 8000}},
		{testAgent, RoleExpert, PromptContextNotFound, Settings{JSON: ptr(false)}},
		{testAgent, RoleClone, PromptDefault, Settings{}},
		{"elen.acme.137.protocol6022.eth", RoleFacilitator, PromptDefault, Settings{}},
		{"elen.acme.137.protocol6022.eth", RoleFacilitator, PromptConclude, Settings{Tools: &[]string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.agent+"/"+tt.role+"/"+tt.prompt, func(t *testing.T) {
			got, err := set.Settings(tt.agent, tt.role, tt.prompt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %s, want %s", describe(got), describe(tt.want))
			}
		})
	}
}

func describe(s Settings) string {
	deref := func(p any) any {
		if v := reflect.ValueOf(p); !v.IsNil() {
			return v.Elem().Interface()
		}
		return "unset"
	}
	return fmt.Sprintf("{profile=%q model=%q temperature=%v max_tokens=%d max_input_tokens=%d include_history=%v json=%v tools=%v}",
		s.LLMProfile, s.Model, deref(s.Temperature), s.MaxTokens, s.MaxInputTokens, deref(s.IncludeHistory), deref(s.JSON), deref(s.Tools))
}

// A broken settings file fails the prompt; it is never skipped in favour
// of a lower level, and its error names the file and line.
func TestSettingsErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		agent string
		role  string
		want  string // the error, $DIR for the repository
	}{
		{
			name:  "unknown key at the agent level",
			files: map[string]string{"agents/" + testAgent + "/system.toml": "model = \"x\"\ntemprature = 0.2", "expert/system.toml": `model = "fine"`},
			agent: testAgent, role: RoleExpert,
			want: `$DIR/agents/` + testAgent + `/system.toml:2: unknown key "temprature" (keys: ` + settingsKeys + `)`,
		},
		{
			name:  "wrong type at the role level",
			files: map[string]string{"expert/system.toml": `temperature = "warm"`},
			agent: testAgent, role: RoleExpert,
			want: `$DIR/expert/system.toml:1: temperature must be a number, not a TOML string`,
		},
		{
			name:  "syntax error at the all level",
			files: map[string]string{"all/system.toml": "model = \n", "agents/" + testAgent + "/system.toml": `model = "x"`},
			agent: testAgent, role: RoleClone,
			want: `$DIR/all/system.toml:1: `,
		},
		{
			name:  "temperature out of range",
			files: map[string]string{"expert/system.toml": "# comment\ntemperature = 2.5"},
			agent: testAgent, role: RoleExpert,
			want: `$DIR/expert/system.toml:2: temperature must be between 0 and 2`,
		},
		{
			name:  "negative token counts",
			files: map[string]string{"expert/system.toml": "max_tokens = -1\nmax_input_tokens = -5"},
			agent: testAgent, role: RoleExpert,
			want: "$DIR/expert/system.toml:1: max_tokens must not be negative\n$DIR/expert/system.toml:2: max_input_tokens must not be negative",
		},
		{
			name:  "malformed tool entry",
			files: map[string]string{"expert/system.toml": "\ntools = [\"crm\", \"CRM Tools\"]"},
			agent: testAgent, role: RoleExpert,
			want: `$DIR/expert/system.toml:2: tools entry "CRM Tools" is not "server" or "server/tool" (server names are [a-z0-9_-]+)`,
		},
		{
			name:  "tools not a list",
			files: map[string]string{"expert/system.toml": `tools = "crm"`},
			agent: testAgent, role: RoleExpert,
			want: `$DIR/expert/system.toml:1: `,
		},
		{
			name:  "human role",
			files: map[string]string{},
			agent: testAgent, role: "human",
			want: `templates: role "human" has no prompts`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeRepo(t, tt.files)
			_, err := open(t, dir).Current().Settings(tt.agent, tt.role, PromptSystem)
			if err == nil {
				t.Fatal("no error")
			}
			if got := strings.ReplaceAll(err.Error(), dir, "$DIR"); !strings.HasPrefix(got, tt.want) {
				t.Errorf("error:\n%s\nwant it to start with:\n%s", got, tt.want)
			}
		})
	}
}

// Other agents, and prompts whose chain does not hold the broken file,
// keep their settings.
func TestBrokenSettingsFailOnlyTheirChain(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "agents/"+testAgent+"/system.toml"), "nope = 1")
	writeFile(t, filepath.Join(dir, "expert/system.toml"), `model = "role"`)
	set := open(t, dir).Current()
	if _, err := set.Settings(testAgent, RoleExpert, PromptSystem); err == nil {
		t.Error("the agent with the broken file got settings")
	}
	got, err := set.Settings("marc.acme.137.protocol6022.eth", RoleExpert, PromptSystem)
	if err != nil || got.Model != "role" {
		t.Errorf("another agent: %+v, %v; want model role", got, err)
	}
	if _, err := set.Settings(testAgent, RoleExpert, PromptContextFound); err != nil {
		t.Errorf("another prompt of the agent: %v", err)
	}
}
