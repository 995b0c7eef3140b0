package main

import (
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents"
)

// TestTracePrintsControlsEscaped: what a model or a tool wrote reaches
// the terminal with its control characters escaped, so that an escape
// sequence in a tool's result is shown, not run.
func TestTracePrintsControlsEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"plain, with é and 👩‍💻": "plain, with é and 👩‍💻",
		"red \x1b[31mtext":      `red \x1b[31mtext`,
		"bell\a and NUL\x00":    `bell\x07 and NUL\x00`,
		"C1 \u009b2J":           `C1 \x9b2J`,
		"lines\nand\ttabs":      "lines\nand\ttabs",
		"bidi \u202eevil":       `bidi \u202eevil`,
	} {
		if got := escapeControls(in); got != want {
			t.Errorf("escapeControls(%q) = %q, want %q", in, got, want)
		}
	}
	var out strings.Builder
	tr := agents.Trace{TurnID: "T1", Agent: "elen", Role: "facilitator", Outcome: "ok",
		Tools: []agents.TraceTool{{Name: "crm__x", Arguments: "{\"q\":\"\x1b]0;pwned\a\"}", Outcome: "ok", Result: "\x1b[2Jcleared"}}}
	writeTurnBlock(escapingWriter{&out}, tr)
	if strings.ContainsAny(out.String(), "\x1b\a") || !strings.Contains(out.String(), `\x1b[2Jcleared`) {
		t.Errorf("the printed trace holds raw controls, or lost them:\n%q", out.String())
	}
}
