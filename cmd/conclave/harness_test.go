package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testlog"
)

// The names the end-to-end tests use.
const (
	testTeam    = "T0001"
	testChannel = "C0001"
	testPerson  = "U0001"
	elenENS     = "elen.acme.137.protocol6022.eth"
)

// rig is a fake Slack and a fake model endpoint that bots under test use.
type rig struct {
	slack *fakeslack.Server
	llm   *llmfake.Server
}

func newRig(t *testing.T, opts fakeslack.Options) *rig {
	t.Helper()
	opts.Users = append(opts.Users,
		fakeslack.User{ID: testPerson, Name: "ada", RealName: "Ada Lovelace", DisplayName: "Ada"},
	)
	opts.Channels = append(opts.Channels, fakeslack.Channel{ID: testChannel, Name: "claims", Purpose: "The claims desk"})
	return &rig{slack: fakeslack.New(t, opts), llm: llmfake.New(t)}
}

// config writes a configuration file pointing at the rig; extra is
// appended verbatim (more agents, channels, sections).
func (r *rig) config(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	// An empty config repository: the built-in prompts, which a test may
	// override by writing into it.
	if err := os.Mkdir(filepath.Join(dir, "no-templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`shutdown_grace = "5s"

[slack]
app_token = %q
bot_token = %q
api_url = %q

[llm]
base_url = %q
api_key = "sk-test-model-key"
model = "fake-model"
max_retries = 1

[templates]
dir = %q

[http]
addr = "127.0.0.1:0"

[log]
level = "debug"

[[agents]]
ens = %q
name = "Elen"
role = "facilitator"
avatar = "https://example.com/elen.png"
attributes = { mission = "Runs the claims desk" }
%s
`, fakeslack.AppToken, fakeslack.BotToken, r.slack.APIURL(), r.llm.URL(), filepath.Join(dir, "no-templates"), elenENS, extra)
	if !strings.Contains(extra, "[[channels]]") {
		body += fmt.Sprintf("\n[[channels]]\nid = %q\nagents = [%q]\n", testChannel, elenENS)
	}
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// process is one `conclave run` started in-process with the real wiring.
type process struct {
	addr    string
	opsAddr string // with http.ops_addr
	logs    *testlog.Buffer
	cancel  context.CancelFunc
	exit    chan int
}

// start runs `conclave run --config path` until the test ends (or stop);
// edit, when given, changes what the process is given (a clock).
func start(t *testing.T, path string, extraEnv map[string]string, edit ...func(*env)) *process {
	t.Helper()
	return startArgs(t, []string{"run", "--config", path}, extraEnv, edit...)
}

// startArgs runs conclave with args until the test ends (or stop).
func startArgs(t *testing.T, args []string, extraEnv map[string]string, edit ...func(*env)) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{logs: &testlog.Buffer{}, cancel: cancel, exit: make(chan int, 1)}
	ready := make(chan string, 1)
	e := env{
		getenv: func(k string) string { return extraEnv[k] },
		stdout: p.logs,
		stderr: p.logs,
		stdin:  strings.NewReader(""),
		hup:    make(chan os.Signal),
		ready:  func(addr string) { ready <- addr },
	}
	e.opsReady = func(addr string) { p.opsAddr = addr } // before ready
	for _, f := range edit {
		f(&e)
	}
	go func() { p.exit <- runMain(ctx, args, e) }()
	select {
	case p.addr = <-ready:
	case code := <-p.exit:
		t.Fatalf("conclave exited with %d before serving:\n%s", code, p.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("conclave did not start:\n%s", p.logs)
	}
	t.Cleanup(func() {
		if code := p.stop(t); code != 0 {
			t.Errorf("conclave exited with %d:\n%s", code, p.logs)
		}
	})
	return p
}

// stop cancels the process as SIGTERM does and returns its exit code.
func (p *process) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	select {
	case code, ok := <-p.exit:
		if !ok {
			return 0
		}
		close(p.exit)
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("conclave did not stop:\n%s", p.logs)
		return -1
	}
}

// ackCount counts the acknowledgements the fake Slack received for the
// delivery key.
func ackCount(s *fakeslack.Server, key string) int {
	n := 0
	for _, a := range s.Acks() {
		if a.Key == key {
			n++
		}
	}
	return n
}

// waitCtx is a context for waiting on the rigs, bounded so a broken test
// fails instead of hanging.
func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
