package main

import (
	"io"
	"strings"

	"github.com/conclavehq/conclave/agents/redact"
)

// maskingWriter is w with every configured URL's secrets (user-info, query
// values, path keys) and every secret_args argument masked, so that no log
// line shows them — the libraries' own lines included, which conclave's
// packages cannot mask at the source. slog writes one record per Write.
func maskingWriter(w io.Writer, c Config) io.Writer {
	var pairs []string
	for _, u := range c.configuredURLs() {
		pairs = append(pairs, redact.URLPairs(u)...)
	}
	for _, s := range c.MCP.Servers {
		if s.SecretArgs && len(s.Command) > 1 {
			pairs = append(pairs, redact.ValuePairs(s.Command[1:]...)...)
		}
	}
	if len(pairs) == 0 {
		return w
	}
	return replacingWriter{w: w, r: strings.NewReplacer(pairs...)}
}

// configuredURLs are the URLs of the configuration that may carry
// secrets: RPC, model, Redis and MCP endpoints.
func (c Config) configuredURLs() []string {
	urls := []string{c.ENS.MainnetRPCURL, c.Memory.RedisURL}
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

// secretValuesOf are the values a turn's trace or a debug log must never
// show: the Slack tokens, the model profiles' keys and headers, the MCP
// servers' env and headers (a "$NAME" reference read from the
// environment), and URLs with credentials.
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
		if *s.dst != "" && isSecretValue(s.key, *s.dst) {
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

type replacingWriter struct {
	w io.Writer
	r *strings.Replacer
}

func (m replacingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(m.w, m.r.Replace(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
