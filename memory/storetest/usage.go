package storetest

import (
	"maps"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
)

// usageTests are the suite's cases on the daily usage counters.
var usageTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"Usage/counted by commits", testUsageCounted},
	{"Usage/per UTC day", testUsageDays},
	{"Usage/lost lock counts nothing", testUsageLostLock},
	{"Usage/bad input", testUsageBadInput},
	{"Usage/read with the load", testUsageLooked},
}

func (h *harness) usage(t *testing.T, from, to time.Time) []memory.UsageCount {
	t.Helper()
	u, err := h.s.Usage(h.ctx, from, to)
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	return u
}

func (h *harness) spent(t *testing.T, person, channel string) memory.Spent {
	t.Helper()
	s, err := h.s.Spent(h.ctx, person, channel)
	if err != nil {
		t.Fatalf("Spent: %v", err)
	}
	return s
}

// wantCounts compares counts, ignoring nothing: the store returns them
// ordered by group kind, group and model.
func wantCounts(t *testing.T, got, want []memory.UsageCount) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("usage = %+v,\nwant %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("usage[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// spend commits usage in conversation id (recorded first when new).
func (h *harness) spend(t *testing.T, id string, us ...memory.Usage) {
	t.Helper()
	h.record(t, id, h.msg("1700000000.000100", "hi"), "")
	l := h.lock(t, id, time.Minute)
	h.commit(t, l, memory.Commit{Conversation: conv(id), Usage: us, Release: true})
}

func testUsageCounted(t *testing.T, h *harness) {
	if u := h.usage(t, start, start); len(u) != 0 {
		t.Fatalf("usage before any commit = %+v", u)
	}
	ada := memory.Usage{Person: "U1", PersonName: "Ada", Channel: "C1", Agent: "elen.acme.eth", AgentName: "Elen",
		Model: "gpt-4o-mini", InputTokens: 100, OutputTokens: 20, Calls: 1}
	h.spend(t, "c1", ada, ada, memory.Usage{Person: "U1", Channel: "C1", Agent: "bob.acme.eth", Model: "gpt-4o",
		InputTokens: 7, OutputTokens: 3, Calls: 2})
	h.spend(t, "c2", memory.Usage{Channel: "C2", Agent: "elen.acme.eth", Model: "gpt-4o-mini",
		InputTokens: 5, OutputTokens: 1, Calls: 1})
	day := memory.UsageDay(start)
	wantCounts(t, h.usage(t, start, start), []memory.UsageCount{
		{Day: day, By: memory.UsageByAgent, Group: "bob.acme.eth", Model: "gpt-4o", InputTokens: 7, OutputTokens: 3, Calls: 2},
		{Day: day, By: memory.UsageByAgent, Group: "elen.acme.eth", Name: "Elen", Model: "gpt-4o-mini", InputTokens: 205, OutputTokens: 41, Calls: 3},
		{Day: day, By: memory.UsageByChannel, Group: "C1", Model: "gpt-4o", InputTokens: 7, OutputTokens: 3, Calls: 2},
		{Day: day, By: memory.UsageByChannel, Group: "C1", Model: "gpt-4o-mini", InputTokens: 200, OutputTokens: 40, Calls: 2},
		{Day: day, By: memory.UsageByChannel, Group: "C2", Model: "gpt-4o-mini", InputTokens: 5, OutputTokens: 1, Calls: 1},
		{Day: day, By: memory.UsageByPerson, Group: "U1", Name: "Ada", Model: "gpt-4o", InputTokens: 7, OutputTokens: 3, Calls: 2},
		{Day: day, By: memory.UsageByPerson, Group: "U1", Name: "Ada", Model: "gpt-4o-mini", InputTokens: 200, OutputTokens: 40, Calls: 2},
	})
	if got, want := h.spent(t, "U1", "C1"), (memory.Spent{Person: 250, Channel: 250, Workspace: 256}); got != want {
		t.Errorf("Spent(U1, C1) = %+v, want %+v", got, want)
	}
	if got, want := h.spent(t, "", "C2"), (memory.Spent{Channel: 6, Workspace: 256}); got != want {
		t.Errorf("Spent(-, C2) = %+v, want %+v", got, want)
	}
	if got, want := h.spent(t, "U9", "C9"), (memory.Spent{Workspace: 256}); got != want {
		t.Errorf("Spent(U9, C9) = %+v, want %+v", got, want)
	}
}

func testUsageDays(t *testing.T, h *harness) {
	u := memory.Usage{Person: "U1", Channel: "C1", Agent: "a.eth", Model: "m", InputTokens: 10, OutputTokens: 1, Calls: 1}
	h.spend(t, "c1", u)
	// The next UTC day starts a new count, for the budgets too. Only the
	// store's clock tells the day: no real time needs to pass.
	next := time.Date(start.Year(), start.Month(), start.Day()+1, 0, 0, 1, 0, time.UTC)
	h.clock.Advance(next.Sub(start))
	if got := h.spent(t, "U1", "C1"); got != (memory.Spent{}) {
		t.Errorf("Spent on a new day = %+v, want nothing", got)
	}
	u.InputTokens = 30
	h.spend(t, "c2", u)
	if got, want := h.spent(t, "U1", "C1"), (memory.Spent{Person: 31, Channel: 31, Workspace: 31}); got != want {
		t.Errorf("Spent on the second day = %+v, want %+v", got, want)
	}
	all := h.usage(t, start, next)
	var days []string
	for _, c := range all {
		if c.By == memory.UsageByAgent {
			days = append(days, c.Day)
			if want := map[string]int64{memory.UsageDay(start): 10, memory.UsageDay(next): 30}[c.Day]; c.InputTokens != want {
				t.Errorf("input tokens of %s = %d, want %d", c.Day, c.InputTokens, want)
			}
		}
	}
	want(t, "days", days, []string{memory.UsageDay(start), memory.UsageDay(next)})
	if got := h.usage(t, next, next); len(got) != 3 || got[0].Day != memory.UsageDay(next) {
		t.Errorf("usage of the second day alone = %+v, want its three groups", got)
	}
}

func testUsageLostLock(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "")
	l := h.lock(t, "c1", time.Minute)
	h.release(t, l)
	_, err := h.s.Commit(h.ctx, l, memory.Commit{Conversation: conv("c1"),
		Usage: []memory.Usage{{Channel: "C1", Agent: "a.eth", Model: "m", InputTokens: 1}}})
	wantErr(t, "commit with a lost lock", err, memory.ErrLockLost)
	if u := h.usage(t, start, start); len(u) != 0 {
		t.Errorf("usage after a refused commit = %+v, want none", u)
	}
}

func testUsageBadInput(t *testing.T, h *harness) {
	h.record(t, "c1", h.msg("1700000000.000100", "hi"), "")
	l := h.lock(t, "c1", time.Minute)
	for name, u := range map[string]memory.Usage{
		"no model":          {Channel: "C1", Agent: "a.eth"},
		"no channel":        {Agent: "a.eth", Model: "m"},
		"negative tokens":   {Channel: "C1", Agent: "a.eth", Model: "m", InputTokens: -1},
		"separator in a id": {Person: "U\x1f1", Channel: "C1", Agent: "a.eth", Model: "m"},
	} {
		_, err := h.s.Commit(h.ctx, l, memory.Commit{Conversation: conv("c1"), Messages: []memory.Message{h.msg("1700000000.000200", "lost?")},
			Usage: []memory.Usage{{Channel: "C1", Agent: "a.eth", Model: "m", InputTokens: 5}, u}})
		if err == nil {
			t.Errorf("%s: commit accepted", name)
		}
	}
	if u := h.usage(t, start, start); len(u) != 0 {
		t.Errorf("usage after refused commits = %+v, want none", u)
	}
	if got := h.texts(t, "c1"); len(got) != 1 {
		t.Errorf("messages after refused commits = %q, want the recorded one only", got)
	}
	if _, err := h.s.Usage(h.ctx, start, start.Add(-48*time.Hour)); err == nil {
		t.Error("Usage with the end before the start: no error")
	}
}

// testUsageLooked: a Lookup's Spent reads, beside the lock and the load,
// what Spent reads for each person named and for none, of today only.
func testUsageLooked(t *testing.T, h *harness) {
	h.spend(t, "c1", memory.Usage{Person: "U1", Channel: "C1", Agent: "a.eth", Model: "m", InputTokens: 10, OutputTokens: 2, Calls: 1},
		memory.Usage{Person: "U2", Channel: "C2", Agent: "a.eth", Model: "m", InputTokens: 5, OutputTokens: 0, Calls: 1})
	q := memory.Lookup{Spent: &memory.SpentQuery{Channel: "C1", People: []string{"U1", "U9"}}}
	want := map[string]memory.Spent{
		"":   {Channel: 12, Workspace: 17},
		"U1": {Person: 12, Channel: 12, Workspace: 17},
		"U9": {Channel: 12, Workspace: 17},
	}
	l, _, f, err := h.s.AcquireAndLoad(h.ctx, "c1", time.Minute, q)
	if err != nil {
		t.Fatalf("AcquireAndLoad: %v", err)
	}
	if !maps.Equal(f.Spent, want) {
		t.Errorf("AcquireAndLoad's Spent = %+v, want %+v", f.Spent, want)
	}
	for p, s := range want {
		if got := h.spent(t, p, "C1"); got != s {
			t.Errorf("Spent(%q, C1) = %+v, the lookup read %+v", p, got, s)
		}
	}
	h.release(t, l)
	if f, err := h.s.Lookup(h.ctx, memory.Lookup{Channel: "C1"}); err != nil || f.Spent != nil {
		t.Errorf("Lookup without Spent read %+v, %v; want no totals", f.Spent, err)
	}
	h.clock.Advance(24 * time.Hour)
	f, err = h.s.Lookup(h.ctx, memory.Lookup{Spent: &memory.SpentQuery{People: []string{"U1"}}})
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	if want := map[string]memory.Spent{"": {}, "U1": {}}; !maps.Equal(f.Spent, want) {
		t.Errorf("Spent the next day = %+v, want %+v", f.Spent, want)
	}
}
