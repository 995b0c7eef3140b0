package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/conclavehq/conclave/agents/pairing"
)

func noEnv(string) string { return "" }

func TestExampleConfigLoadsAndValidates(t *testing.T) {
	cfg, err := loadConfig("../../config.example.toml", true)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	cfg.applyEnv(noEnv)
	if err := cfg.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if got := len(cfg.Agents); got != 4 {
		t.Errorf("agents = %d, want 4", got)
	}
	if cfg.Conversation.Timeout.Duration != 10*time.Minute {
		t.Errorf("conversation.timeout = %v", cfg.Conversation.Timeout)
	}
	if p := cfg.LLM.Profiles["cheap"]; p.Model == nil || *p.Model != "gpt-4o-mini" {
		t.Errorf("profile cheap = %+v", p)
	}
	if len(cfg.MCP.Servers) != 0 {
		t.Errorf("the example starts %d MCP server(s); those that need secrets stay commented out", len(cfg.MCP.Servers))
	}
}

// uncommentExamples turns the example's commented-out settings (a "#"
// followed by no space) into settings, prose comments ("# …") left alone.
func uncommentExamples(data []byte) []byte {
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "#"); ok && !strings.HasPrefix(rest, " ") {
			lines[i] = rest
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

// TestExampleCommentedOutValidates: the example's commented-out settings
// (the MCP servers, the tools that use them) are valid once uncommented.
func TestExampleCommentedOutValidates(t *testing.T) {
	data, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	if err := decodeConfig("config.example.toml", uncommentExamples(data), &cfg); err != nil {
		t.Fatalf("uncommented: %v", err)
	}
	cfg.applyEnv(noEnv)
	if err := cfg.validate(); err != nil {
		t.Fatalf("uncommented: validate: %v", err)
	}
	if len(cfg.MCP.Servers) != 2 || cfg.Templates.Dir != "templates" {
		t.Errorf("uncommented: %d MCP server(s), templates.dir %q; want 2 and \"templates\"", len(cfg.MCP.Servers), cfg.Templates.Dir)
	}
}

// TestExampleMatchesDefaults: the example says it shows every default; the
// scalar keys of the sections that have defaults must agree with them.
func TestExampleMatchesDefaults(t *testing.T) {
	cfg, err := loadConfig("../../config.example.toml", true)
	if err != nil {
		t.Fatal(err)
	}
	def := defaultConfig()
	pairs := map[string][2]any{
		"shutdown_grace":   {cfg.ShutdownGrace, def.ShutdownGrace},
		"slack":            {cfg.Slack, def.Slack},
		"memory":           {cfg.Memory, def.Memory},
		"templates":        {cfg.Templates, def.Templates},
		"conversation":     {cfg.Conversation, def.Conversation},
		"expert":           {cfg.Expert, def.Expert},
		"errors":           {cfg.Errors, def.Errors},
		"http":             {cfg.HTTP, def.HTTP},
		"log":              {cfg.Log, def.Log},
		"ens.base_domains": {cfg.ENS.BaseDomains, def.ENS.BaseDomains},
		"ens.text_keys":    {cfg.ENS.TextKeys, def.ENS.TextKeys},
		"ens.cache_ttl":    {cfg.ENS.CacheTTL, def.ENS.CacheTTL},
		"ens.negative_ttl": {cfg.ENS.NegativeTTL, def.ENS.NegativeTTL},
		"ens.stale_max":    {cfg.ENS.StaleMax, def.ENS.StaleMax},
		"ens.rpc_timeout":  {cfg.ENS.RPCTimeout, def.ENS.RPCTimeout},
		"ens.chains":       {cfg.ENS.Chains, def.ENS.Chains},
		"llm.model":        {*cfg.LLM.Model, *def.LLM.Model},
		"llm.base_url":     {*cfg.LLM.BaseURL, *def.LLM.BaseURL},
		"llm.max_retries":  {*cfg.LLM.MaxRetries, *def.LLM.MaxRetries},
		"llm.timeout":      {*cfg.LLM.Timeout, *def.LLM.Timeout},
		"llm.total":        {*cfg.LLM.TotalTimeout, *def.LLM.TotalTimeout},
		"llm.max_input":    {*cfg.LLM.MaxInputTokens, *def.LLM.MaxInputTokens},
		"llm.json_mode":    {*cfg.LLM.JSONMode, *def.LLM.JSONMode},
		"llm.merge":        {*cfg.LLM.MergeConsecutive, *def.LLM.MergeConsecutive},

		"ens.resolve_timeout": {cfg.ENS.ResolveTimeout, def.ENS.ResolveTimeout},
	}
	for name, p := range pairs {
		if fmt.Sprint(p[0]) != fmt.Sprint(p[1]) {
			t.Errorf("%s: example %v, default %v", name, p[0], p[1])
		}
	}
}

// TestExampleDocumentsEveryKey walks the Config type and checks that each
// key path appears in config.example.toml (set, or commented out).
func TestExampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := toml.Unmarshal(uncommentExamples(data), &doc); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	collectPaths("", doc, have)
	want := map[string]bool{}
	typePaths("", reflect.TypeFor[Config](), want)
	var missing []string
	// A profile key is documented once, under [llm] or under a profile.
	for p := range want {
		if k, ok := strings.CutPrefix(p, "llm.profiles.*."); ok && have["llm."+k] {
			have[p] = true
		}
		if k, ok := strings.CutPrefix(p, "llm."); ok && have["llm.profiles.*."+k] {
			have[p] = true
		}
	}
	for p := range want {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("config.example.toml does not document: %s", strings.Join(missing, ", "))
	}
	if len(want) < 60 {
		t.Errorf("walked only %d keys; the walk is broken", len(want))
	}
}

// collectPaths records the key paths of a decoded TOML document; map keys
// chosen by the operator (profile names, agent names) become "*" and
// array elements "[]".
func collectPaths(prefix string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := join(prefix, k)
			if wildcardParent(prefix) {
				p = join(prefix, "*")
			}
			out[p] = true
			collectPaths(p, e, out)
		}
	case []any:
		for _, e := range x {
			if _, ok := e.(map[string]any); ok {
				collectPaths(prefix+"[]", e, out)
			}
		}
	}
}

// wildcardParent tells which tables are keyed by operator-chosen names.
func wildcardParent(p string) bool {
	return p == "llm.profiles" || p == "llm.prices" || p == "agent_settings"
}

func typePaths(prefix string, t reflect.Type, out map[string]bool) {
	for f := range t.Fields() {
		tag := strings.Split(f.Tag.Get("toml"), ",")[0]
		ft := f.Type
		if f.Anonymous {
			typePaths(prefix, ft, out)
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		p := join(prefix, tag)
		out[p] = true
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeFor[Duration]():
		case ft.Kind() == reflect.Struct:
			typePaths(p, ft, out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			typePaths(p+"[]", ft.Elem(), out)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			typePaths(p+".*", ft.Elem(), out)
		}
	}
}

func TestConfigFileLookup(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "config.toml")
	if _, err := loadConfig(missing, false); err != nil {
		t.Errorf("missing default file: %v, want embedded defaults", err)
	}
	if _, err := loadConfig(missing, true); err == nil || !strings.Contains(err.Error(), "config.toml") {
		t.Errorf("missing explicit file: err = %v, want an error naming the file", err)
	}
}

func TestConfigErrorsNameKeyAndLine(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want []string
	}{
		{"unknown key", "[slack]\napi_url = \"http://x/\"\napp_tokn = \"x\"\n", []string{"c.toml:3:", `unknown key "slack.app_tokn"`}},
		{"unknown table", "[slak]\nx = 1\n", []string{"c.toml:", `unknown key "slak`}},
		{"unknown agent key", "[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"expert\"\nmodle = \"x\"\n", []string{"c.toml:4:", `"agents.modle"`}},
		{"bad duration", "[conversation]\n\ntimeout = \"soon\"\n", []string{"c.toml:3:", "conversation.timeout", `invalid duration "soon"`}},
		{"wrong type", "[conversation]\nmax_turns = \"many\"\n", []string{"c.toml:2:", "conversation.max_turns"}},
		{"syntax", "[slack\n", []string{"c.toml:1:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			err := decodeConfig("c.toml", []byte(tt.toml), &cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigValidationNamesKey(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want string
	}{
		{"api url without slash", "[slack]\napi_url = \"http://x/api\"", "slack.api_url"},
		{"admin id", "[slack]\nadmins = [\"bob\"]", "slack.admins[0]"},
		{"everyone and a list", "[slack]\nadmins = [\"U1\", \"*\"]", `slack.admins[1]: "*" (everyone) must be the only entry`},
		{"app token kind", "[slack]\napp_token = \"xoxb-1\"", "slack.app_token: must be an app-level token"},
		{"max turns", "[conversation]\nmax_turns = 0", "conversation.max_turns: must be > 0"},
		{"negative timeout", "[conversation]\ntimeout = \"-1m\"", "conversation.timeout"},
		{"threshold", "[expert]\nmatch_threshold = 1.5", "expert.match_threshold"},
		{"scope", "[expert]\nsession_scope = \"team\"", "expert.session_scope"},
		{"notify", "[errors]\nnotify = \"email\"", "errors.notify"},
		{"role", "[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"boss\"", "agents[0].role"},
		{"agent name", "[[agents]]\nens = \"alice\"\nrole = \"expert\"", "agents[0].ens"},
		{"duplicate agent", "[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"expert\"\n[[agents]]\nens = \"A.b.1.protocol6022.eth\"\nrole = \"expert\"", "agents[1].ens"},
		{"unknown profile", "[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"expert\"\nllm_profile = \"fast\"", "agents[0].llm_profile: unknown profile \"fast\""},
		{"policy", "[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"expert\"\nsession_policy = \"some\"", "agents[0].session_policy"},
		{"pattern missing", "[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"expert\"\nsession_policy = \"pattern\"", "agents[0].session_pattern: is required"},
		{"pattern invalid", "[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"expert\"\nsession_policy = \"pattern\"\nsession_pattern = \"(\"", "agents[0].session_pattern: invalid RE2"},
		{"clone of non-human", "[[agents]]\nens = \"h.b.1.protocol6022.eth\"\nrole = \"expert\"\n[[agents]]\nens = \"c.b.1.protocol6022.eth\"\nrole = \"clone\"\nclone_of = \"h.b.1.protocol6022.eth\"", "agents[1].clone_of"},
		{"channel id", "[[channels]]\nid = \"general\"\nagents = []", "channels[0].id"},
		{"start", "[[channels]]\nid = \"C1\"\nstart = \"always\"", "channels[0].start"},
		{"two facilitators", "[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"facilitator\"\n[[agents]]\nens = \"b.b.1.protocol6022.eth\"\nrole = \"facilitator\"\n[[channels]]\nid = \"C1\"\nagents = [\"a.b.1.protocol6022.eth\", \"b.b.1.protocol6022.eth\"]", "channels[0].agents: at most one facilitator"},
		{"registry", "[[ens.chains]]\nchain_id = 5\nregistry = \"nope\"", "ens.chains[0].registry"},
		{"collection label", "[[ens.collections]]\nchain_id = 5\naddress = \"0x23dbc335f966d9869940FB55f61E919118AAD236\"\nlabel = \"Acme Corp\"", "ens.collections[0].label"},
		{"resolve timeout", "[ens]\nresolve_timeout = \"0s\"", "ens.resolve_timeout: must be a positive duration"},
		{"base domain", "[ens]\nbase_domains = [\"Protocol6022.ETH\"]", "ens.base_domains[0]"},
		{"llm url", "[llm]\nbase_url = \"localhost:11434\"", "llm.base_url"},
		{"llm url with credentials", "[llm]\nbase_url = \"ftp://ada:hunter2@llm.example/v1\"", `llm.base_url: "ftp://****@llm.example/v1" is not an http(s) URL`},
		{"profile temperature", "[llm.profiles.hot]\ntemperature = 3.0", "llm.profiles.hot.temperature"},
		{"public url", "[http]\npublic_url = \"wallet.example.com\"", "http.public_url"},
		{"unknown judge profile", "[templates]\njudge_profile = \"nope\"", `templates.judge_profile: "nope" is not a profile`},
		{"log level", "[log]\nlevel = \"loud\"", "log.level"},
		{"tool rounds", "[llm]\nmax_tool_rounds = 0", "llm.max_tool_rounds: must be > 0"},
		{"tool calls per round", "[llm]\nmax_tool_calls_per_round = 0", "llm.max_tool_calls_per_round: must be > 0"},
		{"stream interval", "[slack]\nstream_interval = \"0s\"", "slack.stream_interval: must be a positive duration"},
		{"feedback", "[slack]\nfeedback = \"some\"", `slack.feedback: must be answers, all or off (got "some")`},
		{"stream method", "[slack]\nstream_method = \"native\"", `slack.stream_method: "native" is not one of auto, update`},
		{"otel endpoint", "[otel]\nendpoint = \"localhost:4318\"", "otel.endpoint: must be an http(s) URL"},
		{"trusted proxy", "[http]\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0.1\"]", `http.trusted_proxies[1]: "10.0.0.1" is not a CIDR`},
		{"tool result bound", "[tools]\nmax_result_bytes = 0", "tools.max_result_bytes: must be > 0"},
		{"clone scope", "[memory]\nclone_scope = \"team\"", "memory.clone_scope"},
		{"trace retention", "[trace]\nretention = \"0s\"", "trace.retention: must be a positive duration"},
		{"trace bound", "[trace]\nmax_bytes_per_conversation = 0", "trace.max_bytes_per_conversation: must be > 0"},
		{"trace bound over all", "[trace]\nmax_bytes = 0", "trace.max_bytes: must be > 0"},
		{"negative trace bound over all", "[trace]\nmax_bytes = -1", "trace.max_bytes: must be > 0"},
		{"trace bound over all under one conversation's", "[trace]\nmax_bytes = 1000\nmax_bytes_per_conversation = 2000", "trace.max_bytes: must be at least trace.max_bytes_per_conversation (2000)"},
		{"negative price", "[llm.prices.\"gpt-4o\"]\ninput = -1\noutput = 2", `llm.prices."gpt-4o": prices must be >= 0`},
		{"price of no model", "[llm.prices.\" \"]\ninput = 1", `llm.prices." ": must name a model`},
		{"negative person budget", "[budget]\ndaily_tokens_per_person = -5", "budget.daily_tokens_per_person: must be >= 0"},
		{"negative workspace budget", "[budget]\ndaily_tokens = -1", "budget.daily_tokens: must be >= 0"},
		{"negative channel budget", "[[channels]]\nid = \"C01\"\ndaily_tokens = -1", "channels[0].daily_tokens: must be >= 0"},
		{"server name", "[[mcp.servers]]\nname = \"CRM\"\nurl = \"http://x/mcp\"", `mcp.servers[0].name: "CRM" must be [a-z0-9_-]+`},
		{"server name with the separator", "[[mcp.servers]]\nname = \"crm__eu\"\nurl = \"http://x/mcp\"", `mcp.servers[0].name: "crm__eu" must not contain "__" (it joins server and tool names)`},
		{"server twice", "[[mcp.servers]]\nname = \"crm\"\nurl = \"http://x/mcp\"\n[[mcp.servers]]\nname = \"crm\"\ncommand = [\"crm\"]", `mcp.servers[1].name: "crm" is used twice`},
		{"server transport missing", "[[mcp.servers]]\nname = \"crm\"", "mcp.servers[0]: needs exactly one of command (stdio) and url (Streamable HTTP)"},
		{"server both transports", "[[mcp.servers]]\nname = \"crm\"\nurl = \"http://x/mcp\"\ncommand = [\"crm\"]", "mcp.servers[0]: needs exactly one of command"},
		{"server empty command", "[[mcp.servers]]\nname = \"crm\"\ncommand = [\" \"]", "mcp.servers[0].command: the program is empty"},
		{"server url", "[[mcp.servers]]\nname = \"crm\"\nurl = \"crm.local/mcp\"", "mcp.servers[0].url: is not an http(s) URL"},
		{"server env on http", "[[mcp.servers]]\nname = \"crm\"\nurl = \"http://x/mcp\"\nenv = { A = \"b\" }", "mcp.servers[0].env: is for stdio servers"},
		{"server secret_args on http", "[[mcp.servers]]\nname = \"crm\"\nurl = \"http://x/mcp\"\nsecret_args = true", "mcp.servers[0].secret_args: is for stdio servers (command)"},
		{"server headers on stdio", "[[mcp.servers]]\nname = \"crm\"\ncommand = [\"crm\"]\nheaders = { A = \"b\" }", "mcp.servers[0].headers: is for HTTP servers"},
		{"server timeout", "[[mcp.servers]]\nname = \"crm\"\ncommand = [\"crm\"]\ntimeout = \"-1s\"", "mcp.servers[0].timeout: must be a positive duration"},
		{"agent tools", "[[mcp.servers]]\nname = \"crm\"\ncommand = [\"crm\"]\n[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"expert\"\ntools = [\"crm/lookup\", \"search\"]", `agents[0].tools[1]: "search" names no [[mcp.servers]]`},
		{"agent tool entry", "[[mcp.servers]]\nname = \"crm\"\ncommand = [\"crm\"]\n[[agents]]\nens = \"a.b.1.protocol6022.eth\"\nrole = \"expert\"\ntools = [\"crm/\"]", `agents[0].tools[0]: "crm/" is not "server" or "server/tool"`},
		{"agent settings tools", "[agent_settings.\"v.b.1.protocol6022.eth\"]\ntools = [\"crm\"]", `agent_settings."v.b.1.protocol6022.eth".tools[0]: "crm" names no [[mcp.servers]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			if err := decodeConfig("c.toml", []byte(tt.toml), &cfg); err != nil {
				t.Fatalf("decode: %v", err)
			}
			cfg.applyEnv(noEnv)
			err := cfg.validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestSecretsFromEnvironment(t *testing.T) {
	cfg := defaultConfig()
	file := `
[slack]
app_token = "xapp-file-secret"
bot_token = "xoxb-file-secret"
[llm]
api_key = "sk-file-secret"
[llm.profiles.other]
api_key_env = "OTHER_KEY"
[memory]
redis_url = "redis://:hunter2@db:6379/0"
[[ens.chains]]
chain_id = 137
registry = "0x23dbc335f966d9869940FB55f61E919118AAD236"
`
	if err := decodeConfig("c.toml", []byte(file), &cfg); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SLACK_BOT_TOKEN":  "xoxb-env",
		"OTHER_KEY":        "sk-other-env",
		"ETH_RPC_URL_137":  "https://polygon.example/v2/key",
		"UNRELATED_SECRET": "x",
	}
	inFile := cfg.applyEnv(func(k string) string { return env[k] })
	if cfg.Slack.BotToken != "xoxb-env" {
		t.Errorf("bot token = %q, want the environment's", cfg.Slack.BotToken)
	}
	if cfg.Slack.AppToken != "xapp-file-secret" {
		t.Errorf("app token = %q, want the file's", cfg.Slack.AppToken)
	}
	if got := *cfg.LLM.Profiles["other"].APIKey; got != "sk-other-env" {
		t.Errorf("profile key = %q", got)
	}
	if cfg.ENS.Chains[0].RPCURL != "https://polygon.example/v2/key" {
		t.Errorf("rpc url = %q", cfg.ENS.Chains[0].RPCURL)
	}
	slices.Sort(inFile)
	want := []string{"llm.api_key", "memory.redis_url", "slack.app_token"}
	if !slices.Equal(inFile, want) {
		t.Errorf("secrets reported in file = %v, want %v", inFile, want)
	}
}

func TestErrorsNeverEchoSecrets(t *testing.T) {
	cases := []string{
		"[slack]\napp_token = \"xoxb-very-secret-value\"",
		"[slack]\napp_token = 12\nbot_token = \"xoxb-very-secret-value\"",
		"[slack]\nbot_token = [\"xoxb-very-secret-value\"]",
	}
	for _, c := range cases {
		cfg := defaultConfig()
		err := decodeConfig("c.toml", []byte(c), &cfg)
		if err == nil {
			cfg.applyEnv(noEnv)
			err = cfg.validate()
		}
		if err == nil {
			t.Fatalf("%q: no error", c)
		}
		if strings.Contains(err.Error(), "very-secret") {
			t.Errorf("error echoes the secret: %v", err)
		}
	}
}

// "$NAME" values come from the environment; a stdio server gets its env
// plus a few variables programs need, never conclave's secrets; a value
// written in the file under a secret-looking name is warned about.
func TestMCPServersFromEnvironment(t *testing.T) {
	cfg := defaultConfig()
	file := `
[[mcp.servers]]
name = "crm"
command = ["crm-mcp"]
env = { CRM_TOKEN = "$CRM_TOKEN", REGION = "eu", API_KEY = "literal-key" }
[[mcp.servers]]
name = "search"
url = "https://search.example/mcp"
headers = { Authorization = "$SEARCH_AUTH", Accept = "application/json" }
`
	if err := decodeConfig("c.toml", []byte(file), &cfg); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CRM_TOKEN": "crm-secret", "SEARCH_AUTH": "Bearer s", "PATH": "/bin", "HOME": "/home/c", "SLACK_BOT_TOKEN": "xoxb-env"}
	getenv := func(k string) string { return env[k] }
	inFile := cfg.applyEnv(getenv)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inFile, []string{"mcp.servers[0].env.API_KEY"}) {
		t.Errorf("secrets in the file = %v", inFile)
	}
	servers, err := mcpServers(cfg.MCP, getenv)
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{"CRM_TOKEN": "crm-secret", "REGION": "eu", "API_KEY": "literal-key", "PATH": "/bin", "HOME": "/home/c"}
	if !reflect.DeepEqual(servers[0].Env, wantEnv) || servers[0].Timeout != 30*time.Second {
		t.Errorf("stdio server = %+v", servers[0])
	}
	if want := map[string]string{"Authorization": "Bearer s", "Accept": "application/json"}; !reflect.DeepEqual(servers[1].Headers, want) || servers[1].Env != nil {
		t.Errorf("http server = %+v", servers[1])
	}
	if cfg.MCP.Servers[0].Env["CRM_TOKEN"] != "$CRM_TOKEN" {
		t.Error("the configuration itself must keep the reference, not the secret")
	}

	delete(env, "SEARCH_AUTH")
	_, err = mcpServers(cfg.MCP, getenv)
	if err == nil || err.Error() != "config: mcp.servers[1].headers.Authorization: environment variable SEARCH_AUTH is not set" {
		t.Errorf("missing variable: %v", err)
	}
}

// TestDeployConfigLoads: the configuration deploy/compose.yaml mounts is
// valid as shipped.
func TestDeployConfigLoads(t *testing.T) {
	cfg, err := loadConfig("../../deploy/config/config.toml", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg.applyEnv(noEnv)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
}

// slack.admins = ["*"] is valid: it opens adding and removing agents to
// everyone.
func TestAdminsEveryoneIsValid(t *testing.T) {
	cfg := defaultConfig()
	if err := decodeConfig("c.toml", []byte("[slack]\nadmins = [\"*\"]"), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.applyEnv(noEnv)
	if err := cfg.validate(); err != nil && strings.Contains(err.Error(), "slack.admins") {
		t.Fatalf("validate() = %v", err)
	}
	if got := pairing.Admins(cfg.Slack.Admins).Who(); got != "everyone" {
		t.Errorf("Who() = %q", got)
	}
}
