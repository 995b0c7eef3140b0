package agents_test

import (
	"context"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// TestForgottenSessionStartsEmpty: once an operator forgets a customer's
// session (conclave memory forget), the expert's next conversation on
// that key remembers nothing of the earlier one, and that conversation's
// traces are gone.
func TestForgottenSessionStartsEmpty(t *testing.T) {
	r := newRig(t, withTraces())
	ctx := context.Background()
	r.model.on(cora, templates.PromptContextNotFound, threading("C45653", ""), threading("C45653", ""))
	r.model.on(cora, templates.PromptContextFound, "Noted: windshield damage on C45653.", "I have nothing on it.")

	first := r.send("", "U1", "Alice", cora+" please log claim C45653: windshield damage.")
	r.settle()
	if got, err := r.store.ReadSession(ctx, cora, "C45653", 0); err != nil || len(got) == 0 {
		t.Fatalf("the first conversation wrote no session: %v, %v", got, err)
	}
	convID, err := r.store.TraceRef(ctx, chanA, first.TS)
	if err != nil {
		t.Fatalf("the first conversation kept no trace: %v", err)
	}

	m, ok := r.store.(memory.Manager)
	if !ok {
		t.Fatalf("%T is no memory.Manager", r.store)
	}
	f, err := m.ForgetSession(ctx, cora, "C45653")
	if err != nil {
		t.Fatalf("ForgetSession: %v", err)
	}
	if len(f.Conversations) != 1 || f.Conversations[0] != convID {
		t.Errorf("forgot the traces of %v, want [%s]", f.Conversations, convID)
	}
	if tr, err := r.store.Traces(ctx, convID); err != nil || len(tr.Turns) != 0 {
		t.Errorf("the first conversation's traces after forget: %d turns, %v", len(tr.Turns), err)
	}

	r.send("", "U2", "Bob", cora+" what happened on claim C45653?")
	r.settle()
	var asked []string
	for _, p := range []string{templates.PromptContextNotFound, templates.PromptContextFound} {
		for _, req := range r.model.calls(cora, p) {
			if indexOf(req, "what happened on claim C45653?") >= 0 {
				asked = append(asked, strings.Join(contents(req), "\n"))
			}
		}
	}
	if len(asked) == 0 {
		t.Fatal("the expert was not asked about the second conversation")
	}
	for _, req := range asked {
		if strings.Contains(req, "please log claim C45653") || strings.Contains(req, "Noted: windshield damage") {
			t.Errorf("the second conversation's request holds the forgotten session:\n%s", req)
		}
	}
	got, err := r.store.ReadSession(ctx, cora, "C45653", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range got {
		if strings.Contains(e.Content, "windshield") {
			t.Errorf("the session holds the forgotten entry %q", e.Content)
		}
	}
}
