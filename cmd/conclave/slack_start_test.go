package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testlog"
)

// slackDown makes the fake Slack answer auth.test with a 503 until the
// returned flag is cleared.
func slackDown(r *rig) *atomic.Bool {
	down := &atomic.Bool{}
	down.Store(true)
	r.slack.FailNext("auth.test", fakeslack.Failure{Status: http.StatusServiceUnavailable, While: down.Load})
	return down
}

// waitLog waits until the log holds a JSON line whose msg is msg, and
// returns that line decoded.
func waitLog(ctx context.Context, t *testing.T, logs *testlog.Buffer, msg string) map[string]any {
	t.Helper()
	for {
		if lines := linesWith(t, logs.String(), msg); len(lines) > 0 {
			return lines[0]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no %q in the log:\n%s", msg, logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// get fetches url and returns the status and the body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) // #nosec G107 -- the test's own listener
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHealthBeforeSlack runs conclave as a process of its own against a
// Slack whose auth.test fails: the HTTP listeners serve anyway, /healthz
// says the process is alive, /readyz says Slack is being reached and
// what the last attempt met, /metrics is served, and SIGTERM ends it
// cleanly (exit 0), not with "context canceled".
func TestHealthBeforeSlack(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	slackDown(r)
	path := r.config(t, "")

	cmd := exec.Command(os.Args[0], "-test.run=^TestConclaveProcess$")
	cmd.Env = childEnv(envChildProcess+"=1", "CONCLAVE_CONFIG="+path)
	out := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	serving := waitLog(ctx, t, out, "serving HTTP")
	base := "http://" + serving["listen"].(string)
	waitLog(ctx, t, out, "cannot reach Slack; retrying")

	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q, want 200", code, body)
	}
	code, body := get(t, base+"/readyz")
	var report map[string]string
	if err := json.Unmarshal([]byte(body), &report); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	if code != http.StatusServiceUnavailable || report["slack"] != "connecting (HTTP 503)" {
		t.Errorf("/readyz = %d %v, want 503 with slack: connecting (HTTP 503)", code, report)
	}
	if code, _ := get(t, base+"/metrics"); code != http.StatusOK {
		t.Errorf("/metrics = %d, want 200", code)
	}
	if strings.Contains(out.String(), `"msg":"conclave is running"`) {
		t.Errorf("the summary says conclave is running before Slack was reached:\n%s", out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, out)
		}
	case <-ctx.Done():
		t.Fatalf("the child did not exit:\n%s", out)
	}
	if strings.Contains(out.String(), "context canceled") {
		t.Errorf("the stop reads as a failure:\n%s", out)
	}
}

// TestSlackReachedLater starts conclave while Slack cannot be reached,
// then lets Slack answer: conclave connects on its own, says it is
// running, becomes ready and answers a message.
func TestSlackReachedLater(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	r.llm.Handle(echoLatest)
	down := slackDown(r)
	ready := make(chan string, 1)
	logs := &testlog.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	e := env{
		getenv: func(string) string { return "" },
		stdout: logs, stderr: logs, stdin: strings.NewReader(""),
		hup:   make(chan os.Signal),
		ready: func(addr string) { ready <- addr },
	}
	go func() { exit <- runMain(ctx, []string{"run", "--config", r.config(t, "")}, e) }()
	t.Cleanup(func() {
		cancel()
		if code := <-exit; code != 0 {
			t.Errorf("conclave exited with %d:\n%s", code, logs)
		}
	})
	wait := waitCtx(t)
	serving := waitLog(wait, t, logs, "serving HTTP")
	waitLog(wait, t, logs, "cannot reach Slack; retrying")
	select {
	case <-ready:
		t.Fatalf("conclave said it was running before Slack was reached:\n%s", logs)
	default:
	}
	down.Store(false)
	select {
	case <-ready:
	case <-wait.Done():
		t.Fatalf("conclave did not reach Slack once it answered:\n%s", logs)
	}
	if err := r.slack.WaitOpen(wait, 1); err != nil {
		t.Fatalf("no Socket Mode connection: %v\n%s", err, logs)
	}
	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "thread 0 message 0"})
	if err := waitReply(wait, r.slack, root.TS, "answer to thread 0 message 0"); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	for {
		code, body := get(t, "http://"+serving["listen"].(string)+"/readyz")
		if code == http.StatusOK {
			break
		}
		select {
		case <-wait.Done():
			t.Fatalf("/readyz = %d %s once Slack is reached", code, body)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
