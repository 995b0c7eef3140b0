package agents

import (
	"fmt"
	"slices"
	"testing"

	"github.com/conclavehq/conclave/memory"
)

// The people a conversation's load reads are the latest first, each once,
// a few; the conversations remembered are bounded.
func TestBudgetHints(t *testing.T) {
	k := newBudgetKeeper(&Options{Budgets: Budgets{PerPerson: 10}}, &Deps{Spending: memory.NewInProcess(memory.Options{})})
	for _, p := range []string{"U1", "U2", "U1", "", "U3", "U4"} {
		k.hint("c1", "C1", p)
	}
	q := k.query("c1", "")
	if q.Channel != "C1" || !slices.Equal(q.People, []string{"U4", "U3", "U1"}) {
		t.Errorf("query = %+v, want channel C1 and people U4 U3 U1", q)
	}
	if q := k.query("c1", "C2"); q.Channel != "C2" {
		t.Errorf("query with the task's channel = %+v, want C2", q)
	}
	for i := range budgetHintConvs + 10 {
		k.hint(fmt.Sprint("conv", i), "C1", "U1")
	}
	if n := len(k.hints); n != budgetHintConvs {
		t.Errorf("conversations remembered = %d, want %d", n, budgetHintConvs)
	}
	off := newBudgetKeeper(&Options{}, &Deps{Spending: memory.NewInProcess(memory.Options{})})
	off.hint("c1", "C1", "U1")
	if q := off.query("c1", "C1"); q != nil || len(off.hints) != 0 {
		t.Errorf("without budgets: query %+v, %d hints; want none", q, len(off.hints))
	}
}
