package agents_test

import (
	"context"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// A known key is bound only when the messages write it, up to case, spaces
// and dashes: C45654 is never bound to a known C45653, whatever the
// threading reply says; "c-45653" written by the person binds C45653.
func TestKnownKeyMustBeWritten(t *testing.T) {
	tests := []struct {
		name, message, reply, want string
	}{
		{"a digit differs", "what about customer C45654?", "C45653", ""},
		{"a digit more", "what about customer C456530?", "C45653", ""},
		{"written with a dash and lower case", "what about customer c-45653?", "C45653", "C45653"},
		{"written with a space", "what about customer C 45653?", "C45653", "C45653"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			if err := r.store.AppendSession(context.Background(), memory.SessionAppend{Namespace: cora, Key: "C45653",
				Entries: []memory.SessionEntry{{Role: llm.RoleUser, Content: "x", At: time.Now()}}}); err != nil {
				t.Fatal(err)
			}
			r.model.on(cora, templates.PromptContextNotFound, threading(tt.reply, ""))
			root := r.send("", "U1", "Alice", cora+" "+tt.message)
			r.settle()
			if got := r.state(root.TS).Bindings[cora]; got != tt.want {
				t.Errorf("bound to %q, want %q", got, tt.want)
			}
			if found := r.model.calls(cora, templates.PromptContextFound); (len(found) > 0) != (tt.want != "") {
				t.Errorf("%d context-found turns with binding %q", len(found), tt.want)
			}
		})
	}
}
