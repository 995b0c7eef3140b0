package main

import (
	"io"
	"strings"

	"github.com/conclavehq/conclave/internal/redact"
)

// masker is the one masker of everything conclave sends out (internal/redact):
// log lines (the libraries' own included), Slack posts, stored messages,
// traces, spans, chat --record files. It masks the secrets' values as
// loaded (secretValuesOf), every configured URL's credentials (user-info,
// passwords, query values, path keys) and every secret_args argument.
func (c Config) masker() *redact.Masker {
	s := redact.Secrets{Values: c.secretValues, URLs: c.configuredURLs()}
	for _, srv := range c.MCP.Servers {
		if srv.SecretArgs && len(srv.Command) > 1 {
			s.Args = append(s.Args, srv.Command[1:]...)
		}
	}
	return redact.New(s)
}

// maskingWriter is w with c's masker on every Write: slog writes one
// record per Write.
func maskingWriter(w io.Writer, c Config) io.Writer { return c.masker().Writer(w) }

// configuredURLs are the URLs of the configuration that may carry
// secrets: RPC, model, Redis, MCP and OpenTelemetry endpoints.
func (c Config) configuredURLs() []string {
	urls := []string{c.ENS.MainnetRPCURL, c.Memory.RedisURL, c.OTel.Endpoint}
	for _, ch := range c.ENS.Chains {
		urls = append(urls, ch.RPCURL)
	}
	if c.LLM.BaseURL != nil {
		urls = append(urls, *c.LLM.BaseURL)
	}
	for _, p := range c.LLM.Profiles {
		if p.BaseURL != nil {
			urls = append(urls, *p.BaseURL)
		}
	}
	for _, s := range c.MCP.Servers {
		urls = append(urls, s.URL)
	}
	return urls
}

// secretValuesOf are the values nothing conclave sends out may show: the
// Slack tokens, the model profiles' keys and headers, the MCP servers'
// env and headers (a "$NAME" reference read from the environment). The
// URLs' credentials are the masker's, from configuredURLs, so that a
// masked URL still names its host.
func (c *Config) secretValuesOf(getenv func(string) string) []string {
	var out []string
	add := func(v string) {
		if strings.HasPrefix(v, "$") {
			v = getenv(strings.TrimPrefix(v, "$"))
		}
		if v != "" {
			out = append(out, v)
		}
	}
	for _, s := range c.secrets() {
		if *s.dst != "" && !strings.HasSuffix(s.key, "_url") && isSecretValue(s.key, *s.dst) {
			add(*s.dst)
		}
	}
	profiles := []LLMProfileConfig{c.LLM.LLMProfileConfig}
	for _, p := range c.LLM.Profiles {
		profiles = append(profiles, p)
	}
	for _, p := range profiles {
		if p.APIKey != nil {
			add(*p.APIKey)
		}
		if p.APIKeyEnv != nil && *p.APIKeyEnv != "" {
			add(getenv(*p.APIKeyEnv))
		}
		for _, v := range p.Headers {
			add(v)
		}
	}
	for _, srv := range c.MCP.Servers {
		for _, kv := range []map[string]string{srv.Env, srv.Headers} {
			for _, v := range kv {
				add(v)
			}
		}
	}
	return out
}
