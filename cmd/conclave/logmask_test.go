package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Every line through the log writer has the configured URLs' secrets and
// the secret arguments masked, whoever wrote it (a library too).
func TestLogLinesMaskConfiguredURLs(t *testing.T) {
	cfg := defaultConfig()
	file := `
[llm]
base_url = "https://gw-user:gw-pass-4321@llm.example/v1?key=q-secret-8765"
[ens]
mainnet_rpc_url = "https://mainnet.example/v3/0123456789abcdef0123456789abcdef"
[memory]
redis_url = "redis://conclave:rds-pass-2468@db:6379/0"
[[mcp.servers]]
name = "crm"
command = ["crm-mcp", "--token", "arg-secret-1357"]
secret_args = true
[[mcp.servers]]
name = "search"
url = "https://search.example/mcp?token=mcp-secret-9753"
`
	if err := decodeConfig("c.toml", []byte(file), &cfg); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(maskingWriter(&out, cfg), nil))
	log.Warn("a library says", slog.String("err", `Post "https://gw-user:***@llm.example/v1?key=q-secret-8765/chat/completions": refused`))
	log.Warn("dial https://mainnet.example/v3/0123456789abcdef0123456789abcdef failed")
	log.Warn("redis", slog.String("url", "redis://conclave:rds-pass-2468@db:6379/0"))
	log.Info("mcp stderr", slog.String("line", "started with --token arg-secret-1357"))
	log.Info("mcp", slog.String("err", `Post "https://search.example/mcp?token=mcp-secret-9753": EOF`))
	for _, secret := range []string{"gw-user", "gw-pass-4321", "q-secret-8765", "0123456789abcdef0123456789abcdef", "rds-pass-2468", "arg-secret-1357", "mcp-secret-9753"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("%s is in the log:\n%s", secret, out.String())
		}
	}
	for _, host := range []string{"llm.example", "mainnet.example/v3/****", "db:6379", "search.example/mcp?token=****"} {
		if !strings.Contains(out.String(), host) {
			t.Errorf("%s is not in the log:\n%s", host, out.String())
		}
	}
}
