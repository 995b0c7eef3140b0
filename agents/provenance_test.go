package agents_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/templates"
)

// commitPrompts makes dir a git repository whose one commit holds a
// facilitator prompt, and returns the commit.
func commitPrompts(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to build a repository with")
	}
	writeFacilitatorPrompt(t, dir, "Answer the person.\n")
	script := "git init -q && git add . && git -c user.name=t -c user.email=t@example.com -c commit.gpgsign=false commit -q -m prompts && git rev-parse HEAD"
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestTraceCarriesPromptsCommit: with templates.dir a git work tree, the
// stored trace and the exported conclave.turn span carry its commit.
func TestTraceCarriesPromptsCommit(t *testing.T) {
	dir := t.TempDir()
	commit := commitPrompts(t, dir)
	r := newRig(t, withTraces())
	lib, err := templates.Open(dir, templates.Options{Clock: r.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r.e = r.engine(lib.Current(), func(d *agents.Deps) { d.Tracer = tp.Tracer("test") })
	r.model.on(elen, templates.PromptDefault, "Hello, Alice.")
	root := r.send("", "U1", "Alice", "hello")
	r.settle()

	traces, err := agents.ReadTraces(context.Background(), r.store, agents.ConversationID(team, chanA, root.TS))
	if err != nil || len(traces) != 1 {
		t.Fatalf("%d traces, %v", len(traces), err)
	}
	if got := traces[0].PromptsCommit; got != commit {
		t.Errorf("stored trace: prompts commit %q, want %q", got, commit)
	}
	var found bool
	for _, s := range spans.Ended() {
		if s.Name() != "conclave.turn" {
			continue
		}
		for _, kv := range s.Attributes() {
			if string(kv.Key) == "conclave.prompts.commit" {
				found = true
				if kv.Value.AsString() != commit {
					t.Errorf("span: conclave.prompts.commit %q, want %q", kv.Value.AsString(), commit)
				}
			}
		}
	}
	if !found {
		t.Errorf("no conclave.turn span carries conclave.prompts.commit (%d spans)", len(spans.Ended()))
	}
}
