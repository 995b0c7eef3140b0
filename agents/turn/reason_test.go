package turn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// TestNoticeReason checks that a notice gives a reason class and none of
// the error's text: errors here carry a host name and a key that must not
// come out.
func TestNoticeReason(t *testing.T) {
	const leak = "db-7.corp.internal sk-live-secret"
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"HTTP 500", fmt.Errorf("turn: %w", &llm.Error{Status: 500, Reason: llm.ReasonServer}), "the model endpoint returned HTTP 500"},
		{"HTTP 429", &llm.Error{Status: 429, Reason: llm.ReasonRateLimited}, "the model endpoint returned HTTP 429"},
		{"timeout", &llm.Error{Reason: llm.ReasonTimeout}, "the model endpoint timed out"},
		{"total timeout", &llm.Error{Reason: llm.ReasonDeadline}, "the model endpoint timed out"},
		{"connection", &llm.Error{Reason: llm.ReasonConnection}, "the model endpoint could not be reached"},
		{"empty", &llm.Error{Status: 200, Reason: llm.ReasonEmpty}, "the model endpoint returned an empty reply"},
		{"malformed", &llm.Error{Reason: llm.ReasonMalformed}, "the model endpoint returned a malformed reply"},
		{"invalid", &llm.Error{Reason: llm.ReasonInvalid}, "the model request was refused before sending"},
		{"canceled", &llm.Error{Reason: llm.ReasonCanceled}, "the model call failed"},
		{"template with a line", fmt.Errorf("render: %w", &templates.Error{File: "agents/x.eth/default.tmpl", Line: 3, Message: leak}),
			"template error in agents/x.eth/default.tmpl:3"},
		{"template without a line", &templates.Error{File: "roles/expert/settings.toml", Message: leak}, "template error in roles/expert/settings.toml"},
		{"template by its absolute path", &templates.Error{File: "/srv/conclave/agents/config/agents/x.eth/system.tmpl", Line: 2, Message: leak},
			"template error in agents/x.eth/system.tmpl:2"},
		{"role template by its absolute path", &templates.Error{File: "/srv/conclave/expert/system.tmpl", Message: leak}, "template error in expert/system.tmpl"},
		{"a file outside the layout by its absolute path", &templates.Error{File: "/home/ops/corp.internal/notes.tmpl", Message: leak}, "template error in notes.tmpl"},
		{"gateway refused", fmt.Errorf("ens: %s: %w", leak, ens.ErrGatewayRefused), "identity look-up failed: gateway refused"},
		{"gateway unreachable", fmt.Errorf("ens: %s: %w", leak, ens.ErrGatewayUnreachable), "identity look-up failed: gateway unreachable"},
		{"no RPC", fmt.Errorf("ens: %w", ens.ErrNoRPC), "identity look-up failed"},
		{"anything else", errors.New(leak), "an internal error (see conclave's log)"},
		{"a context error", fmt.Errorf("%s: %w", leak, context.DeadlineExceeded), "an internal error (see conclave's log)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NoticeReason(tt.err)
			if got != tt.want {
				t.Errorf("NoticeReason = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "corp.internal") || strings.Contains(got, "sk-live") {
				t.Errorf("NoticeReason leaks: %q", got)
			}
		})
	}
}
