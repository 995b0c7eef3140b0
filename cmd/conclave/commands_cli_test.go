package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// cli runs one conclave command in-process and returns its exit code and
// outputs.
func cli(t *testing.T, environ map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), args, env{
		getenv: func(k string) string { return environ[k] },
		stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""),
	})
	return code, stdout.String(), stderr.String()
}

// writeFiles writes files (slash-separated paths to contents) into a new
// directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const cliConfig = `
[llm]
model = "house-model"
temperature = 0.2

[[agents]]
ens = "elen.acme.137.protocol6022.eth"
name = "Elen"
role = "facilitator"
attributes = { mission = "Runs the claims desk" }

[[agents]]
ens = "claudine.acme.137.protocol6022.eth"
name = "Claudine"
role = "expert"
`

func TestTemplatesCheckCommand(t *testing.T) {
	t.Run("clean repository", func(t *testing.T) {
		code, out, errOut := cli(t, nil, "templates", "check", "--dir", "../../templates/testdata/examples")
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		if !strings.Contains(errOut, "templates check: ok") {
			t.Errorf("stderr = %q", errOut)
		}
	})
	t.Run("syntax error and agent-only field", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{
			"expert/system.tmpl":       "You are an expert.\nAnswer {{if .IsAgent}.\n",
			"facilitator/default.tmpl": "Latest from {{.LatestRequest.Author.EnsDomain}}.\n",
		})
		code, out, _ := cli(t, nil, "templates", "check", "--dir", dir)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		for _, want := range []string{"expert/system.tmpl:2:", "facilitator/default.tmpl:1:", "EnsDomain"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("--strict fails on warnings", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{
			"facilitator/default.tmpl": "About {{.ChanelDescription}}.\n",
		})
		code, out, errOut := cli(t, nil, "templates", "check", "--dir", dir)
		if code != 0 || !strings.Contains(out, "warning: ") || !strings.Contains(out, "ChanelDescription") {
			t.Errorf("without --strict: exit %d, want 0 and a warning\n%s%s", code, out, errOut)
		}
		code, out, errOut = cli(t, nil, "templates", "check", "--strict", "--dir", dir)
		if code != 1 || !strings.Contains(out, "error (--strict): ") || !strings.Contains(out, "ChanelDescription") ||
			!strings.Contains(errOut, "templates check: 0 error(s), 1 warning(s), failed by --strict") {
			t.Errorf("--strict: exit %d, want 1 and the warning as an error\n%s%s", code, out, errOut)
		}
	})
	t.Run("operator variables come from the configuration", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{
			"facilitator/default.tmpl": "For {{.Vars.company}}, ask {{.Vars.escalation}}.\n",
			"conclave.toml":            "[templates.vars]\ncompany = \"Acme\"\n",
		})
		code, out, errOut := cli(t, nil, "templates", "check", "--config", filepath.Join(dir, "conclave.toml"), "--dir", dir)
		if code != 0 || !strings.Contains(out, "the variable escalation") || strings.Contains(out, "the variable company") {
			t.Errorf("exit %d, want 0 and a warning about escalation only\n%s%s", code, out, errOut)
		}
	})
	t.Run("files outside the layout are noted", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{
			"ci.toml":                  "model = \"x\"\n",
			"README.md":                "# prompts\n",
			".gitignore":               "*.out\n",
			"tests/greeting.chat":      "> hello\n",
			"tests/broken.tmpl":        "{{.Broken\n",
			"facilitator/default.tmpl": "Answer the person.\n",
		})
		code, out, errOut := cli(t, nil, "templates", "check", "--strict", "--dir", dir)
		if code != 0 {
			t.Errorf("exit %d, want 0\n%s%s", code, out, errOut)
		}
		for _, f := range []string{"ci.toml", "README.md", ".gitignore", "tests"} {
			if !strings.Contains(errOut, "note: "+filepath.Join(dir, f)+": ignored: ") {
				t.Errorf("no note for %s:\n%s", f, errOut)
			}
		}
	})
	t.Run("a missing built-in partial is named", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"facilitator/system.tmpl": "You are {{template \"self\" .}}.\n"})
		code, out, _ := cli(t, nil, "templates", "check", "--dir", dir)
		if code != 1 || !strings.Contains(out, `template "self" is not defined (a partial of the built-in prompts: copy partials/members.tmpl into this repository's partials/`) {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("usage", func(t *testing.T) {
		if code, _, _ := cli(t, nil, "templates", "lint"); code != 2 {
			t.Errorf("unknown sub-command: exit %d, want 2", code)
		}
	})
}

func TestTemplatesRenderCommand(t *testing.T) {
	cfgDir := writeFiles(t, map[string]string{"config.toml": cliConfig})
	environ := map[string]string{"CONCLAVE_CONFIG": filepath.Join(cfgDir, "config.toml")}
	repo := writeFiles(t, map[string]string{
		"facilitator/default.tmpl": "Decide now about: {{.LatestRequest.Content}}.\n",
	})

	t.Run("the exact request body", func(t *testing.T) {
		code, out, errOut := cli(t, environ, "templates", "render", "--dir", repo,
			"--agent", "Elen.acme.137.protocol6022.eth", "--prompt", "default")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		var body struct {
			Model       string  `json:"model"`
			Temperature float64 `json:"temperature"`
			Messages    []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal([]byte(out), &body); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if body.Model != "house-model" || body.Temperature < 0.19 || body.Temperature > 0.21 {
			t.Errorf("model %q temperature %v", body.Model, body.Temperature)
		}
		n := len(body.Messages)
		if n < 2 || body.Messages[0].Role != "system" || !strings.Contains(body.Messages[0].Content, "Elen") {
			t.Fatalf("messages = %+v", body.Messages)
		}
		if last := body.Messages[n-1]; last.Role != "user" || !strings.HasPrefix(last.Content, "Decide now about: ") {
			t.Errorf("phase prompt = %+v", last)
		}
		if !strings.Contains(errOut, "/chat/completions") {
			t.Errorf("stderr does not say where it would go: %q", errOut)
		}
	})
	t.Run("an expert gets the expert fixture", func(t *testing.T) {
		code, out, errOut := cli(t, environ, "templates", "render", "--agent", "claudine.acme.137.protocol6022.eth", "--prompt", "context-found")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		if !strings.Contains(out, "Claudine") {
			t.Errorf("render does not speak of the agent:\n%s", out)
		}
	})
	// systemPrompt renders a phase prompt of agent with more agents
	// configured, and returns the system prompt of the request.
	systemPrompt := func(t *testing.T, agents, agent, prompt string) string {
		t.Helper()
		dir := writeFiles(t, map[string]string{"config.toml": cliConfig + agents})
		code, out, errOut := cli(t, map[string]string{"CONCLAVE_CONFIG": filepath.Join(dir, "config.toml")},
			"templates", "render", "--agent", agent, "--prompt", prompt)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.Unmarshal([]byte(out), &body); err != nil || len(body.Messages) < 2 {
			t.Fatalf("not a request body (%v):\n%s", err, out)
		}
		return body.Messages[0].Content
	}
	t.Run("the agent's own key format", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"config.toml": cliConfig +
			agentSection("otto.acme.137.protocol6022.eth", "Otto", "expert") + "session_policy = \"pattern\"\nsession_pattern = \"K-[0-9]{4}\"\n"})
		code, out, errOut := cli(t, map[string]string{"CONCLAVE_CONFIG": filepath.Join(dir, "config.toml")},
			"templates", "render", "--agent", "otto.acme.137.protocol6022.eth", "--prompt", "context-not-found")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		if !strings.Contains(out, "Your memory keys have this form: K-[0-9]{4}.") {
			t.Errorf("the threading prompt does not show Otto's session_pattern:\n%s", out)
		}
	})
	t.Run("the agent named, not the fixture's", func(t *testing.T) {
		// The built-in expert fixture is Claudine's; Otto is rendered in
		// her conversation as himself, his mission read whatever the case
		// of its key.
		system := systemPrompt(t, agentSection("otto.acme.137.protocol6022.eth", "Otto", "expert")+
			`attributes = { Mission = "Knows every contract", Expertise = "contracts" }`+"\n",
			"otto.acme.137.protocol6022.eth", "context-found")
		if !strings.HasPrefix(system, "You are Otto (otto.acme.137.protocol6022.eth)") ||
			!strings.Contains(system, "Knows every contract") || !strings.Contains(system, "contracts") {
			t.Errorf("the system prompt is not Otto's:\n%s", system)
		}
		if strings.Contains(system, "You are Claudine") {
			t.Errorf("the fixture's agent is rendered:\n%s", system)
		}
	})
	t.Run("a clone's own human", func(t *testing.T) {
		system := systemPrompt(t, agentSection(hugoENS, "Hugo", "human")+agentSection(hugobotENS, "Hugobot", "clone")+
			fmt.Sprintf("clone_of = %q\n", hugoENS), hugobotENS, "default")
		if !strings.Contains(system, "the digital twin of a person, Hugo ("+hugoENS+")") || strings.Contains(system, "Arnaud (arnaud") {
			t.Errorf("the clone is not rendered as Hugo's twin:\n%s", system)
		}
	})
	t.Run("the profile a turn would use", func(t *testing.T) {
		// agent_settings keys are matched as the engine matches them,
		// whatever their case.
		dir := writeFiles(t, map[string]string{
			"config.toml": cliConfig + `
[llm.profiles.cheap]
model = "cheap-model"

[agent_settings."Arnaud.acme.137.protocol6022.eth"]
llm_profile = "cheap"
`,
			"expert.json": `{"role": "expert"}`,
		})
		code, out, errOut := cli(t, map[string]string{"CONCLAVE_CONFIG": filepath.Join(dir, "config.toml")},
			"templates", "render", "--agent", "arnaud.acme.137.protocol6022.eth", "--prompt", "context-found", "--fixture", filepath.Join(dir, "expert.json"))
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		if !strings.Contains(errOut, `profile "cheap"`) || !strings.Contains(out, `"model": "cheap-model"`) {
			t.Errorf("not rendered with the agent's profile:\n%s%s", errOut, out)
		}
	})
	t.Run("an unknown agent needs a fixture with a role", func(t *testing.T) {
		code, _, errOut := cli(t, environ, "templates", "render", "--agent", "nobody.acme.137.protocol6022.eth", "--prompt", "default")
		if code != 1 || !strings.Contains(errOut, "--fixture with a role") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"templates", "render", "--prompt", "default"},
			{"templates", "render", "--agent", "elen.acme.137.protocol6022.eth"},
			{"templates", "render", "--agent", "elen.acme.137.protocol6022.eth", "--prompt", "system"},
		} {
			if code, _, errOut := cli(t, environ, args...); code != 2 {
				t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
			}
		}
	})
}

func TestMemoryHydrateCommand(t *testing.T) {
	db := redistest.New(t)
	cfgDir := writeFiles(t, map[string]string{
		"config.toml": cliConfig + "\n[memory]\nkey_prefix = \"" + db.Prefix + "\"\n",
		"ok.jsonl":    `{"role":"user","content":"C45653 moved to Lyon."}` + "\n" + `{"role":"assistant","content":"Noted."}` + "\n",
		"bad.jsonl":   `{"role":"user","content":"fine"}` + "\n" + `{"role":"bot","content":"no"}` + "\n",
	})
	environ := map[string]string{"CONCLAVE_CONFIG": filepath.Join(cfgDir, "config.toml"), "REDIS_URL": db.URL}
	store := db.Store(t, memory.Options{})
	ctx := context.Background()

	t.Run("appends a session", func(t *testing.T) {
		code, out, errOut := cli(t, environ, "memory", "hydrate", "--agent", "claudine.acme.137.protocol6022.eth",
			"--session", "C45653", "--file", filepath.Join(cfgDir, "ok.jsonl"))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if !strings.Contains(out, "appended 2 message(s)") {
			t.Errorf("stdout = %q", out)
		}
		got, err := store.ReadSession(ctx, "claudine.acme.137.protocol6022.eth", "C45653", 0)
		if err != nil || len(got) != 2 || got[0].Content != "C45653 moved to Lyon." || got[1].Role != "assistant" {
			t.Errorf("session = %+v, %v", got, err)
		}
	})
	t.Run("a bad line writes nothing", func(t *testing.T) {
		code, _, errOut := cli(t, environ, "memory", "hydrate", "--agent", "claudine.acme.137.protocol6022.eth",
			"--session", "C99999", "--file", filepath.Join(cfgDir, "bad.jsonl"))
		if code != 1 || !strings.Contains(errOut, "bad.jsonl:2:") {
			t.Errorf("exit %d: %s", code, errOut)
		}
		if got, _ := store.ReadSession(ctx, "claudine.acme.137.protocol6022.eth", "C99999", 0); len(got) != 0 {
			t.Errorf("a refused file wrote %d entries", len(got))
		}
	})
	t.Run("group session", func(t *testing.T) {
		group := "arnaud.acme.137.protocol6022.eth,elen.acme.137.protocol6022.eth"
		// memory.clone_scope = "channel" (the default): a group's memory is
		// kept per channel, so the channel must be named.
		code, _, errOut := cli(t, environ, "memory", "hydrate", "--agent", "arnaud.acme.137.protocol6022.eth",
			"--group", group, "--file", filepath.Join(cfgDir, "ok.jsonl"))
		if code != 2 || !strings.Contains(errOut, "--group needs --channel") {
			t.Errorf("without --channel: exit %d: %s", code, errOut)
		}
		code, _, errOut = cli(t, environ, "memory", "hydrate", "--agent", "arnaud.acme.137.protocol6022.eth",
			"--group", group, "--channel", "C1", "--file", filepath.Join(cfgDir, "ok.jsonl"))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		key := agents.GroupSessionID(strings.Split(group, ","))
		if got, _ := store.ReadSession(ctx, "arnaud.acme.137.protocol6022.eth#C1", key, 0); len(got) != 2 {
			t.Errorf("group session %s of C1 holds %d entries", key, len(got))
		}
	})
	t.Run("a session the agent does not read is warned about", func(t *testing.T) {
		for _, tt := range []struct{ args, want string }{
			{"--agent elen.acme.137.protocol6022.eth --session C45653",
				"warning: memory hydrate: elen.acme.137.protocol6022.eth is a facilitator, which reads no memory session"},
			{"--agent claudine.acme.137.protocol6022.eth --channel C1 --group elen.acme.137.protocol6022.eth,claudine.acme.137.protocol6022.eth",
				"warning: memory hydrate: claudine.acme.137.protocol6022.eth is an expert, which reads the session of a key (--session), not a group's"},
		} {
			args := append([]string{"memory", "hydrate", "--file", filepath.Join(cfgDir, "ok.jsonl")}, strings.Fields(tt.args)...)
			code, out, errOut := cli(t, environ, args...)
			if code != 0 || !strings.Contains(errOut, tt.want) || !strings.Contains(out, "appended 2 message(s)") {
				t.Errorf("%s: exit %d, stderr %q; want 0 and %q", tt.args, code, errOut, tt.want)
			}
		}
		if _, _, errOut := cli(t, environ, "memory", "hydrate", "--agent", "claudine.acme.137.protocol6022.eth",
			"--session", "C11111", "--file", filepath.Join(cfgDir, "ok.jsonl")); strings.Contains(errOut, "warning") {
			t.Errorf("an expert's key session: %q", errOut)
		}
	})
	t.Run("refused on the in-process store", func(t *testing.T) {
		noRedis := map[string]string{"CONCLAVE_CONFIG": environ["CONCLAVE_CONFIG"]}
		code, _, errOut := cli(t, noRedis, "memory", "hydrate", "--agent", "claudine.acme.137.protocol6022.eth",
			"--session", "C45653", "--file", filepath.Join(cfgDir, "ok.jsonl"))
		if code != 1 || !strings.Contains(errOut, "memory.redis_url is not set") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
	t.Run("usage", func(t *testing.T) {
		if code, _, _ := cli(t, environ, "memory", "hydrate", "--agent", "x.eth"); code != 2 {
			t.Errorf("exit %d, want 2", code)
		}
	})
}
