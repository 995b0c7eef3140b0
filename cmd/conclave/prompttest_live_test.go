package main

import (
	"os"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
)

// liveRepo is promptRepo with llmfake as the configured endpoint: the
// "real" model of `templates test --live`. Elen answers every request
// with answer; the judge's requests get verdict.
func liveRepo(t *testing.T, chat, answer, verdict string) (config string, fake *llmfake.Server) {
	t.Helper()
	config, _ = promptRepo(t, map[string]string{"live.chat": chat})
	body, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	fake = llmfake.New(t)
	body = []byte(strings.Replace(string(body), "http://127.0.0.1:9/v1", fake.URL(), 1))
	if err := os.WriteFile(config, body, 0o600); err != nil {
		t.Fatal(err)
	}
	fake.Handle(func(r llmfake.Request) llmfake.Reply {
		if isJudge(r) {
			return llmfake.Text(verdict)
		}
		return llmfake.Text(answer)
	})
	return config, fake
}

func isJudge(r llmfake.Request) bool {
	return len(r.Messages) == 1 && strings.Contains(r.Messages[0].Content, "The rubric: ")
}

const liveChat = `# Played against the configured model: the "<" and "=" lines are for the scripted runs.
> Ada: Is claim CLM-1 of customer C45653 covered?
< elen: a scripted reply the live run never posts
= Elen: a scripted expectation the live run does not check
? Elen: contains "covered"
? Elen: matches /CLM-\d+/
? Elen: judge "says plainly whether the claim is covered"
`

// TestTemplatesTestLive: --live plays the conversation against the
// endpoint, checks the assertions on the posts (a judge's request carries
// the rubric and the post), and exits 0; a failing not contains and a
// judge's FAIL exit 1 with the diff-like message.
func TestTemplatesTestLive(t *testing.T) {
	const answer = "🧭 CLM-1 is covered under the gold cover of C45653."
	t.Run("passing", func(t *testing.T) {
		config, fake := liveRepo(t, liveChat, answer, "PASS: it says the claim is covered.")
		code, stdout, stderr := cli(t, nil, "templates", "test", "--live", "-v", "--config", config)
		if code != 0 || !strings.HasSuffix(stdout, "\n1 passed, 0 failed\n") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if strings.Contains(stdout, "a scripted reply the live run never posts") {
			t.Errorf("a scripted reply was posted live:\n%s", stdout)
		}
		for _, want := range []string{`? Elen: contains "covered" → pass`, `? Elen: matches /CLM-\d+/ → pass`, `→ pass (it says the claim is covered.)`} {
			if !strings.Contains(stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, stdout)
			}
		}
		var judged int
		for _, r := range fake.Requests() {
			if !isJudge(r) {
				continue
			}
			judged++
			prompt := r.Messages[0].Content
			if !strings.Contains(prompt, "The rubric: says plainly whether the claim is covered") || !strings.Contains(prompt, answer) {
				t.Errorf("the judge's request lacks the rubric or the post:\n%s", prompt)
			}
			// 0 goes on the wire as the smallest float32 (see llm.wireTemperature).
			if r.Temperature == nil || *r.Temperature > 1e-6 {
				t.Errorf("the judge's temperature is not 0: %v", r.Temperature)
			}
		}
		if judged != 1 {
			t.Errorf("%d judge requests, want 1", judged)
		}
	})
	t.Run("failing", func(t *testing.T) {
		chat := "> Ada: Is claim CLM-1 covered?\n? Elen: not contains \"gold\"\n? Elen: judge \"apologises\"\n"
		config, _ := liveRepo(t, chat, answer, "**FAIL** - it does not apologise.")
		code, stdout, stderr := cli(t, nil, "templates", "test", "--live", "--config", config)
		if code != 1 || !strings.HasSuffix(stdout, "\n0 passed, 1 failed\n") {
			t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		for _, want := range []string{
			`live.chat:2: ? Elen: not contains "gold": failed`,
			`- want: no post containing "gold"`,
			`+ got:  "🧭 CLM-1 is covered under the [[gold]] cover of C45653."`,
			`live.chat:3: ? Elen: judge "apologises": the judge says FAIL: it does not apologise.`,
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, stdout)
			}
		}
	})
	t.Run("a repository's judge prompt", func(t *testing.T) {
		config, fake := liveRepo(t, "> Ada: Is CLM-1 covered?\n? Elen: judge \"is short\"\n", answer, "pass: short enough")
		dir := strings.TrimSuffix(config, "config.toml") + "templates/tests/"
		if err := os.WriteFile(dir+"judge.tmpl", []byte("Grade {{.Agent}}: {{.Post}} The rubric: {{.Rubric}}. Say pass or fail."), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, stdout, stderr := cli(t, nil, "templates", "test", "--live", "--config", config); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
		var prompts []string
		for _, r := range fake.Requests() {
			if isJudge(r) {
				prompts = append(prompts, r.Messages[0].Content)
			}
		}
		if want := "Grade Elen: " + answer + " The rubric: is short. Say pass or fail."; len(prompts) != 1 || prompts[0] != want {
			t.Errorf("judge prompts %q, want [%q]", prompts, want)
		}
	})
	t.Run("without --live the assertions are parsed and ignored", func(t *testing.T) {
		config, _ := promptRepo(t, map[string]string{"live.chat": "> Ada: hello\n< elen: Hello.\n? Elen: not contains \"Hello\"\n"})
		code, stdout, stderr := cli(t, nil, "templates", "test", "-update", "--config", config)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
		config, _ = promptRepo(t, map[string]string{"bad.chat": "> Ada: hello\n< elen: Hello.\n? Elen: resembles \"Hello\"\n"})
		code, stdout, _ = cli(t, nil, "templates", "test", "-update", "--config", config)
		if code != 1 || !strings.Contains(stdout, `bad.chat:3: expected contains "text", not contains "text", matches /regular expression/ or judge "rubric"`) {
			t.Errorf("a malformed assertion: exit %d\n%s", code, stdout)
		}
	})
}
