package redact

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"nothing to mask", "https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"user and password", "https://ada:hunter2@rpc.example:8545/", "https://****@rpc.example:8545/"},
		{"a user alone (a key, often)", "https://0123456789abcdef@rpc.example", "https://****@rpc.example"},
		{"an Infura key", "https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef", "https://mainnet.infura.io/v3/****"},
		{"an Alchemy key", "https://polygon-mainnet.g.alchemy.com/v2/Xy7_kLm2-abcDEF123456", "https://polygon-mainnet.g.alchemy.com/v2/****"},
		{"a UUID", "https://rpc.example/0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e", "https://rpc.example/****"},
		{"a key between segments", "https://x.quiknode.pro/4f0c7d0e2b7a4c1e9f0a/rpc", "https://x.quiknode.pro/****/rpc"},
		{"query values", "https://crm.example/mcp?token=s3cret&v=2", "https://crm.example/mcp?token=****&v=****"},
		{"a query name alone", "https://crm.example/mcp?debug", "https://crm.example/mcp?debug=****"},
		{"a fragment", "https://x.example/#k=v", "https://x.example/#****"},
		{"words and versions stay", "https://x.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18", "https://x.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18"},
		{"a long word without a digit stays", "https://x.example/chat-completions-endpoint", "https://x.example/chat-completions-endpoint"},
		{"everything", "wss://u:p@rpc.example/ws/v3/abcdef0123456789abcd?key=1#f", "wss://****@rpc.example/ws/v3/****?key=****#****"},
		{"not a URL", "localhost:11434", "****"},
		{"no host", "/just/a/path", "****"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := URL(tt.in); got != tt.want {
				t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// Text masks a URL in the forms errors quote it: net/http's error for a
// request to a URL built from it, with the password starred out.
func TestTextMasksTheFormsErrorsQuote(t *testing.T) {
	base := "http://ada:hunter2@127.0.0.1:1/v3/0123456789abcdef0123?api-key=s3cr3t"
	req, err := http.NewRequest(http.MethodPost, "http://ada:hunter2@127.0.0.1:1/v3/0123456789abcdef0123/chat/completions?api-key=s3cr3t", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = http.DefaultClient.Do(req)
	if err == nil {
		t.Fatal("a request to port 1 succeeded")
	}
	var msgs = []string{err.Error(), "dial " + base + ": refused", "see " + errors.New(base).Error()}
	for _, msg := range msgs {
		got := Text(msg, base)
		for _, secret := range []string{"hunter2", "0123456789abcdef0123", "s3cr3t", "ada"} {
			if strings.Contains(got, secret) {
				t.Errorf("Text(%q) = %q: %s is still there", msg, got, secret)
			}
		}
		if !strings.Contains(got, "127.0.0.1:1") {
			t.Errorf("Text(%q) = %q: the host is gone", msg, got)
		}
	}
	if got := Text("nothing here", "https://api.openai.com/v1"); got != "nothing here" {
		t.Errorf("Text with nothing to mask = %q", got)
	}
	if got := URLPairs("https://api.openai.com/v1"); got != nil {
		t.Errorf("URLPairs with nothing to mask = %q", got)
	}
}

func TestValuePairs(t *testing.T) {
	if got := ValuePairs("s3cret", "-v", ""); !slices.Equal(got, []string{"s3cret", Mask}) {
		t.Errorf("ValuePairs = %q", got)
	}
}

func TestArgs(t *testing.T) {
	if got := Args([]string{"crm-mcp", "--token", "s3cret"}); !slices.Equal(got, []string{"crm-mcp", Mask, Mask}) {
		t.Errorf("Args = %q", got)
	}
	if got := Args(nil); got != nil {
		t.Errorf("Args(nil) = %q", got)
	}
}
