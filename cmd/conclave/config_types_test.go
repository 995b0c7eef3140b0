package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadTOMLTypeNamesTheKey: a value of the wrong type is told by its key
// and in the words of the configuration, not as a Go type.
func TestBadTOMLTypeNamesTheKey(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"a word for a number", "[conversation]\nmax_turns = \"forty\"\n", "2: conversation.max_turns: a TOML string where an integer is expected"},
		{"a number for a name", "[[agents]]\nens = 5\n", "2: agents.ens: a TOML integer where a string is expected"},
		{"a number for a list", "channels = 5\n", "1: channels: a TOML integer where a list is expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := cli(t, nil, "config", "print", "--config", path)
			if code != 1 || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, "main.") || strings.Contains(errOut, "struct field") {
				t.Errorf("exit %d, stderr %q; want 1 and %q, no Go names", code, errOut, tt.want)
			}
		})
	}
}
