package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/agents/tools/mcptest"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

// The tool tests drive agents with MCP tools (docs/tools.md, SPEC §12.4)
// through the real `conclave run` wiring, the fake Slack, the fake model
// and mcptest, the in-repo MCP server, over stdio (this test binary
// started again as the server) and over Streamable HTTP.

func TestMain(m *testing.M) {
	mcptest.ServeStdioIfAsked()
	os.Exit(m.Run())
}

// stdioSection configures mcptest over stdio as server name; it returns
// the section and the file that counts the server's starts.
func stdioSection(t *testing.T, name, timeout string) (string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(t.TempDir(), "starts")
	env := mcptest.StdioEnvFor(starts)
	return fmt.Sprintf("\n[[mcp.servers]]\nname = %q\ncommand = [%q]\nenv = { %s = %q, MCPTEST_STARTS = %q, MCPTEST_SECRET = \"$CRM_SECRET\" }\ntimeout = %q\n",
		name, exe, mcptest.StdioEnv, env[mcptest.StdioEnv], starts, timeout), starts
}

// httpSection configures mcptest over Streamable HTTP as server name.
func httpSection(t *testing.T, name, timeout string) string {
	t.Helper()
	srv := httptest.NewServer(mcptest.Handler())
	t.Cleanup(srv.Close)
	return fmt.Sprintf("\n[[mcp.servers]]\nname = %q\nurl = %q\nheaders = { Authorization = \"$CRM_AUTH\" }\ntimeout = %q\n", name, srv.URL, timeout)
}

// toolEnv is the environment the tool configurations read.
var toolEnv = map[string]string{"CRM_SECRET": "crm-secret-value", "CRM_AUTH": "Bearer crm-secret-value"}

// toolModel answers by agent and phase like castModel, with functions so
// an answer can depend on the tools offered and the tool results.
type toolModel struct {
	names []string
	mu    sync.Mutex
	rules map[string][]func(llmfake.Request) llmfake.Reply // "agent/phase" → answers in order
	reqs  map[string][]llmfake.Request                     // "agent/phase" → requests
}

func newToolModel(rules map[string][]func(llmfake.Request) llmfake.Reply, names ...string) *toolModel {
	return &toolModel{names: names, rules: rules, reqs: map[string][]llmfake.Request{}}
}

// phase is the turn's phase: its last user message is the phase prompt
// (tool rounds come after it).
func (m *toolModel) key(req llmfake.Request) string {
	agent := "?"
	for _, name := range m.names {
		if strings.HasPrefix(req.Messages[0].Content, "You are "+name+" ") {
			agent = name
		}
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return agent + "/" + phaseOfText(req.Messages[i].Content)
		}
	}
	return agent + "/?"
}

func (m *toolModel) reply(req llmfake.Request) llmfake.Reply {
	key := m.key(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs[key] = append(m.reqs[key], req)
	if len(m.rules[key]) == 0 {
		return llmfake.Error(400, "no scripted answer for "+key)
	}
	next := m.rules[key][0]
	m.rules[key] = m.rules[key][1:]
	return next(req)
}

func (m *toolModel) requests(key string) []llmfake.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs[key])
}

// mustRequests returns the requests of key, failing the test unless
// there are n.
func (m *toolModel) mustRequests(t *testing.T, key string, n int) []llmfake.Request {
	t.Helper()
	reqs := m.requests(key)
	if len(reqs) != n {
		t.Fatalf("%d %s requests, want %d", len(reqs), key, n)
	}
	return reqs
}

func text(s string) func(llmfake.Request) llmfake.Reply {
	return func(llmfake.Request) llmfake.Reply { return llmfake.Text(s) }
}

func calls(cs ...llmfake.ToolCall) func(llmfake.Request) llmfake.Reply {
	return func(llmfake.Request) llmfake.Reply { return llmfake.Calls(cs...) }
}

// toolResults lists a request's tool messages as "<call id>: <content>".
func toolResults(req llmfake.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out = append(out, m.ToolCallID+": "+m.Content)
		}
	}
	return out
}

func toolNames(req llmfake.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	return out
}

func checkStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkToolCalls compares conclave_tool_calls_total with want, series by
// series ("server/tool/outcome" → count).
func checkToolCalls(t *testing.T, p *process, want map[string]float64) {
	t.Helper()
	s := p.scrape(t)
	for series, n := range want {
		parts := strings.Split(series, "/")
		got, _ := s.sum("conclave_tool_calls_total", `server="`+parts[0]+`"`, `tool="`+parts[1]+`"`, `outcome="`+parts[2]+`"`)
		if got != n {
			t.Errorf("conclave_tool_calls_total %s = %v, want %v", series, got, n)
		}
	}
}

func noSecretIn(t *testing.T, p *process) {
	t.Helper()
	if strings.Contains(p.logs.String(), "crm-secret-value") {
		t.Errorf("a server secret reached the log:\n%s", p.logs)
	}
}

// lookupModel answers, on r's model endpoint, a conversation in which
// Claudine looks Ada Lovelace's key up with crm's tool, binds the session
// it returned and answers, and Elen closes.
func lookupModel(r *rig) *toolModel {
	model := newToolModel(map[string][]func(llmfake.Request) llmfake.Reply{
		"Claudine/context-not-found": {
			calls(llmfake.Call("crm__lookup_customer", `{"name":"Ada Lovelace"}`)),
			text(`{"session": "C45653", "message": ""}`),
		},
		"Claudine/context-found": {text("📚 Ada Lovelace (C45653) has full cover.")},
		"Elen/default":           {text("🧭 Claudine has answered.")},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	return model
}

// lookupSections is the config of that conversation after the tool
// server's section: Claudine, an expert given crm's lookup, in a channel
// with Elen.
func lookupSections(server string) string {
	return server + agentSection(claudineENS, "Claudine", "expert") + "tools = [\"crm/lookup_customer\"]\n" + channelSection(elenENS, claudineENS)
}

// An expert looks the key up with a tool while threading, over either
// transport, and binds the session the tool returned; the facilitator,
// which has no tools, is offered none and sees one line per call.
func TestExpertLooksItsKeyUpWithATool(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			r := newRig(t, fakeslack.Options{EchoPosts: true})
			model := lookupModel(r)
			section := httpSection(t, "crm", "10s")
			if transport == "stdio" {
				section, _ = stdioSection(t, "crm", "10s")
			}
			path := r.config(t, lookupSections(section))
			p := start(t, path, toolEnv)

			r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does Ada Lovelace have?"})
			r.waitPosts(t, p, 2)
			checkPosts(t, r.slack, "Claudine: 📚 Ada Lovelace (C45653) has full cover.", "Elen: 🧭 Claudine has answered.")

			threading := model.mustRequests(t, "Claudine/context-not-found", 2)
			checkStrings(t, "tools offered while threading", toolNames(threading[0]), "crm__lookup_customer")
			if tl := threading[0].Tools[0]; tl.Description != "Finds a customer's id by name.\nReturns the id as text." || !strings.Contains(string(tl.Parameters), `"name"`) {
				t.Errorf("tool = %+v", tl)
			}
			checkStrings(t, "tool results", toolResults(threading[1]), "call_1: C45653")
			if last := threading[1].Messages[len(threading[1].Messages)-2]; last.Role != "assistant" || last.ToolCalls != `call_1 crm__lookup_customer {"name":"Ada Lovelace"}` {
				t.Errorf("the assistant's calls = %+v", last)
			}
			if threading[0].ResponseFormat != "json_object" || threading[1].ResponseFormat != "json_object" {
				t.Errorf("threading response formats %q, %q", threading[0].ResponseFormat, threading[1].ResponseFormat)
			}
			found := model.requests("Claudine/context-found")
			if len(found) != 1 || !strings.Contains(found[0].Messages[0].Content+lastPrompt(found[0]), "C45653") {
				t.Fatalf("context-found requests %+v: want one, bound to C45653", found)
			}
			if toolNames(found[0]) == nil || len(toolResults(found[0])) != 0 {
				t.Errorf("context-found: tools %v (want them offered), tool messages %v (want none: tool traffic stays in its call)", toolNames(found[0]), toolResults(found[0]))
			}
			elen := model.requests("Elen/default")
			if len(elen) != 1 || elen[0].Has("tools") {
				t.Fatalf("facilitator requests: %d, tools key sent: %v", len(elen), len(elen) > 0 && elen[0].Has("tools"))
			}
			checkHistory(t, "facilitator", elen[0],
				"user: Ada (person): "+claudineENS+", what cover does Ada Lovelace have?",
				"user: (used crm__lookup_customer)",
				"user: Claudine ("+claudineENS+"): 📚 Ada Lovelace (C45653) has full cover.")
			checkToolCalls(t, p, map[string]float64{"crm/lookup_customer/ok": 1})
			noSecretIn(t, p)
		})
	}
}

// A tool error and a tool that hangs past its timeout, called in parallel
// in one round, come back to the model as "error: …", and the turn goes on;
// a tool the agent was not offered does not run.
func TestToolErrorsAndTimeoutsReachTheModel(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newToolModel(map[string][]func(llmfake.Request) llmfake.Reply{
		"Claudine/context-not-found": {
			calls(llmfake.Call("crm__fail", `{}`), llmfake.Call("crm__hang", `{}`), llmfake.Call("crm__lookup_customer", `{"name":"Nobody"}`), llmfake.Call("crm__nosuch", `{}`)),
			text(`{"session": "", "message": "🔍 The CRM is down; which customer id is it?"}`),
		},
		"Elen/default": {text("🧭 Let us wait for the id.")},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	path := r.config(t, httpSection(t, "crm", "1s")+agentSection(claudineENS, "Claudine", "expert")+"tools = [\"crm\"]\n"+
		channelSection(elenENS, claudineENS))
	p := start(t, path, toolEnv)

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does our customer have?"})
	r.waitPosts(t, p, 2)
	checkPosts(t, r.slack, "Claudine: 🔍 The CRM is down; which customer id is it?", "Elen: 🧭 Let us wait for the id.")
	threading := model.mustRequests(t, "Claudine/context-not-found", 2)
	checkStrings(t, "tool results", toolResults(threading[1]),
		"call_1: error: the CRM is down",
		"call_2: error: no answer within 1s",
		`call_3: error: no customer named "Nobody"`,
		`call_4: error: no tool named "crm__nosuch" is available`)
	checkHistory(t, "facilitator", model.requests("Elen/default")[0],
		"user: Ada (person): "+claudineENS+", what cover does our customer have?",
		"user: (used crm__fail)",
		"user: (used crm__hang)",
		"user: (used crm__lookup_customer)",
		"user: Claudine ("+claudineENS+"): 🔍 The CRM is down; which customer id is it?")
	checkToolCalls(t, p, map[string]float64{"crm/fail/error": 1, "crm/hang/timeout": 1, "crm/lookup_customer/error": 1, "crm/nosuch/unknown": 0})
}

// A server that is down when conclave starts leaves its agents without its
// tools (WARN); the conversation goes on.
func TestToolServerDownAtStart(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newToolModel(map[string][]func(llmfake.Request) llmfake.Reply{
		"Claudine/context-not-found": {text(`{"session": "C45653", "message": ""}`)},
		"Claudine/context-found":     {text("📚 C45653 has full cover.")},
		"Elen/default":               {text("🧭 Done.")},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	down := httptest.NewServer(mcptest.Handler())
	url := down.URL
	down.Close()
	path := r.config(t, fmt.Sprintf("\n[[mcp.servers]]\nname = \"crm\"\nurl = %q\nheaders = { Authorization = \"$CRM_AUTH\" }\ntimeout = \"2s\"\n", url)+
		agentSection(claudineENS, "Claudine", "expert")+"tools = [\"crm\"]\n"+channelSection(elenENS, claudineENS))
	p := start(t, path, toolEnv)

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does C45653 have?"})
	r.waitPosts(t, p, 2)
	checkPosts(t, r.slack, "Claudine: 📚 C45653 has full cover.", "Elen: 🧭 Done.")
	for _, req := range append(model.requests("Claudine/context-not-found"), model.requests("Claudine/context-found")...) {
		if req.Has("tools") {
			t.Errorf("tools offered from a server that is down: %v", toolNames(req))
		}
	}
	if !strings.Contains(p.logs.String(), `"level":"WARN","msg":"mcp: server unreachable; its agents go without its tools","component":"mcp","server":"crm"`) {
		t.Errorf("no WARN for the unreachable server:\n%s", p.logs)
	}
	noSecretIn(t, p)
}

// A stdio server that crashes mid-conversation is started again; the
// crashed call reads as an error, and the next turn has the tools back.
func TestToolServerCrashIsRestarted(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newToolModel(map[string][]func(llmfake.Request) llmfake.Reply{
		"Claudine/context-not-found": {
			calls(llmfake.Call("crm__crash", `{}`)),
			text(`{"session": "", "message": "🔍 My CRM fell over; which customer?"}`),
			calls(llmfake.Call("crm__starts", `{}`), llmfake.Call("crm__secret", `{}`)),
			text(`{"session": "", "message": "🔍 The CRM is back; still, which customer?"}`),
		},
		"Elen/default": {text("🧭 Waiting."), text("🧭 Still waiting.")},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	section, starts := stdioSection(t, "crm", "10s")
	path := r.config(t, section+agentSection(claudineENS, "Claudine", "expert")+"tools = [\"crm\"]\n"+channelSection(elenENS, claudineENS))
	p := start(t, path, toolEnv)

	first := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", which customer is this?"})
	r.waitPosts(t, p, 2)
	threading := model.mustRequests(t, "Claudine/context-not-found", 2)
	if got := toolResults(threading[1]); len(got) != 1 || !strings.HasPrefix(got[0], "call_1: error: the call failed: ") {
		t.Errorf("the crashed call's result: %q", got)
	}
	if err := p.logs.Wait(waitCtx(t), func(s string) bool { return strings.Count(s, `"msg":"mcp: connected"`) >= 2 }); err != nil {
		t.Fatalf("the server was not started again (%v):\n%s", err, p.logs)
	}

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: first.TS, Text: claudineENS + ", try again please."})
	r.waitPosts(t, p, 4)
	checkPosts(t, r.slack,
		"Claudine: 🔍 My CRM fell over; which customer?", "Elen: 🧭 Waiting.",
		"Claudine: 🔍 The CRM is back; still, which customer?", "Elen: 🧭 Still waiting.")
	threading = model.mustRequests(t, "Claudine/context-not-found", 4)
	checkStrings(t, "tool results after the restart", toolResults(threading[3]), "call_1: 2", "call_2: secret=crm-secret-value")
	if b, _ := os.ReadFile(starts); strings.Count(string(b), "\n") != 2 {
		t.Errorf("server starts: %q", b)
	}
	if !strings.Contains(p.logs.String(), `"msg":"mcp: server went away; restarting it"`) {
		t.Errorf("no log of the restart:\n%s", p.logs)
	}
	checkToolCalls(t, p, map[string]float64{"crm/crash/failed": 1, "crm/starts/ok": 1, "crm/secret/ok": 1})
	noSecretIn(t, p)
}

// A model that keeps calling tools is stopped after llm.max_tool_rounds:
// the request after the last round offers no tools, and its answer is
// posted.
func TestToolRoundCap(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	lookup := calls(llmfake.Call("crm__lookup_customer", `{"name":"Ada Lovelace"}`))
	model := newToolModel(map[string][]func(llmfake.Request) llmfake.Reply{
		"Claudine/context-not-found": {text(`{"session": "C45653", "message": ""}`)},
		"Claudine/context-found": {lookup, lookup, func(req llmfake.Request) llmfake.Reply {
			if req.Has("tools") {
				return llmfake.Calls(llmfake.Call("crm__lookup_customer", `{}`))
			}
			return llmfake.Text("📚 Enough looking: C45653 has full cover.")
		}},
		"Elen/default": {text("🧭 Noted.")},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	path := r.config(t, httpSection(t, "crm", "10s")+agentSection(claudineENS, "Claudine", "expert")+"tools = [\"crm\"]\n"+
		channelSection(elenENS, claudineENS))
	rewrite(t, path, "max_retries = 1", "max_retries = 1\nmax_tool_rounds = 2")
	p := start(t, path, toolEnv)

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does C45653 have?"})
	r.waitPosts(t, p, 2)
	checkPosts(t, r.slack, "Claudine: 📚 Enough looking: C45653 has full cover.", "Elen: 🧭 Noted.")
	found := model.mustRequests(t, "Claudine/context-found", 3) // two rounds, then one without tools
	for i, req := range found {
		if req.Has("tools") != (i < 2) {
			t.Errorf("request %d: tools sent = %v", i+1, req.Has("tools"))
		}
	}
	checkStrings(t, "the last request's tool results", toolResults(found[2]), "call_1: C45653", "call_1: C45653")
	checkHistory(t, "facilitator", model.requests("Elen/default")[0],
		"user: Ada (person): "+claudineENS+", what cover does C45653 have?",
		"user: (used crm__lookup_customer)",
		"user: (used crm__lookup_customer)",
		"user: Claudine ("+claudineENS+"): 📚 Enough looking: C45653 has full cover.")
	checkToolCalls(t, p, map[string]float64{"crm/lookup_customer/ok": 2})
}

// conclave tools list prints each agent's tools (name, server, first line
// of the description), and names an unreachable server with its error.
func TestToolsListCommand(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	down := httptest.NewServer(mcptest.Handler())
	url := down.URL
	down.Close()
	path := r.config(t, httpSection(t, "crm", "5s")+
		fmt.Sprintf("\n[[mcp.servers]]\nname = \"search\"\nurl = %q\nheaders = { Authorization = \"$CRM_AUTH\" }\ntimeout = \"2s\"\n", url)+
		agentSection(claudineENS, "Claudine", "expert")+"tools = [\"crm/lookup_customer\", \"crm/fail\"]\n"+
		fmt.Sprintf("\n[agent_settings.%q]\ntools = [\"search\"]\n", victorENS))

	code, out, errOut := cli(t, toolEnv, "tools", "list", "--config", path, "--agent", strings.ToUpper(claudineENS))
	want := claudineENS + "\n" +
		"  crm__lookup_customer  crm  Finds a customer's id by name.\n" +
		"  crm__fail             crm  Always fails.\n"
	if code != 0 || out != want {
		t.Errorf("--agent: exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", code, out, want, errOut)
	}

	code, out, _ = cli(t, toolEnv, "tools", "list", "--config", path)
	for _, line := range []string{
		elenENS + "\n  (no tools)\n",
		victorENS + "\n  (no tools)\n",
		"server search is unreachable: connect: ",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("stdout lacks %q:\n%s", line, out)
		}
	}
	if code != 1 || strings.Contains(out, "crm-secret-value") {
		t.Errorf("exit %d (want 1: a server is unreachable); stdout:\n%s", code, out)
	}

	if code, _, errOut := cli(t, nil, "tools", "list", "--config", path); code != 1 || !strings.Contains(errOut, "mcp.servers[0].headers.Authorization: environment variable CRM_AUTH is not set") || strings.Contains(errOut, "crm-secret") {
		t.Errorf("without the variable: exit %d, %q", code, errOut)
	}
	if code, out, _ := cli(t, nil, "tools"); code != 0 || !strings.Contains(out, "tools list") {
		t.Errorf("no sub-command: exit %d, %q (want the group's commands)", code, out)
	}
}

// everythingServer finds @modelcontextprotocol/server-everything, the MCP
// project's reference server on npm: $CONCLAVE_MCP_EVERYTHING (set by
// .ci/run, which installs it; then it must work), else the cache dir
// .ci/run installs it into. The test never downloads: without node and
// npx, or without the package installed, it skips and says why.
func everythingServer(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CONCLAVE_MCP_EVERYTHING"); bin != "" {
		return bin
	}
	for _, tool := range []string{"npx", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the test with the real @modelcontextprotocol/server-everything needs Node.js", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache dir (%v) to find @modelcontextprotocol/server-everything in", err)
	}
	bin := filepath.Join(cache, "conclave-ci", "mcp-everything", "node_modules", ".bin", "mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("@modelcontextprotocol/server-everything is not installed at %s (.ci/run installs it; tests never download): %v", bin, err)
	}
	return bin
}

// A real third-party MCP server over stdio: an expert adds numbers and
// reads the server's environment with its tools. The server gets PATH,
// HOME and its own env, never conclave's secrets.
func TestRealEverythingServer(t *testing.T) {
	bin := everythingServer(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newToolModel(map[string][]func(llmfake.Request) llmfake.Reply{
		"Claudine/context-not-found": {
			calls(llmfake.Call("everything__get-sum", `{"a": 2, "b": 3}`), llmfake.Call("everything__get-env", `{}`)),
			text(`{"session": "C45653", "message": ""}`),
		},
		"Claudine/context-found": {text("📚 2 and 3 make 5.")},
		"Elen/default":           {text("🧭 Thanks.")},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	section := fmt.Sprintf("\n[[mcp.servers]]\nname = \"everything\"\ncommand = [%q, \"stdio\"]\nenv = { EVERYTHING_TOKEN = \"$CRM_SECRET\" }\ntimeout = \"60s\"\n", bin)
	path := r.config(t, section+agentSection(claudineENS, "Claudine", "expert")+"tools = [\"everything/get-sum\", \"everything/get-env\"]\n"+
		channelSection(elenENS, claudineENS))
	environ := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "CRM_SECRET": "crm-secret-value", "OPENAI_API_KEY": "sk-conclave-own-key"}
	p := start(t, path, environ)

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what is 2 + 3 for customer C45653?"})
	r.waitPosts(t, p, 2)
	checkPosts(t, r.slack, "Claudine: 📚 2 and 3 make 5.", "Elen: 🧭 Thanks.")
	threading := model.mustRequests(t, "Claudine/context-not-found", 2)
	checkStrings(t, "tools offered", toolNames(threading[0]), "everything__get-sum", "everything__get-env")
	results := toolResults(threading[1])
	if len(results) != 2 || results[0] != "call_1: The sum of 2 and 3 is 5." {
		t.Fatalf("tool results: %q", results)
	}
	if !strings.Contains(results[1], `"EVERYTHING_TOKEN": "crm-secret-value"`) || strings.Contains(results[1], "sk-conclave-own-key") {
		t.Errorf("the server's environment: %s", results[1])
	}
	checkToolCalls(t, p, map[string]float64{"everything/get-sum/ok": 1, "everything/get-env/ok": 1})
	noSecretIn(t, p)
}

// A prompt's settings file sets tools for a role or a single prompt: it
// replaces the agent's tools there, and an empty list offers none.
func TestToolsFromPromptSettings(t *testing.T) {
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newToolModel(map[string][]func(llmfake.Request) llmfake.Reply{
		"Claudine/context-not-found": {text(`{"session": "C45653", "message": ""}`)},
		"Claudine/context-found":     {text("📚 Full cover.")},
		"Elen/default":               {text("🧭 Good.")},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	path := r.config(t, lookupSections(httpSection(t, "crm", "10s")))
	templateRepo(t, path, map[string]string{
		"expert/context-found.toml": "tools = []",
		"facilitator/default.toml":  `tools = ["crm/fail", "crm/hang"]`,
	})
	p := start(t, path, toolEnv)

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does C45653 have?"})
	r.waitPosts(t, p, 2)
	checkStrings(t, "threading (the agent's tools)", toolNames(model.mustRequests(t, "Claudine/context-not-found", 1)[0]), "crm__lookup_customer")
	if req := model.mustRequests(t, "Claudine/context-found", 1)[0]; req.Has("tools") {
		t.Errorf("context-found offered %v; its settings say none", toolNames(req))
	}
	checkStrings(t, "facilitator (its settings' tools)", toolNames(model.mustRequests(t, "Elen/default", 1)[0]), "crm__fail", "crm__hang")
}
