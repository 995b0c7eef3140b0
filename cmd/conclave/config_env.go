package main

import (
	"bytes"
	"context"
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/conclavehq/conclave/internal/fuzzy"
	"github.com/conclavehq/conclave/internal/redact"
)

// envPrefix starts the environment variable of every configuration key:
// CONCLAVE_<TABLE>_<KEY>, upper case (CONCLAVE_MEMORY_REDIS_URL).
const envPrefix = "CONCLAVE_"

// envKey is one configuration key that the environment can set.
type envKey struct {
	path  string // the file's name: "conversation.timeout"
	env   string // CONCLAVE_CONVERSATION_TIMEOUT
	index []int  // the field in Config
	typ   reflect.Type
}

// envKeys lists every key of the Config type, read from its toml tags so
// that a key added to Config can be set from the environment without more
// code. Tables are walked into; arrays of tables and tables keyed by the
// operator's names ([[agents]], [llm.profiles.*]) are one key each, whose
// environment value is TOML.
func envKeys() []envKey {
	var keys []envKey
	var walk func(prefix string, index []int, t reflect.Type)
	walk = func(prefix string, index []int, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			idx := append(append([]int(nil), index...), i)
			if f.Anonymous {
				walk(prefix, idx, f.Type)
				continue
			}
			tag := strings.Split(f.Tag.Get("toml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			path := join(prefix, tag)
			if f.Type.Kind() == reflect.Struct && !isTextValue(f.Type) {
				walk(path, idx, f.Type)
				continue
			}
			keys = append(keys, envKey{
				path:  path,
				env:   envPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_")),
				index: idx,
				typ:   f.Type,
			})
		}
	}
	walk("", nil, reflect.TypeFor[Config]())
	return keys
}

// isTextValue tells whether values of t are written as one TOML string
// (durations).
func isTextValue(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// applyEnvKeys sets every key whose CONCLAVE_ variable is not empty; the
// value replaces the file's. Strings and durations are taken as written;
// a list of strings may be comma-separated or a TOML array; anything else
// (numbers, booleans, tables, arrays of tables) is a TOML value. It
// returns the keys it set.
func (c *Config) applyEnvKeys(getenv func(string) string) ([]string, error) {
	var set []string
	for _, k := range envKeys() {
		v := getenv(k.env)
		if v == "" {
			continue
		}
		if err := c.setFromEnv(k, v); err != nil {
			return set, err
		}
		set = append(set, k.path)
	}
	return set, nil
}

// setFromEnv decodes v into the key's field with the file's decoder, so
// the environment is checked exactly as the file is.
func (c *Config) setFromEnv(k envKey, v string) error {
	value, err := envTOML(k.typ, v)
	if err != nil {
		return fmt.Errorf("config: %s: %w", k.env, err)
	}
	table, key := "", k.path
	if i := strings.LastIndexByte(k.path, '.'); i >= 0 {
		table, key = k.path[:i], k.path[i+1:]
	}
	var doc bytes.Buffer
	if table != "" {
		fmt.Fprintf(&doc, "[%s]\n", table)
	}
	fmt.Fprintf(&doc, "%s = %s\n", key, value)
	field := reflect.ValueOf(c).Elem().FieldByIndex(k.index)
	field.SetZero() // the environment's list or table replaces the file's
	dec := toml.NewDecoder(&doc)
	dec.DisallowUnknownFields()
	err = dec.Decode(c)
	var strict *toml.StrictMissingError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &strict):
		var unknown []string
		for _, e := range strict.Errors {
			unknown = append(unknown, fmt.Sprintf("unknown key %q", strings.Join(e.Key(), ".")))
		}
		return fmt.Errorf("config: %s (%s): %s", k.env, k.path, strings.Join(unknown, "; "))
	default:
		return fmt.Errorf("config: %s (%s): %s", k.env, k.path, redactSecretsIn(err.Error()))
	}
}

// envTOML turns an environment value into the TOML text of a value of t.
func envTOML(t reflect.Type, v string) (string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var value any
	switch {
	case t.Kind() == reflect.String || isTextValue(t):
		value = v
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String && !strings.HasPrefix(strings.TrimSpace(v), "["):
		items := []string{}
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		value = items
	default:
		return v, nil
	}
	b, err := toml.Marshal(map[string]any{"v": value})
	if err != nil {
		return "", err
	}
	_, text, _ := strings.Cut(strings.TrimSpace(string(b)), "=")
	return strings.TrimSpace(text), nil
}

// runConfigPrint is `conclave config print`: the effective configuration
// (defaults, the file, the environment) as TOML with the file's names,
// secrets masked.
func runConfigPrint(_ context.Context, args []string, e env) error {
	fs := newFlags("config print", e)
	load := configFlag(fs, e)
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	out, err := toml.Marshal(cfg.masked())
	if err != nil {
		return fmt.Errorf("config print: %w", err)
	}
	fmt.Fprintf(e.stdout, "# conclave's effective configuration: defaults, the file, then the environment; secrets masked\n%s", out)
	return nil
}

// secretMask replaces a secret's value in printed configuration.
const secretMask = redact.Mask

// masked is a copy of c with every secret value replaced by secretMask:
// the keys of secrets() that hold a secret, every profile's api_key and
// every extra header (they carry keys too).
func (c Config) masked() Config {
	m := c
	m.ENS.Chains = append([]ChainConfig(nil), c.ENS.Chains...)
	m.LLM.LLMProfileConfig = c.LLM.maskedProfile()
	m.LLM.Profiles = map[string]LLMProfileConfig{}
	for name, p := range c.LLM.Profiles {
		m.LLM.Profiles[name] = p.maskedProfile()
	}
	if c.LLM.Profiles == nil {
		m.LLM.Profiles = nil
	}
	m.MCP.Servers = make([]MCPServerConfig, len(c.MCP.Servers))
	for i, srv := range c.MCP.Servers {
		srv.Env, srv.Headers = maskLiterals(srv.Env), maskLiterals(srv.Headers)
		srv.URL = redact.URL(srv.URL)
		if srv.SecretArgs {
			srv.Command = redact.Args(srv.Command)
		}
		m.MCP.Servers[i] = srv
	}
	if c.OTel.Endpoint != "" {
		m.OTel.Endpoint = redact.URL(c.OTel.Endpoint)
	}
	for _, s := range m.secrets() {
		if s.key == "llm.api_key" {
			continue // done with the profile
		}
		if *s.dst != "" && isSecretValue(s.key, *s.dst) {
			*s.dst = secretMask
		}
	}
	return m
}

// maskLiterals is a copy of an MCP server's env or headers with every
// value written in the file masked; a "$NAME" reference names a variable,
// not a secret, and is printed as written.
func maskLiterals(kv map[string]string) map[string]string {
	if kv == nil {
		return nil
	}
	out := make(map[string]string, len(kv))
	for k, v := range kv {
		if !strings.HasPrefix(v, "$") {
			v = secretMask
		}
		out[k] = v
	}
	return out
}

// maskedProfile is a copy of p with its API key and header values masked,
// and what its base URL carries (user-info, query values, path keys).
func (p LLMProfileConfig) maskedProfile() LLMProfileConfig {
	if p.APIKey != nil && *p.APIKey != "" {
		p.APIKey = ptr(secretMask)
	}
	if p.BaseURL != nil {
		p.BaseURL = ptr(redact.URL(*p.BaseURL))
	}
	if p.Headers != nil {
		h := make(map[string]string, len(p.Headers))
		for k := range p.Headers {
			h[k] = secretMask
		}
		p.Headers = h
	}
	return p
}

// otherConclaveVariables are the CONCLAVE_ variables that name no
// configuration key: conclave's own, and those its tests, CI, benchmarks
// and deployment files read. .env.example lists each of them (a test
// keeps the two in step); every other CONCLAVE_ variable must name a key.
func otherConclaveVariables() []string {
	return []string{
		"CONCLAVE_CONFIG",             // the configuration file
		"CONCLAVE_REQUIRE_REDIS",      // tests: fail, not skip, without Redis
		"CONCLAVE_REQUIRE_CHROMIUM",   // tests: fail, not skip, without Chromium
		"CONCLAVE_REDIS_SENTINEL",     // tests: run the Sentinel tests
		"CONCLAVE_REDIS_CLUSTER",      // tests: run the Cluster tests
		"CONCLAVE_MCP_EVERYTHING",     // tests: a third-party MCP server
		"CONCLAVE_MCPTEST_STDIO",      // tests: the test MCP server's stdio mode
		"CONCLAVE_TEST_CHILD_PROCESS", // tests: the process started by a shutdown test
		"CONCLAVE_BENCH_REPLICA",      // conclave-bench: a replica process
		"CONCLAVE_VERSION",            // deploy/compose.yaml: the image's version
		"CONCLAVE_COMMIT",             // deploy/compose.yaml: the image's commit
	}
}

// checkEnvNames fails on every CONCLAVE_ variable of the environment
// that names no configuration key and is not one of
// otherConclaveVariables, naming the nearest key: a misspelt variable
// would otherwise be ignored without a word.
func checkEnvNames(environ func() []string) error {
	if environ == nil {
		return nil
	}
	var keys []string
	for _, k := range envKeys() {
		keys = append(keys, k.env)
	}
	known := append(slices.Clone(keys), otherConclaveVariables()...)
	var bad []string
	for _, kv := range environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || slices.Contains(known, name) {
			continue
		}
		msg := fmt.Sprintf("environment variable %s names no configuration key", name)
		if near, ok := fuzzy.Suggest(name, keys); ok {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
		bad = append(bad, msg)
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("config: %s", strings.Join(bad, "; "))
	}
	return nil
}
