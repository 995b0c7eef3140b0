package main

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/pairing"
	"github.com/conclavehq/conclave/agents/tools"
	"github.com/conclavehq/conclave/bot"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/redact"
	"github.com/conclavehq/conclave/memory"
)

// Duration is a time.Duration written as a string in TOML ("10m").
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (use a value such as \"90s\" or \"10m\")", string(b))
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration in the largest unit that holds it
// whole ("10m", "90s", "720h", "1500ms"), as operators write durations.
func (d Duration) MarshalText() ([]byte, error) {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d.Duration != 0 && d.Duration%u.unit == 0 {
			return []byte(strconv.FormatInt(int64(d.Duration/u.unit), 10) + u.name), nil
		}
	}
	return []byte(d.String()), nil
}

// Config is the whole TOML configuration. Field tags are the key names
// operators write; config.example.toml documents each one.
type Config struct {
	ShutdownGrace Duration `toml:"shutdown_grace"`

	Slack        SlackConfig                    `toml:"slack"`
	LLM          LLMConfig                      `toml:"llm"`
	Memory       MemoryConfig                   `toml:"memory"`
	Templates    TemplatesConfig                `toml:"templates"`
	ENS          ENSConfig                      `toml:"ens"`
	Agents       []AgentConfig                  `toml:"agents"`
	AgentSetting map[string]AgentSettingsConfig `toml:"agent_settings"`
	Channels     []ChannelConfig                `toml:"channels"`
	Conversation ConversationConfig             `toml:"conversation"`
	Expert       ExpertConfig                   `toml:"expert"`
	Errors       ErrorsConfig                   `toml:"errors"`
	HTTP         HTTPConfig                     `toml:"http"`
	Log          LogConfig                      `toml:"log"`
	MCP          MCPConfig                      `toml:"mcp"`
	Tools        ToolsConfig                    `toml:"tools"`
	Trace        TraceConfig                    `toml:"trace"`
	OTel         OTelConfig                     `toml:"otel"`
	Budget       BudgetConfig                   `toml:"budget"`

	// secretValues are the secrets' values, as loaded (secretValuesOf).
	secretValues []string
}

// ToolsConfig is [tools]: bounds on what MCP servers send back.
type ToolsConfig struct {
	// MaxResultBytes bounds one answer read from a server (an HTTP body, a
	// streamed event, a stdio line); past it the call fails.
	MaxResultBytes int64 `toml:"max_result_bytes"`
}

// TraceConfig is [trace]: the turn traces kept in the store.
type TraceConfig struct {
	Enabled                 bool     `toml:"enabled"`
	Retention               Duration `toml:"retention"`
	MaxBytesPerConversation int      `toml:"max_bytes_per_conversation"`
	// MaxBytes bounds the stored traces of all conversations together.
	MaxBytes int `toml:"max_bytes"`
}

// SlackConfig is [slack].
type SlackConfig struct {
	AppToken        string   `toml:"app_token"`
	BotToken        string   `toml:"bot_token"`
	APIURL          string   `toml:"api_url"`
	Admins          []string `toml:"admins"`
	WorkingReaction string   `toml:"working_reaction"`
	IPFSGateway     string   `toml:"ipfs_gateway"`
	// Delivery.
	Timeout         Duration `toml:"timeout"`
	PostRetryWindow Duration `toml:"post_retry_window"`
	// Streaming replies.
	Stream         bool     `toml:"stream"`
	StreamInterval Duration `toml:"stream_interval"`
	StreamMethod   string   `toml:"stream_method"` // auto (native, chat.update fallback) | update
	// Status shows who is working in the thread (assistant.threads.setStatus).
	Status bool `toml:"status"`
	// Feedback buttons: answers, all or off.
	Feedback string `toml:"feedback"`
	// Direct messages: the [[channels]] entry whose agents hold them, and
	// the prompts offered when one opens (see config_dm.go).
	DMChannel        string                  `toml:"dm_channel"`
	SuggestedPrompts []SuggestedPromptConfig `toml:"suggested_prompts"`
}

// LLMProfileConfig holds the keys of [llm] that a named profile may set.
// Pointers tell "not set" from zero so a profile inherits from [llm].
type LLMProfileConfig struct {
	BaseURL          *string           `toml:"base_url"`
	APIKey           *string           `toml:"api_key"`
	APIKeyEnv        *string           `toml:"api_key_env"`
	Model            *string           `toml:"model"`
	Temperature      *float64          `toml:"temperature"`
	MaxTokens        *int              `toml:"max_tokens"`
	MaxInputTokens   *int              `toml:"max_input_tokens"`
	Timeout          *Duration         `toml:"timeout"`
	TotalTimeout     *Duration         `toml:"total_timeout"`
	IdleTimeout      *Duration         `toml:"idle_timeout"`
	MaxRetries       *int              `toml:"max_retries"`
	Headers          map[string]string `toml:"headers"`
	JSONMode         *bool             `toml:"json_mode"`
	MergeConsecutive *bool             `toml:"merge_consecutive"`
}

// LLMConfig is [llm]: the default profile plus named profiles.
type LLMConfig struct {
	LLMProfileConfig
	Profiles      map[string]LLMProfileConfig `toml:"profiles"`
	MaxToolRounds int                         `toml:"max_tool_rounds"`

	MaxToolCallsPerRound int `toml:"max_tool_calls_per_round"`
	// Prices are USD per million tokens, by model name.
	Prices map[string]PriceConfig `toml:"prices"`
}

// PriceConfig is one [llm.prices."<model>"].
type PriceConfig struct {
	Input  float64 `toml:"input"`
	Output float64 `toml:"output"`
}

// BudgetConfig is [budget]: daily token budgets, 0 = unlimited.
type BudgetConfig struct {
	DailyTokensPerPerson  int `toml:"daily_tokens_per_person"`
	DailyTokensPerChannel int `toml:"daily_tokens_per_channel"`
	DailyTokens           int `toml:"daily_tokens"`
}

// MCPConfig is [mcp]: the MCP servers agents take tools from.
type MCPConfig struct {
	Servers []MCPServerConfig `toml:"servers"`
}

// MCPServerConfig is one [[mcp.servers]]. Env and header values may be
// "$NAME", read from conclave's environment at start.
type MCPServerConfig struct {
	Name    string            `toml:"name"`
	Command []string          `toml:"command"`
	URL     string            `toml:"url"`
	Env     map[string]string `toml:"env"`
	Headers map[string]string `toml:"headers"`
	Timeout Duration          `toml:"timeout"`

	// SecretArgs masks the command's arguments (they carry a token) in
	// config print, logs and errors.
	SecretArgs bool `toml:"secret_args"`
}

// MemoryConfig is [memory].
type MemoryConfig struct {
	RedisURL           string   `toml:"redis_url"`
	KeyPrefix          string   `toml:"key_prefix"`
	MaxSessionMessages int      `toml:"max_session_messages"`
	ConversationTTL    Duration `toml:"conversation_ttl"`
	// CloneScope: "channel" keeps a clone's and a human agent's memory per
	// channel; "workspace" shares it across channels (WARN at start).
	CloneScope string `toml:"clone_scope"`
}

// TemplatesConfig is [templates].
type TemplatesConfig struct {
	Dir string `toml:"dir"`
	// Vars are the operator's variables, .Vars in every template.
	Vars map[string]string `toml:"vars"`
	// JudgeProfile is the llm profile that grades `templates test
	// --live` judge assertions; "" is the default profile.
	JudgeProfile string `toml:"judge_profile"`
	// SetBy names where Dir came from, for messages: "" for the default,
	// the configuration file's path, or the variable or flag that named
	// it. Explicit (a variable or a flag) makes a directory that is
	// missing or holds Go source an error instead of a warning.
	SetBy    string `toml:"-"`
	Explicit bool   `toml:"-"`
}

// ENSConfig is [ens].
type ENSConfig struct {
	BaseDomains   []string           `toml:"base_domains"`
	CacheTTL      Duration           `toml:"cache_ttl"`
	NegativeTTL   Duration           `toml:"negative_ttl"`
	StaleMax      Duration           `toml:"stale_max"`
	RPCTimeout    Duration           `toml:"rpc_timeout"`
	MainnetRPCURL string             `toml:"mainnet_rpc_url"`
	TextKeys      []string           `toml:"text_keys"`
	Chains        []ChainConfig      `toml:"chains"`
	Collections   []CollectionConfig `toml:"collections"`

	// CCIP-Read gateways: plain http, and non-public addresses, are
	// refused unless these allow them (tests, private deployments).
	GatewayAllowHTTP    bool `toml:"gateway_allow_http"`
	GatewayAllowPrivate bool `toml:"gateway_allow_private"`

	// ResolveTimeout bounds one whole look-up, all its calls together.
	ResolveTimeout Duration `toml:"resolve_timeout"`
}

// ChainConfig is one [[ens.chains]].
type ChainConfig struct {
	ChainID  uint64 `toml:"chain_id"`
	RPCURL   string `toml:"rpc_url"`
	Registry string `toml:"registry"`
}

// CollectionConfig is one [[ens.collections]].
type CollectionConfig struct {
	ChainID uint64 `toml:"chain_id"`
	Address string `toml:"address"`
	Label   string `toml:"label"`
}

// AgentConfig is one [[agents]]: an agent of the static directory.
type AgentConfig struct {
	ENS            string            `toml:"ens"`
	Name           string            `toml:"name"`
	Role           string            `toml:"role"`
	Owner          string            `toml:"owner"`
	Addresses      map[string]string `toml:"addresses"`
	Attributes     map[string]string `toml:"attributes"`
	Avatar         string            `toml:"avatar"`
	URL            string            `toml:"url"`
	LLMProfile     string            `toml:"llm_profile"`
	CloneOf        string            `toml:"clone_of"`
	SessionPolicy  string            `toml:"session_policy"`
	SessionPattern string            `toml:"session_pattern"`
	Tools          []string          `toml:"tools"`
}

// AgentSettingsConfig is [agent_settings."<ens>"]: settings for agents that
// exist only on-chain.
type AgentSettingsConfig struct {
	LLMProfile     string   `toml:"llm_profile"`
	SessionPolicy  string   `toml:"session_policy"`
	SessionPattern string   `toml:"session_pattern"`
	Tools          []string `toml:"tools"`
}

// ChannelConfig is one [[channels]].
type ChannelConfig struct {
	ID     string   `toml:"id"`
	Agents []string `toml:"agents"`
	Start  string   `toml:"start"`
	// DailyTokens overrides budget.daily_tokens_per_channel (0: that one).
	DailyTokens int `toml:"daily_tokens"`
}

// ConversationConfig is [conversation].
type ConversationConfig struct {
	Timeout          Duration `toml:"timeout"`
	CallTimeout      Duration `toml:"call_timeout"`
	MaxTurns         int      `toml:"max_turns"`
	MaxTurnsPerAgent int      `toml:"max_turns_per_agent"`
	MaxParallel      int      `toml:"max_parallel"`
	MaxMessageChars  int      `toml:"max_message_chars"`
	MaxQueued        int      `toml:"max_queued"`
}

// ExpertConfig is [expert].
type ExpertConfig struct {
	MatchThreshold float64 `toml:"match_threshold"`
	SessionScope   string  `toml:"session_scope"`
}

// ErrorsConfig is [errors].
type ErrorsConfig struct {
	Notify string `toml:"notify"`
}

// HTTPConfig is [http].
type HTTPConfig struct {
	Addr      string `toml:"addr"`
	PublicURL string `toml:"public_url"`
	OpsAddr   string `toml:"ops_addr"`
	PProf     bool   `toml:"pprof"`
	// TrustedProxies are the CIDRs of the proxies in front of conclave
	// whose X-Forwarded-For the wallet page believes.
	TrustedProxies []string `toml:"trusted_proxies"`
}

// trustedProxies parses http.trusted_proxies (validated at load).
func (h HTTPConfig) trustedProxies() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range h.TrustedProxies {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// LogConfig is [log].
type LogConfig struct {
	Level  string `toml:"level"`
	Format string `toml:"format"`
}

func ptr[T any](v T) *T { return &v }

// defaultConfig is the configuration with every default filled in: what
// conclave runs with when no file is given. A key whose value a package
// also falls back to takes it from that package (agents.DefaultOptions,
// llm, memory, ens, tools), where it is written once; the keys only the
// configuration knows are written here.
func defaultConfig() Config {
	eng := agents.DefaultOptions()
	return Config{
		ShutdownGrace: Duration{eng.ShutdownGrace},
		Slack: SlackConfig{
			APIURL:          "https://slack.com/api/",
			WorkingReaction: eng.WorkingReaction,
			IPFSGateway:     "https://ipfs.io/ipfs/",
			Timeout:         Duration{10 * time.Second},
			PostRetryWindow: Duration{eng.PostRetryWindow},
			StreamInterval:  Duration{eng.StreamInterval},
			StreamMethod:    bot.StreamAuto,
			Status:          true,
			Feedback:        agents.FeedbackAnswers,
		},
		LLM: LLMConfig{LLMProfileConfig: LLMProfileConfig{
			BaseURL:          ptr(llm.DefaultBaseURL),
			APIKey:           ptr(""),
			APIKeyEnv:        ptr(""),
			Model:            ptr("gpt-4o-mini"),
			MaxTokens:        ptr(0),
			Headers:          map[string]string{},
			MaxInputTokens:   ptr(eng.MaxInputTokens),
			Timeout:          &Duration{llm.DefaultTimeout},
			TotalTimeout:     &Duration{llm.DefaultTotalTimeout},
			IdleTimeout:      &Duration{llm.DefaultIdleTimeout},
			MaxRetries:       ptr(3),
			JSONMode:         ptr(true),
			MergeConsecutive: ptr(false),
		}, MaxToolRounds: eng.MaxToolRounds, MaxToolCallsPerRound: eng.MaxToolCallsPerRound},
		Memory: MemoryConfig{
			KeyPrefix:          memory.DefaultKeyPrefix,
			MaxSessionMessages: memory.DefaultMaxSessionMessages,
			ConversationTTL:    Duration{memory.DefaultConversationTTL},
			CloneScope:         eng.CloneScope,
		},
		Templates: TemplatesConfig{Dir: "templates"},
		ENS: ENSConfig{
			BaseDomains: eng.BaseDomains,
			CacheTTL:    Duration{ens.DefaultCacheTTL},
			NegativeTTL: Duration{ens.DefaultNegativeTTL},
			StaleMax:    Duration{ens.DefaultStaleMax},
			RPCTimeout:  Duration{ens.DefaultRPCTimeout},
			TextKeys:    slices.Clone(ens.DefaultTextKeys),
			Chains:      defaultChains(),

			ResolveTimeout: Duration{ens.DefaultResolveTimeout},
		},
		Conversation: ConversationConfig{
			Timeout:          Duration{eng.Timeout},
			CallTimeout:      Duration{eng.CallTimeout},
			MaxTurns:         eng.MaxTurns,
			MaxTurnsPerAgent: eng.MaxTurnsPerAgent,
			MaxParallel:      eng.MaxParallel,
			MaxMessageChars:  eng.MaxMessageChars,
			MaxQueued:        eng.MaxQueued,
		},
		Expert: ExpertConfig{MatchThreshold: eng.MatchThreshold, SessionScope: eng.SessionScope},
		Errors: ErrorsConfig{Notify: eng.Notify},
		HTTP:   HTTPConfig{Addr: ":8080"},
		Log:    LogConfig{Level: "info", Format: "json"},
		Tools:  ToolsConfig{MaxResultBytes: tools.DefaultMaxResultBytes},
		Trace: TraceConfig{
			Enabled: eng.Traces, Retention: Duration{memory.DefaultTraceRetention},
			MaxBytesPerConversation: memory.DefaultTraceMaxBytes, MaxBytes: memory.DefaultTraceTotalMaxBytes,
		},
	}
}

// defaultChains are the public registry deployments (ens.DefaultRegistries)
// as [[ens.chains]], by chain id.
func defaultChains() []ChainConfig {
	var chains []ChainConfig
	for _, id := range slices.Sorted(maps.Keys(ens.DefaultRegistries)) {
		chains = append(chains, ChainConfig{ChainID: id, Registry: ens.DefaultRegistries[id]})
	}
	return chains
}

// loadConfig reads the config file at path into the defaults. A missing
// file is an error only when explicit is true (an operator named it).
func loadConfig(path string, explicit bool) (Config, error) {
	cfg := defaultConfig()
	data, err := os.ReadFile(path) // #nosec G304 -- the operator names the configuration file
	switch {
	case errors.Is(err, os.ErrNotExist) && !explicit:
		return cfg, nil
	case err != nil:
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := decodeConfig(path, data, &cfg); err != nil {
		return cfg, err
	}
	cfg.Templates = templatesInFile(path, data, cfg.Templates)
	return cfg, nil
}

// decodeConfig decodes TOML strictly: unknown keys and type errors are
// reported with their line.
func decodeConfig(name string, data []byte, cfg *Config) error {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(cfg)
	var strict *toml.StrictMissingError
	var decErr *toml.DecodeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &strict):
		var lines []string
		for _, e := range strict.Errors {
			row, _ := e.Position()
			lines = append(lines, fmt.Sprintf("%s:%d: unknown key %q", name, row, strings.Join(e.Key(), ".")))
		}
		return fmt.Errorf("config: %s", strings.Join(lines, "; "))
	case errors.As(err, &decErr):
		row, _ := decErr.Position()
		key := strings.Join(decErr.Key(), ".")
		msg := typeMismatchInWords(redactSecretsIn(decErr.Error()))
		if key != "" {
			return fmt.Errorf("config: %s:%d: %s: %s", name, row, key, msg)
		}
		return fmt.Errorf("config: %s:%d: %s", name, row, msg)
	default:
		return fmt.Errorf("config: %s: %s", name, redactSecretsIn(err.Error()))
	}
}

// redactSecretsIn hides anything that looks like a token in a decoder
// message, which may quote the offending value.
func redactSecretsIn(msg string) string { return secretLike.ReplaceAllString(msg, "[redacted]") }

var secretLike = regexp.MustCompile(`(xapp-|xoxb-|xoxp-|sk-)[A-Za-z0-9_\-]+`)

// secret is one secret-bearing key and its environment override.
type secret struct {
	key string
	env string
	dst *string
}

// secrets lists the keys whose value may come from the environment; the
// environment wins when it is not empty.
func (c *Config) secrets() []secret {
	s := []secret{
		{"slack.app_token", "SLACK_APP_TOKEN", &c.Slack.AppToken},
		{"slack.bot_token", "SLACK_BOT_TOKEN", &c.Slack.BotToken},
		{"llm.api_key", "OPENAI_API_KEY", c.LLM.APIKey},
		{"llm.base_url", "OPENAI_BASE_URL", c.LLM.BaseURL},
		{"memory.redis_url", "REDIS_URL", &c.Memory.RedisURL},
		{"ens.mainnet_rpc_url", "ETH_RPC_URL_1", &c.ENS.MainnetRPCURL},
	}
	for i := range c.ENS.Chains {
		ch := &c.ENS.Chains[i]
		s = append(s, secret{fmt.Sprintf("ens.chains[%d].rpc_url", i), "ETH_RPC_URL_" + strconv.FormatUint(ch.ChainID, 10), &ch.RPCURL})
	}
	return s
}

// applyEnv overrides secrets from the environment and returns the keys
// whose secret value was found in the file (operators are warned: files
// end up in repositories).
func (c *Config) applyEnv(getenv func(string) string) (inFile []string) {
	if c.LLM.APIKey == nil {
		c.LLM.APIKey = ptr("")
	}
	if c.LLM.BaseURL == nil {
		c.LLM.BaseURL = ptr("")
	}
	for _, s := range c.secrets() {
		if v := getenv(s.env); v != "" {
			*s.dst = v
			continue
		}
		if *s.dst != "" && isSecretValue(s.key, *s.dst) {
			inFile = append(inFile, s.key)
		}
	}
	if getenv("OPENAI_API_KEY") == "" && c.LLM.APIKeyEnv != nil && *c.LLM.APIKeyEnv != "" {
		if v := getenv(*c.LLM.APIKeyEnv); v != "" {
			*c.LLM.APIKey = v
			inFile = slices.DeleteFunc(inFile, func(k string) bool { return k == "llm.api_key" })
		}
	}
	for name, p := range c.LLM.Profiles {
		if p.APIKeyEnv != nil && *p.APIKeyEnv != "" {
			if v := getenv(*p.APIKeyEnv); v != "" {
				p.APIKey = ptr(v)
				c.LLM.Profiles[name] = p
				continue
			}
		}
		if p.APIKey != nil && *p.APIKey != "" {
			inFile = append(inFile, "llm.profiles."+name+".api_key")
		}
	}
	for i, srv := range c.MCP.Servers {
		for _, kv := range []struct {
			table string
			m     map[string]string
		}{{"env", srv.Env}, {"headers", srv.Headers}} {
			for _, k := range slices.Sorted(maps.Keys(kv.m)) {
				if v := kv.m[k]; !strings.HasPrefix(v, "$") && v != "" && secretName.MatchString(k) {
					inFile = append(inFile, fmt.Sprintf("mcp.servers[%d].%s.%s", i, kv.table, k))
				}
			}
		}
	}
	return inFile
}

// secretName tells env and header names whose values are secrets.
var secretName = regexp.MustCompile(`(?i)key|token|secret|auth|passw|credential|cookie`)

// mcpServers turns [[mcp.servers]] into the hub's servers, reading
// "$NAME" values from the environment. A stdio server's environment is
// its env plus a few variables programs need to run (PATH, HOME, …), never
// conclave's secrets. A "$NAME" that is not set is an error naming the key,
// never the value.
func mcpServers(c MCPConfig, getenv func(string) string) ([]tools.Server, error) {
	var out []tools.Server
	var errs []string
	resolve := func(key string, m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		r := make(map[string]string, len(m))
		for k, v := range m {
			if name, ok := strings.CutPrefix(v, "$"); ok {
				v = getenv(name)
				if v == "" {
					errs = append(errs, fmt.Sprintf("%s.%s: environment variable %s is not set", key, k, name))
				}
			}
			r[k] = v
		}
		return r
	}
	for i, s := range c.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		srv := tools.Server{Name: s.Name, Command: s.Command, URL: s.URL, Timeout: s.Timeout.Duration,
			Env: resolve(key+".env", s.Env), Headers: resolve(key+".headers", s.Headers), SecretArgs: s.SecretArgs}
		if len(s.Command) > 0 {
			env := map[string]string{}
			for _, k := range stdioBaseEnv {
				if v := getenv(k); v != "" {
					env[k] = v
				}
			}
			maps.Copy(env, srv.Env)
			srv.Env = env
		}
		out = append(out, srv)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// stdioBaseEnv are the variables of conclave's environment a stdio MCP
// server inherits.
var stdioBaseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TZ", "NPM_CONFIG_CACHE", "npm_config_cache"}

// isSecretValue tells whether a value under a secret-bearing key is really
// secret: a base URL is not, a Redis or RPC URL is only when it carries
// credentials (or, for RPC URLs, a path or query that often holds a key).
func isSecretValue(key, v string) bool {
	switch {
	case key == "llm.base_url":
		return false
	case strings.HasSuffix(key, "redis_url"), strings.HasSuffix(key, "rpc_url"):
		u, err := url.Parse(v)
		if err != nil {
			return true
		}
		if u.User != nil {
			return true
		}
		return strings.HasSuffix(key, "rpc_url") && (u.RawQuery != "" || strings.Trim(u.Path, "/") != "")
	}
	return true
}

// Validation ------------------------------------------------------------

var (
	slackChanID   = regexp.MustCompile(`^[CG][A-Z0-9]+$`)
	evmAddress    = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	collLabel     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	knownRoles    = map[string]bool{"facilitator": true, "expert": true, "clone": true, "human": true}
	knownPolicies = map[string]bool{"": true, "any": true, "pattern": true, "never": true}
)

// validate checks values the decoder cannot: every error names its key.
func (c *Config) validate() error {
	var p problems
	p.positive("shutdown_grace", c.ShutdownGrace)
	c.validateSlack(&p)
	c.validateProfile("llm", c.LLM.LLMProfileConfig, p.bad)
	for name, profile := range c.LLM.Profiles {
		c.validateProfile("llm.profiles."+name, profile, p.bad)
	}
	c.validateMemory(&p)
	c.validateENS(&p)
	static := c.validateAgents(&p)
	if c.LLM.MaxToolRounds <= 0 {
		p.bad("llm.max_tool_rounds", "must be > 0")
	}
	if c.LLM.MaxToolCallsPerRound <= 0 {
		p.bad("llm.max_tool_calls_per_round", "must be > 0")
	}
	c.validateMCP(&p)
	if _, ok := c.LLM.Profiles[c.Templates.JudgeProfile]; c.Templates.JudgeProfile != "" && !ok {
		p.bad("templates.judge_profile", "%q is not a profile of [llm.profiles]", c.Templates.JudgeProfile)
	}
	c.validateCost(&p)
	c.validateChannels(&p, static)
	c.validateDirect(&p)
	c.validateConversation(&p)
	c.validateHTTP(&p)
	c.validateLog(&p)
	if !slices.Contains([]string{agents.FeedbackAnswers, agents.FeedbackAll, agents.FeedbackOff}, c.Slack.Feedback) {
		p.bad("slack.feedback", "must be answers, all or off (got %q)", c.Slack.Feedback)
	}
	if c.OTel.Endpoint != "" {
		if _, err := tracesURL(c.OTel.Endpoint); err != nil {
			p.bad("otel.endpoint", "must be an http(s) URL, the collector's OTLP/HTTP base (e.g. http://localhost:4318)")
		}
	}
	p.positive("trace.retention", c.Trace.Retention)
	if c.Tools.MaxResultBytes <= 0 {
		p.bad("tools.max_result_bytes", "must be > 0")
	}
	if c.Trace.MaxBytesPerConversation <= 0 {
		p.bad("trace.max_bytes_per_conversation", "must be > 0")
	}
	switch {
	case c.Trace.MaxBytes <= 0:
		p.bad("trace.max_bytes", "must be > 0")
	case c.Trace.MaxBytes < c.Trace.MaxBytesPerConversation:
		p.bad("trace.max_bytes", "must be at least trace.max_bytes_per_conversation (%d): one conversation's traces must fit", c.Trace.MaxBytesPerConversation)
	}
	if len(p) > 0 {
		return fmt.Errorf("config: %s", strings.Join(p, "; "))
	}
	return nil
}

// problems collects what is wrong with a configuration, as "key: why".
type problems []string

func (p *problems) bad(key, format string, args ...any) {
	*p = append(*p, key+": "+fmt.Sprintf(format, args...))
}

func (p *problems) positive(key string, d Duration) {
	if d.Duration <= 0 {
		p.bad(key, "must be a positive duration")
	}
}

// validateSlack checks [slack]'s URL, admins and tokens.
func (c *Config) validateSlack(p *problems) {
	if !strings.HasSuffix(c.Slack.APIURL, "/") {
		p.bad("slack.api_url", "must end with \"/\" (got %q)", c.Slack.APIURL)
	}
	for i, a := range c.Slack.Admins {
		if a == pairing.Everyone {
			if len(c.Slack.Admins) > 1 {
				p.bad(fmt.Sprintf("slack.admins[%d]", i), "%q (everyone) must be the only entry", a)
			}
			continue
		}
		if !bot.IsUserID(a) {
			p.bad(fmt.Sprintf("slack.admins[%d]", i), "%q is not a Slack user id (U… or W…)", a)
		}
	}
	if c.Slack.AppToken != "" && !strings.HasPrefix(c.Slack.AppToken, "xapp-") {
		p.bad("slack.app_token", "must be an app-level token starting with xapp-")
	}
	if c.Slack.BotToken != "" && !strings.HasPrefix(c.Slack.BotToken, "xoxb-") {
		p.bad("slack.bot_token", "must be a bot token starting with xoxb-")
	}
}

func (c *Config) validateMemory(p *problems) {
	if c.Memory.MaxSessionMessages <= 0 {
		p.bad("memory.max_session_messages", "must be > 0")
	}
	p.positive("memory.conversation_ttl", c.Memory.ConversationTTL)
	if c.Memory.RedisURL != "" {
		if u, err := url.Parse(c.Memory.RedisURL); err != nil || u.Scheme == "" {
			p.bad("memory.redis_url", "not a URL (expected redis://host:port/db)")
		}
	}
}

// validateENS checks [ens]: base domains, caches, chains, collections.
func (c *Config) validateENS(p *problems) {
	if len(c.ENS.BaseDomains) == 0 {
		p.bad("ens.base_domains", "needs at least one base domain")
	}
	for i, b := range c.ENS.BaseDomains {
		if b != strings.ToLower(b) || !strings.HasSuffix(b, ".eth") {
			p.bad(fmt.Sprintf("ens.base_domains[%d]", i), "%q must be a lowercase .eth name", b)
		}
	}
	p.positive("ens.cache_ttl", c.ENS.CacheTTL)
	p.positive("ens.negative_ttl", c.ENS.NegativeTTL)
	p.positive("ens.rpc_timeout", c.ENS.RPCTimeout)
	p.positive("ens.resolve_timeout", c.ENS.ResolveTimeout)
	if c.ENS.StaleMax.Duration < 0 {
		p.bad("ens.stale_max", "must not be negative")
	}
	seenChain := map[uint64]bool{}
	for i, ch := range c.ENS.Chains {
		key := fmt.Sprintf("ens.chains[%d]", i)
		if ch.ChainID == 0 {
			p.bad(key+".chain_id", "is required")
		}
		if seenChain[ch.ChainID] {
			p.bad(key+".chain_id", "chain %d is listed twice", ch.ChainID)
		}
		seenChain[ch.ChainID] = true
		if !evmAddress.MatchString(ch.Registry) {
			p.bad(key+".registry", "%q is not an address", ch.Registry)
		}
	}
	for i, col := range c.ENS.Collections {
		key := fmt.Sprintf("ens.collections[%d]", i)
		if col.ChainID == 0 {
			p.bad(key+".chain_id", "is required")
		}
		if !evmAddress.MatchString(col.Address) {
			p.bad(key+".address", "%q is not an address", col.Address)
		}
		if !collLabel.MatchString(col.Label) {
			p.bad(key+".label", "%q is not a valid label (lowercase a-z 0-9 -)", col.Label)
		}
	}
}

// validateAgents checks [[agents]] (normalising their names) and
// [agent_settings]; it returns the static agents by name.
func (c *Config) validateAgents(p *problems) map[string]AgentConfig {
	static := map[string]AgentConfig{}
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d]", i)
		name := strings.ToLower(strings.TrimSpace(a.ENS))
		switch {
		case name == "":
			p.bad(key+".ens", "is required")
		case !strings.HasSuffix(name, ".eth"):
			p.bad(key+".ens", "%q is not an ENS name ending in .eth", a.ENS)
		case static[name].ENS != "":
			p.bad(key+".ens", "%q is declared twice", a.ENS)
		}
		c.Agents[i].ENS = name
		static[name] = c.Agents[i]
		if !knownRoles[strings.ToLower(a.Role)] {
			p.bad(key+".role", "%q is not one of facilitator, expert, clone, human", a.Role)
		}
		if a.Owner != "" && !evmAddress.MatchString(a.Owner) {
			p.bad(key+".owner", "%q is not an address", a.Owner)
		}
		if a.LLMProfile != "" && !c.hasProfile(a.LLMProfile) {
			p.bad(key+".llm_profile", "unknown profile %q (define [llm.profiles.%s])", a.LLMProfile, a.LLMProfile)
		}
		if a.CloneOf != "" && strings.ToLower(a.Role) != "clone" {
			p.bad(key+".clone_of", "only clones have clone_of")
		}
		validatePolicy(key, a.SessionPolicy, a.SessionPattern, p.bad)
		c.validateTools(key, a.Tools, p.bad)
	}
	for i, a := range c.Agents {
		if a.CloneOf == "" {
			continue
		}
		h, ok := static[strings.ToLower(a.CloneOf)]
		if ok && strings.ToLower(h.Role) != "human" {
			p.bad(fmt.Sprintf("agents[%d].clone_of", i), "%q is not a human agent", a.CloneOf)
		}
	}
	for name, s := range c.AgentSetting {
		key := fmt.Sprintf("agent_settings.%q", name)
		if s.LLMProfile != "" && !c.hasProfile(s.LLMProfile) {
			p.bad(key+".llm_profile", "unknown profile %q", s.LLMProfile)
		}
		validatePolicy(key, s.SessionPolicy, s.SessionPattern, p.bad)
		c.validateTools(key, s.Tools, p.bad)
	}
	return static
}

func (c *Config) validateMCP(p *problems) {
	seenServer := map[string]bool{}
	for i, s := range c.MCP.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		switch {
		case !tools.ServerNameRE.MatchString(s.Name):
			p.bad(key+".name", "%q must be [a-z0-9_-]+", s.Name)
		case strings.Contains(s.Name, tools.Separator):
			p.bad(key+".name", "%q must not contain %q (it joins server and tool names)", s.Name, tools.Separator)
		case seenServer[s.Name]:
			p.bad(key+".name", "%q is used twice", s.Name)
		}
		seenServer[s.Name] = true
		switch {
		case (len(s.Command) > 0) == (s.URL != ""):
			p.bad(key, "needs exactly one of command (stdio) and url (Streamable HTTP)")
		case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
			p.bad(key+".command", "the program is empty")
		case s.URL != "" && !isHTTPURL(s.URL):
			p.bad(key+".url", "is not an http(s) URL")
		}
		if s.URL != "" && len(s.Env) > 0 {
			p.bad(key+".env", "is for stdio servers (command); an HTTP server takes headers")
		}
		if len(s.Command) > 0 && len(s.Headers) > 0 {
			p.bad(key+".headers", "is for HTTP servers (url); a stdio server takes env")
		}
		if s.URL != "" && s.SecretArgs {
			p.bad(key+".secret_args", "is for stdio servers (command); an HTTP server's secrets go in headers")
		}
		switch {
		case s.Timeout.Duration == 0:
			c.MCP.Servers[i].Timeout = Duration{tools.DefaultTimeout}
		case s.Timeout.Duration < 0:
			p.bad(key+".timeout", "must be a positive duration")
		}
	}
}

// validateChannels checks [[channels]] (normalising their agents' names)
// against the static agents.
func (c *Config) validateChannels(p *problems, static map[string]AgentConfig) {
	seenChan := map[string]bool{}
	for i, ch := range c.Channels {
		key := fmt.Sprintf("channels[%d]", i)
		if !slackChanID.MatchString(ch.ID) {
			p.bad(key+".id", "%q is not a channel id (C… or G…)", ch.ID)
		}
		if seenChan[ch.ID] {
			p.bad(key+".id", "channel %s is listed twice", ch.ID)
		}
		seenChan[ch.ID] = true
		switch ch.Start {
		case "", "all", "mention":
		default:
			p.bad(key+".start", "%q is not one of all, mention", ch.Start)
		}
		facilitators := 0
		for j, a := range ch.Agents {
			name := strings.ToLower(strings.TrimSpace(a))
			c.Channels[i].Agents[j] = name
			if !strings.HasSuffix(name, ".eth") {
				p.bad(fmt.Sprintf("%s.agents[%d]", key, j), "%q is not an ENS name", a)
			}
			if s, ok := static[name]; ok && strings.ToLower(s.Role) == "facilitator" {
				facilitators++
			}
		}
		if facilitators > 1 {
			p.bad(key+".agents", "at most one facilitator per channel (found %d)", facilitators)
		}
	}
}

// validateConversation checks the limits and timeouts of conversations,
// and of Slack calls, and [expert] and [errors].
func (c *Config) validateConversation(p *problems) {
	if c.Conversation.Timeout.Duration < 0 {
		p.bad("conversation.timeout", "must not be negative (\"0\" turns it off)")
	}
	p.positive("conversation.call_timeout", c.Conversation.CallTimeout)
	p.positive("slack.timeout", c.Slack.Timeout)
	p.positive("slack.post_retry_window", c.Slack.PostRetryWindow)
	p.positive("slack.stream_interval", c.Slack.StreamInterval)
	switch c.Slack.StreamMethod {
	case bot.StreamAuto, bot.StreamUpdate:
	default:
		p.bad("slack.stream_method", "%q is not one of auto, update", c.Slack.StreamMethod)
	}
	for key, v := range map[string]int{
		"conversation.max_queued":          c.Conversation.MaxQueued,
		"conversation.max_turns":           c.Conversation.MaxTurns,
		"conversation.max_turns_per_agent": c.Conversation.MaxTurnsPerAgent,
		"conversation.max_parallel":        c.Conversation.MaxParallel,
		"conversation.max_message_chars":   c.Conversation.MaxMessageChars,
	} {
		if v <= 0 {
			p.bad(key, "must be > 0")
		}
	}
	if t := c.Expert.MatchThreshold; t <= 0 || t > 1 {
		p.bad("expert.match_threshold", "must be in (0, 1]")
	}
	switch c.Expert.SessionScope {
	case "agent", "channel":
	default:
		p.bad("expert.session_scope", "%q is not one of agent, channel", c.Expert.SessionScope)
	}
	for i, s := range c.HTTP.TrustedProxies {
		if _, err := netip.ParsePrefix(s); err != nil {
			p.bad(fmt.Sprintf("http.trusted_proxies[%d]", i), "%q is not a CIDR (e.g. \"10.0.0.0/8\")", s)
		}
	}
	switch c.Memory.CloneScope {
	case agents.ScopeChannel, agents.ScopeWorkspace:
	default:
		p.bad("memory.clone_scope", "%q is not one of channel, workspace", c.Memory.CloneScope)
	}
	switch c.Errors.Notify {
	case "thread", "log":
	default:
		p.bad("errors.notify", "%q is not one of thread, log", c.Errors.Notify)
	}
}

func (c *Config) validateHTTP(p *problems) {
	if c.HTTP.PublicURL != "" && !isHTTPURL(c.HTTP.PublicURL) {
		p.bad("http.public_url", "%q is not an http(s) URL", c.HTTP.PublicURL)
	}
	if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
		p.bad("http.addr", "%q is not a listen address such as \":8080\"", c.HTTP.Addr)
	}
	if c.HTTP.OpsAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.OpsAddr); err != nil {
			p.bad("http.ops_addr", "%q is not a listen address such as \":9090\"", c.HTTP.OpsAddr)
		} else if c.HTTP.OpsAddr == c.HTTP.Addr && !strings.HasSuffix(c.HTTP.Addr, ":0") {
			p.bad("http.ops_addr", "must differ from http.addr (leave it empty to share the listener)")
		}
	}
}

func (c *Config) validateLog(p *problems) {
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		p.bad("log.format", "%q is not one of json, text", c.Log.Format)
	}
}

// validateTools checks an agent's tools: each names a configured server,
// or one tool of it ("server/tool").
func (c *Config) validateTools(key string, list []string, bad func(string, string, ...any)) {
	for i, entry := range list {
		server, tool, one := strings.Cut(entry, "/")
		if one && (tool == "" || strings.ContainsAny(tool, "/ \t")) {
			bad(fmt.Sprintf("%s.tools[%d]", key, i), "%q is not \"server\" or \"server/tool\"", entry)
			continue
		}
		if !slices.ContainsFunc(c.MCP.Servers, func(s MCPServerConfig) bool { return s.Name == server }) {
			bad(fmt.Sprintf("%s.tools[%d]", key, i), "%q names no [[mcp.servers]] (write \"server\" or \"server/tool\")", entry)
		}
	}
}

func (c *Config) hasProfile(name string) bool {
	_, ok := c.LLM.Profiles[name]
	return ok
}

func (c *Config) validateProfile(key string, p LLMProfileConfig, bad func(string, string, ...any)) {
	if p.BaseURL != nil && *p.BaseURL != "" && !isHTTPURL(*p.BaseURL) {
		bad(key+".base_url", "%q is not an http(s) URL", redact.Text(*p.BaseURL, *p.BaseURL))
	}
	if p.Temperature != nil && (*p.Temperature < 0 || *p.Temperature > 2) {
		bad(key+".temperature", "must be between 0 and 2")
	}
	if p.MaxTokens != nil && *p.MaxTokens < 0 {
		bad(key+".max_tokens", "must not be negative")
	}
	if p.MaxInputTokens != nil && *p.MaxInputTokens <= 0 {
		bad(key+".max_input_tokens", "must be > 0")
	}
	if p.MaxRetries != nil && *p.MaxRetries < 0 {
		bad(key+".max_retries", "must not be negative")
	}
	if p.Timeout != nil && p.Timeout.Duration <= 0 {
		bad(key+".timeout", "must be a positive duration")
	}
	if p.TotalTimeout != nil && p.TotalTimeout.Duration <= 0 {
		bad(key+".total_timeout", "must be a positive duration")
	}
	if p.IdleTimeout != nil && p.IdleTimeout.Duration <= 0 {
		bad(key+".idle_timeout", "must be a positive duration")
	}
}

// isHTTPURL tells whether s is an absolute http or https URL with a host.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func validatePolicy(key, policy, pattern string, bad func(string, string, ...any)) {
	if !knownPolicies[policy] {
		bad(key+".session_policy", "%q is not one of any, pattern, never", policy)
	}
	if policy == "pattern" {
		if pattern == "" {
			bad(key+".session_pattern", "is required when session_policy = \"pattern\"")
		} else if _, err := regexp.Compile(`^(?:` + pattern + `)$`); err != nil {
			bad(key+".session_pattern", "invalid RE2 pattern: %v", err)
		}
	} else if pattern != "" {
		bad(key+".session_pattern", "only used with session_policy = \"pattern\"")
	}
}

// validateCost checks [llm.prices] and [budget]: nothing negative, and a
// price names a model.
func (c *Config) validateCost(p *problems) {
	for model, pr := range c.LLM.Prices {
		key := fmt.Sprintf("llm.prices.%q", model)
		if strings.TrimSpace(model) == "" {
			p.bad(key, "must name a model")
		}
		if pr.Input < 0 || pr.Output < 0 {
			p.bad(key, "prices must be >= 0 (USD per million tokens)")
		}
	}
	for key, n := range map[string]int{
		"budget.daily_tokens_per_person":  c.Budget.DailyTokensPerPerson,
		"budget.daily_tokens_per_channel": c.Budget.DailyTokensPerChannel,
		"budget.daily_tokens":             c.Budget.DailyTokens,
	} {
		if n < 0 {
			p.bad(key, "must be >= 0 (0 = unlimited)")
		}
	}
	for i, ch := range c.Channels {
		if ch.DailyTokens < 0 {
			p.bad(fmt.Sprintf("channels[%d].daily_tokens", i), "must be >= 0 (0 = the [budget] one)")
		}
	}
}
