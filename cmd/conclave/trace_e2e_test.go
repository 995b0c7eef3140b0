package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

// permalink is Slack's link to a message of testChannel.
func permalink(ts string) string {
	return "https://acme.slack.com/archives/" + testChannel + "/p" + strings.Replace(ts, ".", "", 1)
}

// waitTraces runs `conclave trace --json` until it prints n turns (the
// last commit of a conversation may follow its last post).
func waitTraces(t *testing.T, environ map[string]string, path, ref string, n int) []agents.Trace {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, stdout, stderr := cli(t, environ, "trace", "--config", path, "--json", ref)
		var traces []agents.Trace
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var tr agents.Trace
			if line != "" && json.Unmarshal([]byte(line), &tr) == nil {
				traces = append(traces, tr)
			}
		}
		if code == 0 && len(traces) >= n {
			return traces
		}
		if time.Now().After(deadline) {
			t.Fatalf("conclave trace: exit %d, %d turn(s), want %d\n%s%s", code, len(traces), n, stdout, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A conversation with an expert that calls a tool, on Redis; then
// `conclave trace` on the thread's Slack link names every turn with its
// agent, phase, tool call, timings and outcome, and --turn prints the
// requests exactly as the model endpoint received them.
func TestTraceOfAConversation(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	lookupModel(r)
	path := r.config(t, redisSection(db.URL, db.Prefix)+lookupSections(httpSection(t, "crm", "10s")))
	p := start(t, path, toolEnv)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does Ada Lovelace have?"})
	r.waitPosts(t, p, 2)
	traces := waitTraces(t, toolEnv, path, permalink(root.TS), 2)

	code, out, stderr := cli(t, toolEnv, "trace", permalink(root.TS), "--config", path)
	if code != 0 {
		t.Fatalf("conclave trace: exit %d\n%s", code, stderr)
	}
	blocks := strings.Split(out, "\n\n")
	if len(blocks) != 3 {
		t.Fatalf("%d blocks, want one per turn and the total:\n%s", len(blocks), out)
	}
	if !strings.HasPrefix(blocks[2], "total     2 turn(s), ") || !strings.Contains(blocks[2], "4 model call(s)") {
		t.Errorf("the total does not sum the turns:\n%s", blocks[2])
	}
	for i, want := range [][]string{
		{"turn " + traces[0].TurnID, claudineENS + " (expert)", "context-found", " ok\n", "tokens", "timings", "total ", "model ", "tools ", "post ",
			"tool      crm__lookup_customer {\"name\":\"Ada Lovelace\"} → ok", "C45653", "posted", "prompts   system built-in"},
		{"turn " + traces[1].TurnID, elenENS + " (facilitator)", "default", " ok\n", "timings", "posted"},
	} {
		for _, w := range want {
			if !strings.Contains(blocks[i], w) {
				t.Errorf("block %d lacks %q:\n%s", i+1, w, blocks[i])
			}
		}
	}
	if !strings.Contains(out, "◀") {
		t.Errorf("no step is marked the slowest:\n%s", out)
	}

	// --turn: the requests byte for byte as the endpoint received them.
	code, detail, stderr := cli(t, toolEnv, "trace", "--config", path, "--turn", traces[0].TurnID, testChannel+"/"+root.TS)
	if code != 0 {
		t.Fatalf("conclave trace --turn: exit %d\n%s", code, stderr)
	}
	var sent [][]byte
	for _, req := range r.llm.Requests() {
		if bytes.Contains(req.Body, []byte("You are Claudine ")) {
			sent = append(sent, req.Body)
		}
	}
	if len(sent) != 3 {
		t.Fatalf("%d requests of Claudine's turn reached the endpoint, want 3", len(sent))
	}
	for i, body := range sent {
		if !strings.Contains(detail, "# request "+string(rune('1'+i))+"\n"+string(body)+"\n# response") {
			t.Errorf("--turn does not print request %d as sent:\n%s\nwant\n%s", i+1, detail, body)
		}
	}
	if !strings.Contains(detail, `"content": "📚 Ada Lovelace (C45653) has full cover."`) || !strings.Contains(detail, `"name": "crm__lookup_customer"`) {
		t.Errorf("--turn lacks the responses:\n%s", detail)
	}
	if strings.Contains(out+detail, "crm-secret-value") || strings.Contains(out+detail, "sk-test-model-key") {
		t.Errorf("a secret is in a trace")
	}

	// A ⚠️ notice's reference to the turn leads to the same detail.
	code, byRef, stderr := cli(t, toolEnv, "trace", "--config", path, traces[0].TurnID)
	if code != 0 || byRef != detail {
		t.Errorf("conclave trace %s: exit %d, want --turn's detail\n%s\n%s", traces[0].TurnID, code, byRef, stderr)
	}
}

// What conclave trace says when it finds nothing, or cannot look.
func TestTraceFindsNothing(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{})
	onRedis := r.config(t, redisSection(db.URL, db.Prefix))
	inProcess := r.config(t, "")
	cases := []struct {
		name, config string
		args         []string
		code         int
		msg          string
	}{
		{"unknown thread", onRedis, []string{permalink("1700000000.000100")}, 1, "trace: no traces kept for thread C0001/1700000000.000100"},
		{"unknown conversation", onRedis, []string{"6f1c1a52-2f55-5b0c-9a6e-0a4d3b2c1d0e"}, 1, "trace: no traces kept for conversation 6f1c1a52-2f55-5b0c-9a6e-0a4d3b2c1d0e"},
		{"not a reference", onRedis, []string{"yesterday"}, 1, `trace: "yesterday" is neither a Slack link, C…/<thread_ts>, a conversation id nor a turn (a9355e42-t3)`},
		{"unknown turn", onRedis, []string{"a9355e42-t3"}, 1, "trace: turn a9355e42-t3: no traces kept for a conversation starting a9355e42"},
		{"not a message link", onRedis, []string{"https://acme.slack.com/team/U1"}, 1, "is not a Slack message link"},
		{"no reference", onRedis, nil, 2, "trace needs a Slack link"},
		{"in-process store", inProcess, []string{permalink("1700000000.000100")}, 1, "trace: memory.redis_url is not set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := cli(t, nil, append([]string{"trace", "--config", tc.config}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.msg)
			}
		})
	}
}

func TestParseTraceRef(t *testing.T) {
	cases := []struct{ ref, channel, ts, conv string }{
		{"https://acme.slack.com/archives/C0001/p1700000000000100", "C0001", "1700000000.000100", ""},
		{"https://acme.slack.com/archives/C0001/p1700000009000200?thread_ts=1700000000.000100&cid=C0001", "C0001", "1700000000.000100", ""},
		{"C0001/1700000000.000100", "C0001", "1700000000.000100", ""},
		{"6f1c1a52-2f55-5b0c-9a6e-0a4d3b2c1d0e", "", "", "6f1c1a52-2f55-5b0c-9a6e-0a4d3b2c1d0e"},
	}
	if r, err := parseTraceRef("A9355E42-t3"); err != nil || r != (traceRef{idPrefix: "a9355e42", turn: "a9355e42-t3"}) {
		t.Errorf("parseTraceRef of a turn = %+v, %v", r, err)
	}
	for _, tc := range cases {
		r, err := parseTraceRef(tc.ref)
		if err != nil || r != (traceRef{channel: tc.channel, threadTS: tc.ts, conversation: tc.conv}) {
			t.Errorf("parseTraceRef(%q) = %+v, %v", tc.ref, r, err)
		}
	}
}

// In conclave chat, --record writes each request as sent with its
// response, one file per model call, and /trace prints the last turn.
func TestChatRecordAndTrace(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	model := newCast(map[string][]string{
		"Elen/default": {
			"Let me ask " + claudineENS + ": what cover does customer C45653 have?",
			"C45653 has gold cover.",
		},
		"Claudine/context-not-found": {`{"session": "C45653", "message": ""}`},
		"Claudine/context-found":     {"C45653 holds the gold cover since 2021."},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	path := r.config(t, claimsDesk)
	dir := filepath.Join(t.TempDir(), "calls")

	code, stdout, stderr := runChatScript(t, "Is C45653 covered?\n/trace\n", "--config", path, "--as", "Ada", "--record", dir)
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	checkStrings(t, "recorded files", names,
		"001-elen-default.json", "002-claudine-context-not-found.json", "003-claudine-context-found.json", "004-elen-default.json")
	sent := r.llm.Requests()
	for i, name := range names {
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Agent, Phase string
			Request      json.RawMessage
			Response     struct{ Content string }
		}
		if err := json.Unmarshal(body, &rec); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var a, b bytes.Buffer
		_ = json.Compact(&a, rec.Request)
		_ = json.Compact(&b, sent[i].Body)
		if a.String() != b.String() || rec.Response.Content == "" {
			t.Errorf("%s: request\n%s\nwant what the endpoint received\n%s\n(response %q)", name, a.String(), b.String(), rec.Response.Content)
		}
	}
	for _, want := range []string{"turn ", elenENS + " (facilitator)", "default", "timings", "posted"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("/trace printed no %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout, "timings") {
		t.Errorf("/trace went to the transcript:\n%s", stdout)
	}
}

// With --fake-model, --record still writes each request as the configured
// endpoint would have received it (the fake model calls no endpoint).
func TestChatRecordWithFakeModel(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	path := r.config(t, claimsDesk)
	dir := filepath.Join(t.TempDir(), "calls")
	code, stdout, stderr := runChatScript(t, "Is C45653 covered?\n", "--config", path, "--as", "Ada", "--fake-model", "--record", dir)
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	body, err := os.ReadFile(filepath.Join(dir, "001-elen-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Request struct {
			Model    string
			Messages []struct{ Role, Content string }
		}
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Request.Messages) == 0 || !strings.Contains(rec.Request.Messages[len(rec.Request.Messages)-1].Content+string(body), "Is C45653 covered?") {
		t.Errorf("recorded request has no messages with the person's request:\n%s", body)
	}
	if len(r.llm.Requests()) != 0 {
		t.Errorf("the fake model reached the endpoint %d times", len(r.llm.Requests()))
	}

	// A second run into the same directory would mix the two runs' files.
	code, _, stderr = runChatScript(t, "Is C45653 covered?\n", "--config", path, "--as", "Ada", "--fake-model", "--record", dir)
	if code == 0 || !strings.Contains(stderr, dir+" is not empty") {
		t.Errorf("--record into a used directory: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runChatScript(t, "Is C45653 covered?\n", "--config", path, "--as", "Ada", "--fake-model", "--record", dir, "--force")
	if code != 0 {
		t.Errorf("--record --force: exit %d\n%s", code, stderr)
	}
}

// A configured secret a person pastes is masked in the --record files.
func TestChatRecordMasksSecrets(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	path := r.config(t, claimsDesk)
	dir := filepath.Join(t.TempDir(), "calls")
	code, stdout, stderr := runChatScript(t, "Is C45653 covered? The key is sk-test-model-key\n", "--config", path, "--as", "Ada", "--fake-model", "--record", dir)
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	body, err := os.ReadFile(filepath.Join(dir, "001-elen-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "sk-test-model-key") || !strings.Contains(string(body), "The key is [redacted]") {
		t.Errorf("the recorded request holds the key, or not the masked message:\n%s", body)
	}
}

// The facilitator's answer to a person carries 👍/👎 buttons (the
// expert's reply and the facilitator's call do not, slack.feedback =
// "answers"); a press through the real socketmode client is thanked
// ephemerally, counted, and shows in conclave trace; a second press by
// the same person replaces the first, and the count moves with it (a
// person's rating counts once).
func TestFeedbackButtons(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Elen/default": {
			"🧭 " + claudineENS + ", what cover does customer C45653 have?",
			"🧭 C45653 has gold cover, Ada.",
		},
		"Claudine/context-not-found": {`{"session": "C45653", "message": ""}`},
		"Claudine/context-found":     {"📚 C45653 holds the gold cover since 2021."},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	path := r.config(t, redisSection(db.URL, db.Prefix)+claimsDesk)
	p := start(t, path, nil)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "Is C45653 covered?"})
	r.waitPosts(t, p, 3)
	traces := waitTraces(t, nil, path, permalink(root.TS), 3)
	posts := r.slack.Posts()
	for i, want := range []bool{false, false, true} {
		_, has := r.slack.PressFeedback(posts[i], testPerson, true)
		if !has && want || has && !want {
			t.Fatalf("post %d (%q): feedback buttons %v, want %v", i+1, posts[i].Text, has, want)
		}
		if has {
			break // the press is delivered: wait for its thanks below
		}
	}
	ctx := waitCtx(t)
	if _, err := r.slack.WaitEphemerals(ctx, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	if _, ok := r.slack.PressFeedback(posts[2], testPerson, false); !ok {
		t.Fatal("the answer's buttons are gone")
	}
	eph, err := r.slack.WaitEphemerals(ctx, 2)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	if last := eph[len(eph)-1]; last.User != testPerson || !strings.Contains(last.Text, "Thanks for your feedback") {
		t.Errorf("thanks = %+v", last)
	}
	s := p.scrape(t)
	for value, want := range map[string]float64{"negative": 1, "positive": 0} {
		got, _ := s.sum("conclave_feedback_total", `agent="`+elenENS+`"`, `role="facilitator"`, `value="`+value+`"`)
		if got != want {
			t.Errorf("conclave_feedback_total{value=%q} = %v, want %v", value, got, want)
		}
	}
	code, out, stderr := cli(t, nil, "trace", "--config", path, permalink(root.TS))
	if code != 0 {
		t.Fatalf("conclave trace: exit %d\n%s", code, stderr)
	}
	blocks := strings.Split(out, "\n\n")
	if !strings.HasPrefix(blocks[len(blocks)-1], "total ") {
		t.Errorf("the output does not end with the total:\n%s", out)
	}
	last := blocks[len(blocks)-2] // the last turn's, before the total
	if !strings.Contains(last, "turn "+traces[2].TurnID) || !strings.Contains(last, "feedback  👎 negative by "+testPerson) || strings.Contains(last, "positive") {
		t.Errorf("the answer's block does not show the one 👎 press:\n%s", last)
	}
}
