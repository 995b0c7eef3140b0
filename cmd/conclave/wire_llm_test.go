package main

import (
	"testing"
	"time"
)

func TestLLMProfilesInherit(t *testing.T) {
	cfg := defaultConfig()
	file := `
[llm]
api_key = "sk-default"
model = "base-model"
temperature = 0.4
headers = { "X-Team" = "claims" }
[llm.profiles.cheap]
model = "small"
max_tokens = 300
[llm.profiles.local]
base_url = "http://127.0.0.1:11434/v1"
timeout = "5s"
headers = { "X-Local" = "1" }
[llm.profiles.other]
base_url = "https://gateway.example/v1"
api_key = "sk-gateway"
`
	if err := decodeConfig("c.toml", []byte(file), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.applyEnv(noEnv)
	def, named := llmProfiles(cfg.LLM)
	if def.Model != "base-model" || def.APIKey != "sk-default" || def.MaxRetries != 3 || def.Timeout != 60*time.Second {
		t.Errorf("default profile = %+v", def)
	}
	cheap := named["cheap"]
	if cheap.Name != "cheap" || cheap.Model != "small" || cheap.MaxTokens != 300 || cheap.APIKey != "sk-default" || *cheap.Temperature != 0.4 || cheap.Headers["X-Team"] != "claims" {
		t.Errorf("cheap = %+v", cheap)
	}
	local := named["local"]
	if local.APIKey != "" {
		t.Errorf("a profile with another base URL inherited the default key")
	}
	if local.Timeout != 5*time.Second || local.Model != "base-model" || local.Headers["X-Local"] != "1" {
		t.Errorf("local = %+v", local)
	}
	// [llm]'s headers stay with [llm]'s endpoint, as its key does: a header
	// may carry a key (x-api-key).
	if _, ok := local.Headers["X-Team"]; ok {
		t.Errorf("a profile with another base URL inherited [llm]'s headers: %v", local.Headers)
	}
	if h := named["other"].Headers; len(h) != 0 {
		t.Errorf("other headers = %v, want none", h)
	}
	if _, ok := def.Headers["X-Local"]; ok {
		t.Errorf("a profile's header leaked into the default profile")
	}
	if named["other"].APIKey != "sk-gateway" {
		t.Errorf("other key = %q", named["other"].APIKey)
	}
}
