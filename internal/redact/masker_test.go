package redact_test

import (
	"io"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/internal/redact"
)

func TestMaskerValues(t *testing.T) {
	m := redact.New(redact.Secrets{Values: []string{"sk-very-secret", "short", "12345678", `tok<en>"quoted"`}})
	for in, want := range map[string]string{
		`{"key":"sk-very-secret","n":12345678,"ok":true,"w":"short"}`: `{"key":"[redacted]","n":12345678,"ok":true,"w":"short"}`,
		`{"h":"tok\u003cen\u003e\"quoted\""}`:                         `{"h":"[redacted]"}`,
		`log line: tok<en>"quoted"`:                                   `log line: [redacted]`,
	} {
		if got := m.String(in); got != want {
			t.Errorf("String(%s) = %s, want %s", in, got, want)
		}
		if got := string(m.Bytes([]byte(in))); got != want {
			t.Errorf("Bytes(%s) = %s, want %s", in, got, want)
		}
	}
	if redact.New(redact.Secrets{Values: []string{"short", "1234567890"}}) != nil {
		t.Error("a mask of no secret long enough is not nil")
	}
	var none *redact.Masker
	if none.String("as is") != "as is" || string(none.Bytes([]byte("as is"))) != "as is" {
		t.Error("a nil Masker changed its input")
	}
}

// TestMaskerURLsAndArgs: one Masker masks every kind of configured
// secret, the longest first: a header value holding a key, credentials in
// a URL in each form errors write it, a secret argument.
func TestMaskerURLsAndArgs(t *testing.T) {
	m := redact.New(redact.Secrets{
		Values: []string{"Bearer sk-live-abcdef123", "sk-live-abcdef123"},
		URLs:   []string{"https://otel-user:otel-pass-9876@otel.example:4318", "redis://:rds-pass-2468@db:6379/0"},
		Args:   []string{"arg-secret-1357"},
	})
	in := `Authorization: Bearer sk-live-abcdef123; key sk-live-abcdef123; POST https://otel-user:***@otel.example:4318/v1/traces; redis://:rds-pass-2468@db:6379/0; --token arg-secret-1357`
	got := m.String(in)
	for _, secret := range []string{"sk-live", "otel-user", "otel-pass", "rds-pass", "arg-secret"} {
		if strings.Contains(got, secret) {
			t.Errorf("%s survives: %s", secret, got)
		}
	}
	for _, kept := range []string{"Authorization: [redacted]", "otel.example:4318", "db:6379"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q is not in %s", kept, got)
		}
	}
	var out strings.Builder
	if _, err := io.WriteString(m.Writer(&out), in); err != nil || out.String() != got {
		t.Errorf("Writer wrote %q, %v; want %q", out.String(), err, got)
	}
}
