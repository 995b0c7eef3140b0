package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/ens/enstest"
	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/memory/redistest"
)

// The fault tests drive the real `conclave run` wiring through the faults
// and bad input of SPEC §10 that need more than one package to handle.

// notice matches a failure notice of agent name whose reason matches
// reason.
func notice(name, reason string) *regexp.Regexp {
	return regexp.MustCompile(`^⚠️ ` + regexp.QuoteMeta(name) + ` could not answer: .*` + reason + `.* \(ref [0-9a-f-]+t\d+(-notice)?\)$`)
}

// postTexts lists the text of every post so far.
func postTexts(s *fakeslack.Server) []string {
	var out []string
	for _, p := range s.Posts() {
		out = append(out, p.Text)
	}
	return out
}

// TestSocketDropsAndDisconnectsLoseNothing cuts the Socket Mode connection
// (no close frame) and sends `disconnect` envelopes while six
// conversations are active and turns run: the client reconnects each time,
// envelopes left unacknowledged are delivered again, and every message is
// answered exactly once, in order.
func TestSocketDropsAndDisconnectsLoseNothing(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	r.llm.Handle(echoAfter(100 * time.Millisecond))
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)), nil)
	ctx := waitCtx(t)

	const threads, perThread = 6, 6
	c := converse(ctx, r.slack, threads, perThread, r.slack.SendMessage)
	faults := []func(){
		func() { r.slack.Drop(0) },
		func() { r.slack.Disconnect(0, "refresh_requested") },
		func() { r.slack.Drop(0) },
		func() { r.slack.Disconnect(0, "warning") },
	}
	for i, fault := range faults {
		if _, err := r.slack.WaitPosts(ctx, (i+1)*threads*perThread/(len(faults)+1)); err != nil {
			t.Fatalf("%v\n%s", err, p.logs)
		}
		opened := r.slack.Opened()
		fault()
		if err := r.slack.WaitOpened(ctx, opened+1); err != nil {
			t.Fatalf("no reconnection after fault %d: %v\n%s", i, err, p.logs)
		}
	}
	if err := c.wait(); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	c.check(t, r.slack)
	if n := len(r.llm.Requests()); n != threads*perThread {
		t.Errorf("model called %d times, want %d", n, threads*perThread)
	}
	if v, _ := p.scrape(t).sum("conclave_slack_disconnects_total"); v < float64(len(faults)) {
		t.Errorf("conclave_slack_disconnects_total = %v, want at least %d", v, len(faults))
	}
}

// TestRedisDownDuringModelCall stops Redis while a turn waits for the
// model and starts it again before the model answers: the turn commits and
// posts once, and the conversation goes on.
func TestRedisDownDuringModelCall(t *testing.T) {
	srv := redistest.Start(t)
	db := redistest.WithPrefix(t, srv.URL())
	r := newRig(t, fakeslack.Options{EchoPosts: true, AckTimeout: 500 * time.Millisecond, MaxRetries: 20})
	release := make(chan struct{})
	var once sync.Once
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		once.Do(func() { <-release }) // the first call waits for Redis to be back
		return echoLatest(req)
	})
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)), nil)
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "thread 0 message 0"})
	if _, err := r.llm.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.Restart()
	close(release)
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 0"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thread 0 message 1"})
	if err := waitReply(ctx, r.slack, root.TS, "answer to thread 0 message 1"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	want := []string{"answer to thread 0 message 0", "answer to thread 0 message 1"}
	if got := postTexts(r.slack); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("posts = %q, want %q", got, want)
	}
}

// TestModelFaultsEndInANotice scripts the model's failures turn by turn:
// a 429 that passes on retry, 5xx, timeouts and empty replies that do not;
// each failed turn posts one ⚠️ notice after its retries, and the
// conversation goes on with the next message.
func TestModelFaultsEndInANotice(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	path := r.config(t, "")
	rewrite(t, path, "max_retries = 1", "max_retries = 1\ntimeout = \"300ms\"")
	r.llm.Reply(
		llmfake.RateLimited("0"), llmfake.Text("answer 0"), // retried, then answered
		llmfake.Error(http.StatusInternalServerError, "boom"), llmfake.Error(http.StatusServiceUnavailable, "busy"),
		llmfake.Slow(5*time.Second, "late"), llmfake.Slow(5*time.Second, "late"),
		llmfake.Blank(), llmfake.NoChoices(),
		llmfake.Text("answer 4"),
	)
	p := start(t, path, nil)
	ctx := waitCtx(t)

	thread := ""
	for i := range 5 {
		d := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: thread, Text: fmt.Sprintf("message %d", i)})
		if thread == "" {
			thread = d.TS
		}
		if _, err := r.slack.WaitPosts(ctx, i+1); err != nil {
			t.Fatalf("message %d: %v\n%s", i, err, p.logs)
		}
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^answer 0$`),
		notice("Elen", "the model endpoint returned HTTP 503"),
		notice("Elen", "the model endpoint timed out"),
		notice("Elen", "the model endpoint returned an empty reply"),
		regexp.MustCompile(`^answer 4$`),
	}
	posts := postTexts(r.slack)
	if len(posts) != len(want) {
		t.Fatalf("posts = %q", posts)
	}
	for i, re := range want {
		if !re.MatchString(posts[i]) {
			t.Errorf("post %d = %q, want %s", i, posts[i], re)
		}
	}
	reqs := r.llm.Requests()
	if len(reqs) != 9 {
		t.Fatalf("model called %d times, want 9", len(reqs))
	}
	// The log keeps what the notices leave out: the reason after the
	// retries.
	for _, detail := range []string{"server error after 2 attempts", "timed out after 2 attempts", "empty reply after 2 attempts"} {
		if !strings.Contains(p.logs.String(), detail) {
			t.Errorf("the log lacks %q", detail)
		}
	}
	// The last turn saw every person message and the one good reply, not
	// the notices.
	checkHistory(t, "the last turn's", reqs[8],
		"user: Ada (person): message 0", "assistant: answer 0", "user: Ada (person): message 1",
		"user: Ada (person): message 2", "user: Ada (person): message 3", "user: Ada (person): message 4",
	)
}

// TestNoticesLeakNothing has the model endpoint fail with a body that
// names an internal host and carries a key: the ⚠️ notice gives the
// reason class only, nothing posted in Slack holds the host or the key,
// and the log has the detail.
func TestNoticesLeakNothing(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	const host, key = "db-7.corp.internal:5432", "sk-live-51HrZq9secret"
	r.llm.Handle(func(llmfake.Request) llmfake.Reply {
		return llmfake.Error(http.StatusInternalServerError, "upstream "+host+" refused the key "+key+" at https://"+host+"/v1")
	})
	p := start(t, r.config(t, ""), nil)
	ctx := waitCtx(t)
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "hello"})
	posts, err := r.slack.WaitPosts(ctx, 1)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	if re := notice("Elen", "the model endpoint returned HTTP 500"); !re.MatchString(posts[0].Text) ||
		!strings.HasPrefix(posts[0].Text, "⚠️ Elen could not answer: the model endpoint returned HTTP 500 (ref ") {
		t.Errorf("notice = %q, want %s", posts[0].Text, re)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	var sent []string
	for _, c := range r.slack.Calls() {
		sent = append(sent, c.Method+" "+c.Form.Encode())
	}
	for _, resp := range r.slack.CommandResponses() {
		sent = append(sent, string(resp.Body))
	}
	for _, s := range sent {
		for _, secret := range []string{"corp.internal", key, "sk-test-model-key", "upstream"} {
			if strings.Contains(s, secret) {
				t.Errorf("Slack was sent %q, which holds %q", s, secret)
			}
		}
	}
	if !strings.Contains(p.logs.String(), host) {
		t.Errorf("the log lacks the upstream detail %q", host)
	}
}

// TestHostileMessagesAreData sends a 40,000-character message with control
// characters and template actions, then a short one with template
// actions: the model sees them verbatim, capped with a visible mark, the
// actions never executed, and the conversation goes on.
func TestHostileMessagesAreData(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	r.llm.Handle(func(llmfake.Request) llmfake.Reply { return llmfake.Text("noted") })
	p := start(t, r.config(t, ""), nil)
	ctx := waitCtx(t)

	head := "Claim {{ .ConversationId }} {{ template \"latest\" . }} bell\a nul\x00 sep\u2028 tab\t end."
	huge := head + strings.Repeat("0123456789", 4000)
	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: huge})
	if _, err := r.slack.WaitPosts(ctx, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "And {{ .MemorySessionId }} {{ end }} too."})
	if _, err := r.slack.WaitPosts(ctx, 2); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	first := reqs[0].Messages
	t.Run("capped with a mark", func(t *testing.T) {
		msg := first[1].Content
		if !strings.HasPrefix(msg, "Ada (person): Claim {{ .ConversationId }}") || !strings.HasSuffix(msg, "… [truncated]") {
			t.Errorf("history message starts %q, ends %q", msg[:60], msg[len(msg)-30:])
		}
		if n := utf8.RuneCountInString(msg); n > 12100 {
			t.Errorf("history message has %d runes, want the 12,000 cap", n)
		}
		// The documented estimate: ceil(runes/4) + 4 per message, within the
		// default budget of 16,000 tokens.
		tokens := 0
		for _, m := range first {
			tokens += (utf8.RuneCountInString(m.Content)+3)/4 + 4
		}
		if tokens > 16000 {
			t.Errorf("the request is about %d tokens, over the input budget", tokens)
		}
	})
	t.Run("template actions are text", func(t *testing.T) {
		last := reqs[1].Messages[len(reqs[1].Messages)-1].Content
		if !strings.Contains(last, "And {{ .MemorySessionId }} {{ end }} too.") {
			t.Errorf("phase prompt lost the literal actions:\n%s", last)
		}
		phase := first[len(first)-1].Content
		if !strings.Contains(phase, `{{ .ConversationId }} {{ template "latest" . }}`) {
			t.Errorf("phase prompt lost the literal actions:\n%.300s", phase)
		}
	})
	if got := postTexts(r.slack); strings.Join(got, "|") != "noted|noted" {
		t.Errorf("posts = %q", got)
	}
}

// TestTemplateFaultsFailOnlyTheirAgent gives one expert a threading prompt
// that does not parse and another one that reads an agent-only field of
// the author, a person: each posts a notice naming the file, line and
// field; a third expert and the facilitator answer as usual.
func TestTemplateFaultsFailOnlyTheirAgent(t *testing.T) {
	const (
		marcENS = "marc.acme.137.protocol6022.eth"
		irisENS = "iris.acme.137.protocol6022.eth"
	)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		if req.ResponseFormat == "json_object" {
			return llmfake.Text(`{"session": "", "message": "Iris here."}`)
		}
		return llmfake.Text("Elen sums up.")
	})
	path := r.config(t, agentSection(ottoENS, "Otto", "expert")+agentSection(marcENS, "Marc", "expert")+
		agentSection(irisENS, "Iris", "expert")+channelSection(elenENS, ottoENS, marcENS, irisENS))
	files := map[string]string{
		"agents/" + marcENS + "/context-not-found.tmpl": "Asked by {{ .LatestRequest.Author.EnsDomain }}.",
	}
	for name, body := range ottoBroken {
		files[name] = body
	}
	templateRepo(t, path, files)
	p := start(t, path, nil)
	ctx := waitCtx(t)

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson,
		Text: fmt.Sprintf("Claim C12: %s, %s and %s, please help.", ottoENS, marcENS, irisENS)})
	if _, err := r.slack.WaitPosts(ctx, 4); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	want := []*regexp.Regexp{
		notice("Otto", "template error in .*"+regexp.QuoteMeta("agents/"+ottoENS+"/context-not-found.tmpl:2")),
		notice("Marc", "template error in .*"+regexp.QuoteMeta("agents/"+marcENS+"/context-not-found.tmpl:1")),
		regexp.MustCompile(`^Iris here\.$`),
		regexp.MustCompile(`^Elen sums up\.$`),
	}
	posts := r.slack.Posts()
	for i, re := range want {
		if i >= len(posts) || !re.MatchString(posts[i].Text) {
			t.Errorf("post %d = %q, want %s", i, postTexts(r.slack), re)
		}
	}
	if len(posts) == 4 && (posts[0].Username != "Otto" || posts[1].Username != "Marc" || posts[2].Username != "Iris") {
		t.Errorf("posted as %q, %q, %q", posts[0].Username, posts[1].Username, posts[2].Username)
	}
	// The notices name file and line; the log says what is wrong there.
	detail := regexp.MustCompile(regexp.QuoteMeta("agents/"+marcENS+"/context-not-found.tmpl:1: ") + ".*EnsDomain.*Ada")
	if !detail.MatchString(p.logs.String()) {
		t.Errorf("the log lacks %s", detail)
	}
}

// TestChainDownServesCachedIdentities resolves an expert on a (fake)
// chain, takes the chain down and lets the cache entry expire: the expert
// still answers (a stale identity is served). An agent registered in the
// channel that the chain does not know is not served: naming it gets the
// author an ephemeral notice saying it could not be resolved, naming an
// unregistered agent one saying so; the facilitator answers the message.
// The chain is down at start, so that the agent it does not know is not
// refused then (a start-up check refuses only what the chain says it does
// not know): it is looked up once the chain is back.
func TestChainDownServesCachedIdentities(t *testing.T) {
	const nobodyENS = "nobody.acme.137.protocol6022.eth"
	chain := enstest.NewChain(t)
	chain.Mint(claudineENS, 1, enstest.Token{Name: "Claudine", Attributes: []enstest.KV{{Key: "role", Value: "expert"}}})
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	r.llm.Handle(func(req llmfake.Request) llmfake.Reply {
		if req.ResponseFormat == "json_object" {
			return llmfake.Text(`{"session": "", "message": "Claudine here."}`)
		}
		return llmfake.Text("Elen here.")
	})
	path := r.config(t, fmt.Sprintf(`
[ens]
cache_ttl = "10m"
rpc_timeout = "2s"

[[ens.chains]]
chain_id = 137
rpc_url = %q
registry = %q
`, chain.URL(), chain.Registry().Hex())+channelSection(elenENS, claudineENS, ghostENS))
	clock := testclock.New(time.Time{})
	chain.SetDown(true)
	p := start(t, path, nil, func(e *env) { e.now = clock.Now })
	if len(linesWith(t, p.logs.String(), "an agent of a channel could not be looked up")) != 2 {
		t.Errorf("the agents the chain could not be asked for at start are not warned of:\n%s", p.logs)
	}
	chain.SetDown(false)
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "Claim C7: " + claudineENS + ", please look."})
	if _, err := r.slack.WaitPosts(ctx, 2); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	chain.SetDown(true)
	clock.Advance(10*time.Minute + time.Second) // the cache entry expires
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "Again " + claudineENS + "?"})
	if _, err := r.slack.WaitPosts(ctx, 4); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: ghostENS + " and " + nobodyENS + "?"})
	if _, err := r.slack.WaitEphemerals(ctx, 2); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	if _, err := r.slack.WaitPosts(ctx, 5); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}

	posts := r.slack.Posts()
	want := []struct {
		user string
		text *regexp.Regexp
	}{
		{"Claudine", regexp.MustCompile(`^Claudine here\.$`)},
		{"Elen", regexp.MustCompile(`^Elen here\.$`)},
		{"Claudine", regexp.MustCompile(`^Claudine here\.$`)},
		{"Elen", regexp.MustCompile(`^Elen here\.$`)},
		{"Elen", regexp.MustCompile(`^Elen here\.$`)},
	}
	for i, w := range want {
		if i >= len(posts) || posts[i].Username != w.user || !w.text.MatchString(posts[i].Text) {
			var got []string
			for _, p := range posts {
				got = append(got, p.Username+": "+p.Text)
			}
			t.Fatalf("post %d: want %s %s; posts:\n%s", i, w.user, w.text, strings.Join(got, "\n"))
		}
	}
	if len(posts) != len(want) {
		t.Errorf("%d posts, want %d", len(posts), len(want))
	}
	eph := r.slack.Ephemerals()
	for i, want := range []string{
		ghostENS + " is an agent of this channel but could not be resolved",
		nobodyENS + " is not an agent of this channel",
	} {
		if i >= len(eph) || eph[i].User != testPerson || !strings.HasPrefix(eph[i].Text, want) {
			t.Errorf("ephemerals = %+v, want one to %s starting %q", eph, testPerson, want)
		}
	}
	if v, _ := p.scrape(t).sum("conclave_ens_cache_stale_total"); v < 1 {
		t.Errorf("conclave_ens_cache_stale_total = %v, want at least 1", v)
	}
}

// TestMalformedSlashCommandsChangeNothing sends slash commands with
// missing, extra, malformed and hostile arguments: each gets one line of
// usage, privately, and the channel's agents stay as they were, with
// nothing announced.
func TestMalformedSlashCommandsChangeNothing(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	path := r.config(t, "")
	// Open to everyone, so that the arguments are what is refused.
	rewrite(t, path, "[slack]\n", "[slack]\nadmins = [\"*\"]\n")
	p := start(t, path, nil)
	before := r.command(t, p, testPerson, "/list-agents")
	tests := []struct{ name, line string }{
		{"add without a name", "/add-agent"},
		{"add with too many arguments", "/add-agent a b c d e"},
		{"add with a bad collection", "/add-agent 0xnot-an-address 12"},
		{"add with a negative token", "/add-agent 0x23dbc335f966d9869940FB55f61E919118AAD236 -1"},
		{"add with a bad chain", "/add-agent 0x23dbc335f966d9869940FB55f61E919118AAD236 12 polygon"},
		{"add a path", "/add-agent ../../etc/passwd"},
		{"add a non-ASCII name", "/add-agent ünïcode.eth"},
		{"add template actions", "/add-agent {{ .ConversationId }}"},
		{"add control characters", "/add-agent \x00\a <@U1|x>"},
		{"add 40,000 characters", "/add-agent " + strings.Repeat("a", 40000) + ".eth"},
		{"remove without a name", "/remove-agent"},
		{"remove with too many arguments", "/remove-agent x y z w"},
		{"list with an argument", "/list-agents everything"},
		{"verify with arguments", "/verify-wallet now please"},
		{"pair without arguments", "/pair-slack-user-to-human-agent"},
		{"pair without an agent", "/pair-slack-user-to-human-agent U123"},
		{"pair a non-user", "/pair-slack-user-to-human-agent nobody " + elenENS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.command(t, p, testPerson, tt.line)
			if !strings.HasPrefix(got, "Usage: ") || strings.Contains(got, "\n") {
				t.Errorf("reply %.200q, want one line of usage", got)
			}
			if len(got) > 1000 {
				t.Errorf("reply of %d bytes: what was typed is echoed back whole", len(got))
			}
		})
	}
	if after := r.command(t, p, testPerson, "/list-agents"); after != before {
		t.Errorf("agents changed:\n%s\nwant:\n%s", after, before)
	}
	if posts := r.slack.Posts(); len(posts) != 0 {
		t.Errorf("announced: %+v", posts)
	}
	if strings.Contains(p.logs.String(), `"action":"agent_`) {
		t.Errorf("an audit record was written:\n%s", p.logs)
	}
}
