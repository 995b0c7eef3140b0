package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testlog"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// runChatScript runs `conclave chat` in-process with stdin the script and
// returns its exit code, stdout and stderr.
func runChatScript(t *testing.T, script string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr testlog.Buffer
	e := env{
		getenv: func(k string) string {
			if k == "USER" {
				return "ada"
			}
			return ""
		},
		stdout: &stdout,
		stderr: &stderr,
		stdin:  strings.NewReader(script),
	}
	code := runMain(waitCtx(t), append([]string{"chat"}, args...), e)
	return code, stdout.String(), stderr.String()
}

// TestChatScripted runs a scripted conversation through `conclave chat`:
// the facilitator answers, calls an expert, who picks a memory key and
// answers, the facilitator answers again; /end concludes. Each line waits
// for the agents to settle, so the model calls come in this order and
// stdout is the transcript.
func TestChatScripted(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	model := newCast(map[string][]string{
		"Elen/default": {
			"Let me ask " + claudineENS + ": what cover does customer C45653 have?",
			"C45653 has gold cover, so claim CLM-1 is covered.",
		},
		"Claudine/context-not-found": {`{"session": "C45653", "message": ""}`},
		"Claudine/context-found":     {"C45653 holds the gold cover since 2021."},
		"Elen/conclude":              {"Conclusion: CLM-1 is covered under gold."},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	path := r.config(t, claimsDesk)

	code, stdout, stderr := runChatScript(t, "Is claim CLM-1 of customer C45653 covered?\n\n/end\n", "--config", path, "--as", "Ada")
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	checkCalls(t, model,
		"Elen/default", "Claudine/context-not-found", "Claudine/context-found", "Elen/default", "Elen/conclude")
	want := strings.Join([]string{
		"Elen: Let me ask " + claudineENS + ": what cover does customer C45653 have?",
		"Claudine: C45653 holds the gold cover since 2021.",
		"Elen: C45653 has gold cover, so claim CLM-1 is covered.",
		"Elen: Conclusion: CLM-1 is covered under gold.",
	}, "\n") + "\n"
	if stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", stdout, want, stderr)
	}
	for _, s := range []string{"… Elen is thinking", "… Claudine is thinking", "✅"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr)
		}
	}
	reqs := r.llm.Requests()
	if len(reqs) == 0 || !strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Content, "Is claim CLM-1 of customer C45653 covered?") {
		t.Errorf("the first request does not carry the person's line")
	}
	for _, req := range reqs {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "Ada: ") || strings.Contains(m.Content, "Ada (") {
				return // the person is named as --as says
			}
		}
	}
	t.Errorf("no request names the person as Ada")
}

func TestChatBadInput(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	r.llm.Handle(newCast(map[string][]string{"Elen/default": {"Hello."}}, "Elen").reply)
	path := r.config(t, claimsDesk)
	noChannels := r.config(t, "[[channels]]\nid = \"C0009\"\nagents = []\n")
	bare := filepath.Join(t.TempDir(), "bare.toml")
	if err := os.WriteFile(bare, []byte("[llm]\nbase_url = \""+r.llm.URL()+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		script   string
		args     []string
		code     int
		inStderr string
	}{
		{"unknown command in a script", "hello\n/frobnicate now\n", []string{"--config", path}, 1,
			"line 2: unknown command /frobnicate (commands: /end, /new, /trace, /help, /quit)"},
		{"a channel without agents", "hello\n", []string{"--config", path, "--channel", "C0404"}, 2,
			`channel "C0404" has no agents`},
		{"a channel declared empty", "hello\n", []string{"--config", noChannels}, 2, `channel "C0009" has no agents`},
		{"an argument", "", []string{"--config", path, "extra"}, 2, `unexpected argument "extra"`},
		{"no channel at all", "hello\n", []string{"--config", bare}, 2, "no channel: pass --channel or declare one in [[channels]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runChatScript(t, tt.script, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.inStderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q (stdout %q)", code, stderr, tt.code, tt.inStderr, stdout)
			}
		})
	}
}

// TestChatNewThread: /new starts another conversation, which the
// facilitator opens afresh.
func TestChatNewThread(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	model := newCast(map[string][]string{"Elen/default": {"First answer.", "Second answer."}}, "Elen")
	r.llm.Handle(model.reply)
	path := r.config(t, claimsDesk)
	code, stdout, stderr := runChatScript(t, "first question\n/new\nsecond question\n", "--config", path)
	if code != 0 || stdout != "Elen: First answer.\nElen: Second answer.\n" {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	for _, m := range reqs[1].Messages {
		if strings.Contains(m.Content, "first question") || strings.Contains(m.Content, "First answer") {
			t.Errorf("the second thread's request holds the first thread: %q", m.Content)
		}
	}
}

// TestChatLeavesSlackConversationsAlone: `conclave chat` on the Redis of a
// running conclave works on its own thread only; a Slack conversation
// waiting in the store stays due for the bot.
func TestChatLeavesSlackConversationsAlone(t *testing.T) {
	db := redistest.New(t)
	store := db.Store(t, memory.Options{})
	ctx := waitCtx(t)
	slackThread := "1700000000.000100"
	slackConv := agents.ConversationID(testTeam, testChannel, slackThread)
	if _, err := store.RecordMessage(ctx, memory.Conversation{ID: slackConv, Team: testTeam, Channel: testChannel, ThreadTS: slackThread},
		memory.Message{TS: slackThread, UserID: testPerson, Kind: "person", Text: "a question asked in Slack", At: time.Now()}, "Ev1"); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, fakeslack.Options{})
	model := newCast(map[string][]string{"Elen/default": {"Hello from the terminal."}}, "Elen")
	r.llm.Handle(model.reply)
	path := r.config(t, redisSection(db.URL, db.Prefix)+claimsDesk)

	code, stdout, stderr := runChatScript(t, "a question from the terminal\n", "--config", path)
	if code != 0 || stdout != "Elen: Hello from the terminal.\n" {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	checkCalls(t, model, "Elen/default")
	for _, req := range r.llm.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "asked in Slack") {
				t.Errorf("the terminal's engine worked on the Slack conversation: %q", m.Content)
			}
		}
	}
	due, err := store.Due(ctx, time.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(due, slackConv) {
		t.Errorf("due = %v, want the Slack conversation still waiting for the bot", due)
	}
}

// TestChatReloadsTemplates: a template saved while `conclave chat` runs is
// used by the next turns.
func TestChatReloadsTemplates(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	r.llm.Handle(func(llmfake.Request) llmfake.Reply { return llmfake.Text("ok") })
	path := r.config(t, "")
	system := filepath.Join(filepath.Dir(path), "no-templates", "facilitator", "system.tmpl")
	write := func(body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(system), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(system, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("You are Elen, first version.")

	in, script := io.Pipe()
	var stdout, stderr testlog.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- runMain(waitCtx(t), []string{"chat", "--config", path}, env{getenv: func(string) string { return "" },
			stdout: &stdout, stderr: &stderr, stdin: in})
	}()
	// However the test ends, the input ends first, so that the session
	// exits before the fakes close.
	t.Cleanup(func() {
		script.Close()
		if code := <-exit; code != 0 {
			t.Errorf("exit %d:\n%s", code, stderr.String())
		}
	})
	ctx := waitCtx(t)
	// say sends a line and waits for the facilitator's answer to it.
	say := func(n int) string {
		t.Helper()
		if _, err := fmt.Fprintf(script, "message %d\n", n); err != nil {
			t.Fatal(err)
		}
		for strings.Count(stdout.String(), "Elen: ok\n") < n {
			select {
			case <-ctx.Done():
				t.Fatalf("no answer to line %d:\n%s\n%s", n, stdout.String(), stderr.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
		reqs := r.llm.Requests()
		return reqs[len(reqs)-1].Messages[0].Content
	}
	if got := say(1); got != "You are Elen, first version." {
		t.Fatalf("system prompt = %q, want the first version", got)
	}
	// The configuration logs at debug level: the library says when it
	// loaded the repository, once at the start and once per change.
	loads := strings.Count(stderr.String(), "templates: loaded")
	write("You are Elen, second version.")
	for strings.Count(stderr.String(), "templates: loaded") == loads {
		select {
		case <-ctx.Done():
			t.Fatalf("the edited template was not reloaded:\n%s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := say(2); got != "You are Elen, second version." {
		t.Errorf("system prompt = %q after the edit, want the second version", got)
	}
}

// TestChatScriptFailsOnNotice: a scripted conversation in which turns
// ended with a ⚠️ notice exits 1, its last line saying how many.
func TestChatScriptFailsOnNotice(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	r.llm.Handle(func(llmfake.Request) llmfake.Reply { return llmfake.Error(400, "bad request") })
	path := r.config(t, claimsDesk)
	code, stdout, stderr := runChatScript(t, "first question\n/new\nsecond question\n", "--config", path)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if last := lines[len(lines)-1]; code != 1 || last != "conclave: chat: 2 turn(s) ended with a ⚠️ notice" {
		t.Errorf("exit %d, last line %q; want 1 and the count\nstdout:\n%s\nstderr:\n%s", code, last, stdout, stderr)
	}
	if strings.Count(stdout, "⚠️ Elen could not answer") != 2 {
		t.Errorf("stdout:\n%s", stdout)
	}
}
