package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// envSample gives, for a key's type, a value as written in the file and a
// different one as written in the environment.
func envSample(t reflect.Type) (file, envValue string, ok bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[Duration]():
		return `"3s"`, "7s", true
	case t.Kind() == reflect.String:
		return `"from-file"`, "from-env", true
	case t.Kind() == reflect.Bool:
		return "true", "false", true
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64, t.Kind() == reflect.Uint64:
		return "3", "7", true
	case t.Kind() == reflect.Float64:
		return "0.25", "0.5", true
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return `["from-file"]`, "a, b", true
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return "[{}]", "[{}, {}]", true
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.String:
		return `{ f = "1" }`, `{ e = "2" }`, true
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct:
		return "{ f = {} }", "{ e = {} }", true
	}
	return "", "", false
}

// fileWith is a TOML document setting one key.
func fileWith(path, value string) string {
	table, key := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		table, key = "["+path[:i]+"]\n", path[i+1:]
	}
	return table + key + " = " + value + "\n"
}

// TestEnvOverridesEveryKey walks every key of the Config type (so keys
// added later are covered) and checks, for each, the file's value, the
// environment's value, and that the environment wins over the file.
func TestEnvOverridesEveryKey(t *testing.T) {
	keys := envKeys()
	if len(keys) < 50 {
		t.Fatalf("only %d keys; the walk is broken", len(keys))
	}
	for _, k := range keys {
		t.Run(k.path, func(t *testing.T) {
			fileValue, envValue, ok := envSample(k.typ)
			if !ok {
				t.Fatalf("no sample value for %s (%s): extend envSample", k.path, k.typ)
			}
			// What the file gives for each text: the reference.
			decoded := func(value string) any {
				cfg := defaultConfig()
				if err := decodeConfig("ref.toml", []byte(fileWith(k.path, value)), &cfg); err != nil {
					t.Fatal(err)
				}
				return reflect.ValueOf(cfg).FieldByIndex(k.index).Interface()
			}
			wantFile := decoded(fileValue)
			envAsTOML, err := envTOML(k.typ, envValue)
			if err != nil {
				t.Fatal(err)
			}
			wantEnv := decoded(envAsTOML)
			if reflect.DeepEqual(wantFile, wantEnv) {
				t.Fatalf("the samples do not differ: %v", wantFile)
			}
			cases := []struct {
				name string
				file string
				env  map[string]string
				want any
			}{
				{"file", fileValue, nil, wantFile},
				{"env", "", map[string]string{k.env: envValue}, wantEnv},
				{"env wins", fileValue, map[string]string{k.env: envValue}, wantEnv},
			}
			for _, c := range cases {
				cfg := defaultConfig()
				if c.file != "" {
					if err := decodeConfig("c.toml", []byte(fileWith(k.path, c.file)), &cfg); err != nil {
						t.Fatal(err)
					}
				}
				set, err := cfg.applyEnvKeys(func(name string) string { return c.env[name] })
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if got := reflect.ValueOf(cfg).FieldByIndex(k.index).Interface(); !reflect.DeepEqual(got, c.want) {
					t.Errorf("%s: %s = %#v, want %#v", c.name, k.path, got, c.want)
				}
				if wantSet := c.env != nil; slices.Contains(set, k.path) != wantSet {
					t.Errorf("%s: keys set from the environment = %v", c.name, set)
				}
			}
		})
	}
}

func TestEnvNames(t *testing.T) {
	seen := map[string]string{}
	for _, k := range envKeys() {
		if other, dup := seen[k.env]; dup {
			t.Errorf("%s and %s share %s", other, k.path, k.env)
		}
		seen[k.env] = k.path
	}
	if p, ok := seen["CONCLAVE_CONFIG"]; ok {
		t.Errorf("%s takes CONCLAVE_CONFIG, the configuration file's variable", p)
	}
	for env, path := range map[string]string{
		"CONCLAVE_MEMORY_REDIS_URL":      "memory.redis_url",
		"CONCLAVE_CONVERSATION_TIMEOUT":  "conversation.timeout",
		"CONCLAVE_SHUTDOWN_GRACE":        "shutdown_grace",
		"CONCLAVE_LLM_API_KEY":           "llm.api_key",
		"CONCLAVE_LLM_PROFILES":          "llm.profiles",
		"CONCLAVE_ENS_CHAINS":            "ens.chains",
		"CONCLAVE_AGENTS":                "agents",
		"CONCLAVE_HTTP_OPS_ADDR":         "http.ops_addr",
		"CONCLAVE_SLACK_STREAM":          "slack.stream",
		"CONCLAVE_SLACK_STREAM_INTERVAL": "slack.stream_interval",
	} {
		if seen[env] != path {
			t.Errorf("%s sets %q, want %q", env, seen[env], path)
		}
	}
}

// TestEnvValues: values written as an operator would in a container spec.
func TestEnvValues(t *testing.T) {
	env := map[string]string{
		"CONCLAVE_CONVERSATION_TIMEOUT": "90s",
		"CONCLAVE_SLACK_ADMINS":         `["U1", "U2"]`,
		"CONCLAVE_ENS_BASE_DOMAINS":     "acme.eth,protocol6022.eth",
		"CONCLAVE_LLM_TEMPERATURE":      "0.3",
		"CONCLAVE_EXPERT_SESSION_SCOPE": "channel",
		"CONCLAVE_AGENTS":               `[{ ens = "otto.acme.137.protocol6022.eth", role = "expert" }]`,
		"CONCLAVE_CHANNELS":             `[{ id = "C1", agents = ["otto.acme.137.protocol6022.eth"] }]`,
		"CONCLAVE_LLM_PROFILES":         `{ cheap = { model = "small" } }`,
	}
	cfg := defaultConfig()
	if _, err := cfg.applyEnvKeys(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	got := fmt.Sprint(cfg.Conversation.Timeout.Duration, cfg.Slack.Admins, cfg.ENS.BaseDomains, *cfg.LLM.Temperature,
		cfg.Expert.SessionScope, cfg.Agents[0].ENS, cfg.Channels[0].Agents, *cfg.LLM.Profiles["cheap"].Model)
	want := fmt.Sprint(90*time.Second, []string{"U1", "U2"}, []string{"acme.eth", "protocol6022.eth"}, 0.3,
		"channel", "otto.acme.137.protocol6022.eth", []string{"otto.acme.137.protocol6022.eth"}, "small")
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestEnvValueErrors(t *testing.T) {
	tests := []struct {
		name, env, value string
		want             []string
	}{
		{"not a number", "CONCLAVE_CONVERSATION_MAX_TURNS", "many", []string{"CONCLAVE_CONVERSATION_MAX_TURNS", "conversation.max_turns"}},
		{"not a duration", "CONCLAVE_CONVERSATION_TIMEOUT", "soon", []string{"CONCLAVE_CONVERSATION_TIMEOUT", `invalid duration "soon"`}},
		{"not a boolean", "CONCLAVE_HTTP_PPROF", "yes", []string{"CONCLAVE_HTTP_PPROF"}},
		{"unknown agent key", "CONCLAVE_AGENTS", `[{ ens = "a.b.1.protocol6022.eth", modle = "x" }]`, []string{"CONCLAVE_AGENTS", "(agents)", `unknown key "modle"`}},
		{"a secret in a broken value", "CONCLAVE_LLM_HEADERS", `{ x = "sk-live-abcdef123456`, []string{"CONCLAVE_LLM_HEADERS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			_, err := cfg.applyEnvKeys(func(k string) string {
				if k == tt.env {
					return tt.value
				}
				return ""
			})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "abcdef123456") {
				t.Errorf("error echoes a secret: %v", err)
			}
		})
	}
}

// TestShortSecretNames: the documented short names keep working, the
// CONCLAVE_ name wins over them, and a file secret the environment
// replaced is not warned about.
func TestShortSecretNames(t *testing.T) {
	dir := writeFiles(t, map[string]string{"c.toml": "[slack]\nbot_token = \"xoxb-file\"\napp_token = \"xapp-file\"\n"})
	env := map[string]string{
		"SLACK_BOT_TOKEN":          "xoxb-short",
		"SLACK_APP_TOKEN":          "xapp-short",
		"CONCLAVE_SLACK_APP_TOKEN": "xapp-long",
		"REDIS_URL":                "redis://db:6379/1",
	}
	fs := newFlags("run", env2(env))
	load := configFlag(fs, env2(env))
	if err := fs.Parse([]string{"--config", filepath.Join(dir, "c.toml")}); err != nil {
		t.Fatal(err)
	}
	cfg, inFile, err := load()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{cfg.Slack.BotToken, cfg.Slack.AppToken, cfg.Memory.RedisURL}
	want := []string{"xoxb-short", "xapp-long", "redis://db:6379/1"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if len(inFile) != 0 {
		t.Errorf("secrets reported in the file: %v, want none (the environment replaced them)", inFile)
	}
}

// env2 is an env reading environ.
func env2(environ map[string]string) env {
	return env{getenv: func(k string) string { return environ[k] }, stdout: &strings.Builder{}, stderr: &strings.Builder{}}
}

// TestConfigPrint prints a configuration holding every kind of secret, in
// the file and in the environment: each is masked, the names are the
// file's, durations read as written, and the output loads back.
func TestConfigPrint(t *testing.T) {
	secrets := map[string]string{
		"slack.app_token":                 "xapp-1-secret-app",
		"slack.bot_token":                 "xoxb-secret-bot",
		"llm.api_key":                     "sk-secret-default",
		"llm.headers":                     "secret-header-value",
		"llm.profiles.cheap.api_key":      "sk-secret-profile",
		"llm.profiles.cheap.headers":      "secret-profile-header",
		"memory.redis_url":                "redis://:secret-redis-password@db:6379/0",
		"ens.mainnet_rpc_url":             "https://mainnet.example/v3/secret-mainnet-key",
		"ens.chains[0].rpc_url (env)":     "https://polygon.example/v2/secret-polygon-key",
		"llm.api_key (CONCLAVE_ env)":     "sk-secret-from-long-env",
		"memory.redis_url (CONCLAVE_env)": "unused",
		"mcp.servers[0].env":              "secret-mcp-env-value",
		"mcp.servers[1].headers":          "Bearer secret-mcp-header",
		"llm.base_url user-info":          "secret-base-pass",
		"llm.base_url query":              "secret-base-query",
		"llm.profiles.cheap.base_url key": "0123456789abcdef0123456789abcdef",
		"mcp.servers[1].url query":        "secret-mcp-query",
		"mcp.servers[0].command (secret)": "secret-mcp-arg",
		"otel.endpoint user-info":         "secret-otel-pass",
	}
	file := fmt.Sprintf(`[slack]
app_token = %q
bot_token = %q
[llm]
headers = { "x-api-key" = %q }
base_url = "https://gw-user:secret-base-pass@llm.example/v1?key=secret-base-query"
[llm.profiles.cheap]
api_key = %q
headers = { "x-api-key" = %q }
base_url = "https://rpc.example/v3/0123456789abcdef0123456789abcdef"
[memory]
redis_url = %q
[ens]
mainnet_rpc_url = %q
[conversation]
call_timeout = "90s"
[[mcp.servers]]
name = "crm"
command = ["crm-mcp", "--token", "secret-mcp-arg"]
secret_args = true
env = { CRM_TOKEN = "$CRM_TOKEN", CRM_KEY = %q }
[[mcp.servers]]
name = "search"
url = "https://search.example/mcp?token=secret-mcp-query"
headers = { Authorization = %q }
[otel]
endpoint = "https://otel-user:secret-otel-pass@otel.example:4318"
`, secrets["slack.app_token"], secrets["slack.bot_token"], secrets["llm.headers"], secrets["llm.profiles.cheap.api_key"],
		secrets["llm.profiles.cheap.headers"], secrets["memory.redis_url"], secrets["ens.mainnet_rpc_url"],
		secrets["mcp.servers[0].env"], secrets["mcp.servers[1].headers"])
	delete(secrets, "memory.redis_url (CONCLAVE_env)")
	dir := writeFiles(t, map[string]string{"c.toml": file})
	environ := map[string]string{
		"ETH_RPC_URL_137":         secrets["ens.chains[0].rpc_url (env)"],
		"OPENAI_API_KEY":          secrets["llm.api_key"],
		"CONCLAVE_LLM_API_KEY":    secrets["llm.api_key (CONCLAVE_ env)"],
		"CONCLAVE_SHUTDOWN_GRACE": "45s",
	}
	code, out, errOut := cli(t, environ, "config", "print", "--config", filepath.Join(dir, "c.toml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for what, secret := range secrets {
		if strings.Contains(out, secret) || strings.Contains(out, strings.TrimPrefix(secret, "redis://:")[:10]) {
			t.Errorf("the %s is printed:\n%s", what, out)
		}
	}
	for _, line := range []string{
		"[slack]", "bot_token = '****'", "app_token = '****'",
		"[llm]", "api_key = '****'", "x-api-key = '****'",
		"redis_url = '****'", "mainnet_rpc_url = '****'", "rpc_url = '****'",
		"call_timeout = '90s'", "timeout = '10m'", "shutdown_grace = '45s'", "conversation_ttl = '720h'",
		"stream = false", "stream_interval = '1s'",
		"registry = '0x23dbc335f966d9869940FB55f61E919118AAD236'",
		"CRM_KEY = '****'", "CRM_TOKEN = '$CRM_TOKEN'", "Authorization = '****'",
		"base_url = 'https://****@llm.example/v1?key=****'", "base_url = 'https://rpc.example/v3/****'",
		"url = 'https://search.example/mcp?token=****'", "command = ['crm-mcp', '****', '****']", "secret_args = true",
		"endpoint = 'https://****@otel.example:4318'",
		"max_bytes = 268435456", "max_bytes_per_conversation = 1048576",
	} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("no line %q in:\n%s", line, out)
		}
	}
	// The printed configuration is a valid configuration file.
	cfg := defaultConfig()
	if err := decodeConfig("printed.toml", []byte(out), &cfg); err != nil {
		t.Fatalf("the output does not load back: %v\n%s", err, out)
	}
	if cfg.Conversation.CallTimeout.Duration != 90*time.Second || cfg.ShutdownGrace.Duration != 45*time.Second {
		t.Errorf("loaded back: call_timeout %v, shutdown_grace %v", cfg.Conversation.CallTimeout, cfg.ShutdownGrace)
	}
}

// runWithEnviron runs conclave in-process with the environment vars
// (NAME=value), returning its exit code and stderr.
func runWithEnviron(t *testing.T, vars []string, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	e := env{
		getenv: func(k string) string {
			for _, kv := range vars {
				if name, v, _ := strings.Cut(kv, "="); name == k {
					return v
				}
			}
			return ""
		},
		environ: func() []string { return vars },
		stdout:  &stdout, stderr: &stderr, stdin: strings.NewReader(""),
	}
	code := runMain(t.Context(), args, e)
	return code, stderr.String()
}

// TestUnknownConclaveVariable: a CONCLAVE_ variable that names no key
// stops conclave at start, naming the nearest key; the variables conclave
// reads for other purposes pass.
func TestUnknownConclaveVariable(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	others := []string{"CONCLAVE_CONVERSATION_MAX_TURNS=5", "OTHER_THING=1"}
	for _, v := range otherConclaveVariables() {
		others = append(others, v+"="+empty) // CONCLAVE_CONFIG names the file
	}
	tests := []struct {
		name string
		vars []string
		want string // in stderr; "" for success
	}{
		{"a misspelt key", []string{"CONCLAVE_CONVERSTION_MAX_TURNS=5"},
			"conclave: config: environment variable CONCLAVE_CONVERSTION_MAX_TURNS names no configuration key (did you mean CONCLAVE_CONVERSATION_MAX_TURNS?)"},
		{"two, each named", []string{"CONCLAVE_LOG_LEVL=debug", "CONCLAVE_TEMPLATE_DIR=x"},
			"CONCLAVE_LOG_LEVL names no configuration key (did you mean CONCLAVE_LOG_LEVEL?); environment variable CONCLAVE_TEMPLATE_DIR names no configuration key (did you mean CONCLAVE_TEMPLATES_DIR?)"},
		{"an empty one counts too", []string{"CONCLAVE_SLAK_STREAM="}, "did you mean CONCLAVE_SLACK_STREAM?"},
		{"no guess when nothing is near", []string{"CONCLAVE_REDIS_URL=redis://x"},
			"conclave: config: environment variable CONCLAVE_REDIS_URL names no configuration key\n"},
		{"keys and the other variables pass", others, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runWithEnviron(t, tt.vars, "config", "print", "--config", empty)
			if tt.want == "" {
				if code != 0 {
					t.Errorf("exit %d, stderr %q", code, stderr)
				}
				return
			}
			if code != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, tt.want)
			}
		})
	}
}

// TestEnvExampleListsEveryVariable: .env.example lists every variable
// conclave reads besides the CONCLAVE_<TABLE>_<KEY> of each key: the
// secrets' short names, the CONCLAVE_ variables that are not keys, and
// the variables config.example.toml names.
func TestEnvExampleListsEveryVariable(t *testing.T) {
	example := readFile(t, "../../.env.example")
	listed := map[string]bool{}
	for _, line := range strings.Split(example, "\n") {
		if name, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(name, "#") {
			listed[strings.TrimSpace(name)] = true
		}
	}
	want := slices.Clone(otherConclaveVariables())
	cfg, err := loadConfig("../../config.example.toml", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.secrets() {
		want = append(want, s.env)
	}
	for _, p := range cfg.LLM.Profiles {
		if p.APIKeyEnv != nil && *p.APIKeyEnv != "" {
			want = append(want, *p.APIKeyEnv)
		}
	}
	for _, m := range regexp.MustCompile(`= "\$([A-Z0-9_]+)"`).FindAllStringSubmatch(readFile(t, "../../config.example.toml"), -1) {
		want = append(want, m[1])
	}
	for _, v := range want {
		if !listed[v] {
			t.Errorf(".env.example does not list %s", v)
		}
	}
	if len(want) < 20 {
		t.Errorf("only %d variables wanted; the list is broken", len(want))
	}
	gitignore := strings.Fields(readFile(t, "../../.gitignore"))
	for _, f := range []string{"/config.toml", ".env"} {
		if !slices.Contains(gitignore, f) {
			t.Errorf(".gitignore does not cover %s", f)
		}
	}
}
