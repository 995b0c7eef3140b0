package agents_test

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// withPricedModel names the default profile's model and prices it.
func withPricedModel(r *rig) {
	r.opts.Traces = true
	r.model.profiles[""] = llm.Profile{Name: "", Model: "gpt-test"}
	r.opts.Prices = map[string]agents.Price{"gpt-test": {Input: 2, Output: 8}}
}

// spending answers every request with 10 input and 5 output tokens.
func spending(r llm.Request) (llm.Response, error) {
	return llm.Response{Content: agents.FirstLabel(r.Agent) + " ok", FinishReason: "stop", PromptTokens: 10, CompletionTokens: 5}, nil
}

func TestUsageCountedWithTheTurn(t *testing.T) {
	reports := make(chan agents.TurnReport, 4)
	r := newRig(t, withPricedModel, func(r *rig) { r.e = r.engine(fakePrompts{}, reportTo(reports)) })
	r.model.fallback = spending
	root := r.send("", "U1", "Ada", "question")
	r.settle()
	rep := receive(t, reports, "no turn report")
	wantCost := (10*2.0 + 5*8.0) / 1e6
	if len(rep.Usage) != 1 || rep.Usage[0] != (agents.ModelUsage{Model: "gpt-test", InputTokens: 10, OutputTokens: 5, Calls: 1, CostUSD: wantCost, Priced: true}) {
		t.Fatalf("report usage = %+v", rep.Usage)
	}
	counts, err := r.store.Usage(context.Background(), r.clock.Now(), r.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, c := range counts {
		groups = append(groups, c.By+" "+c.Group+" "+c.Name)
		if c.Model != "gpt-test" || c.InputTokens != 10 || c.OutputTokens != 5 || c.Calls != 1 {
			t.Errorf("count %+v, want gpt-test 10/5/1", c)
		}
	}
	if want := []string{"agent " + elen + " Elen", "channel " + chanA + " ", "person U1 Ada"}; !slices.Equal(groups, want) {
		t.Errorf("groups = %q, want %q", groups, want)
	}
	trs, err := agents.ReadTraces(context.Background(), r.store, agents.ConversationID(team, chanA, root.TS))
	if err != nil || len(trs) != 1 {
		t.Fatalf("traces = %d, %v", len(trs), err)
	}
	tr := trs[0]
	if tr.InputTokens != 10 || tr.OutputTokens != 5 || tr.CostUSD == nil || *tr.CostUSD != wantCost {
		t.Errorf("trace tokens %d/%d cost %v, want 10/5 and %g", tr.InputTokens, tr.OutputTokens, tr.CostUSD, wantCost)
	}
	if c := tr.Calls[0].Response.CostUSD; c == nil || *c != wantCost {
		t.Errorf("call cost = %v, want %g", c, wantCost)
	}
}

func TestUnpricedModelHasNoCost(t *testing.T) {
	reports := make(chan agents.TurnReport, 4)
	r := newRig(t, withPricedModel, func(r *rig) {
		r.opts.Prices = nil
		r.e = r.engine(fakePrompts{}, reportTo(reports))
	})
	r.model.fallback = spending
	root := r.send("", "U1", "Ada", "question")
	r.settle()
	if rep := receive(t, reports, "no turn report"); len(rep.Usage) != 1 || rep.Usage[0].Priced || rep.Usage[0].CostUSD != 0 {
		t.Errorf("usage = %+v, want unpriced", rep.Usage)
	}
	trs, _ := agents.ReadTraces(context.Background(), r.store, agents.ConversationID(team, chanA, root.TS))
	if len(trs) != 1 || trs[0].CostUSD != nil || trs[0].InputTokens != 10 {
		t.Errorf("traces = %+v, want tokens and no cost", trs)
	}
}

func TestBudgets(t *testing.T) {
	tests := []struct {
		name      string
		budgets   agents.Budgets
		channel   int64 // [[channels]] daily_tokens
		ephemeral bool
		notice    string
	}{
		{name: "workspace", budgets: agents.Budgets{Workspace: 15}, notice: "the workspace"},
		{name: "channel", budgets: agents.Budgets{PerChannel: 15}, notice: "this channel"},
		{name: "channel override", budgets: agents.Budgets{PerChannel: 1000}, channel: 15, notice: "this channel"},
		{name: "person", budgets: agents.Budgets{PerPerson: 15}, ephemeral: true, notice: "your messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, withPricedModel, func(r *rig) {
				r.opts.Budgets = tt.budgets
				r.opts.Channels[0].DailyTokens = tt.channel
				r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Spending = r.store })
			})
			r.model.fallback = spending
			first := r.send("", "U1", "Ada", "question")
			r.settle()
			if n := len(r.model.calls(elen, "")); n != 1 {
				t.Fatalf("model calls after the first question = %d, want 1", n)
			}
			// The budget is spent: the next turns do not start.
			r.send(first.TS, "U1", "Ada", "and another")
			r.settle()
			second := r.send("", "U1", "Ada", "a new question")
			r.send(second.TS, "U1", "Ada", "hello?")
			r.settle()
			if n := len(r.model.calls(elen, "")); n != 1 {
				t.Errorf("model calls once the budget is spent = %d, want 1", n)
			}
			if st := r.state(second.TS); st.Status != agents.StatusConcluded {
				t.Errorf("status of a refused conversation = %q, want concluded", st.Status)
			}
			if !r.reacted(second.TS, "white_check_mark") {
				t.Error("a refused conversation did not get its ✅")
			}
			want := "⚠️ The daily model budget of " + tt.notice + " is spent; it resets at 00:00 UTC."
			var notices []string
			if tt.ephemeral {
				notices = r.chat.ephemeral
				want = chanA + " U1 " + want
			} else {
				notices = r.chat.texts()
				want = "Elen: " + want
			}
			got := 0
			for _, n := range notices {
				if strings.Contains(n, "daily model budget") {
					got++
					if n != want {
						t.Errorf("notice %q, want %q", n, want)
					}
				}
			}
			// One per conversation refused, however many messages it got.
			if got != 2 {
				t.Errorf("budget notices = %d, want 2 (one per thread): %q", got, notices)
			}
			// A new UTC day: the budget is whole again.
			r.clock.Advance(24 * time.Hour)
			r.send("", "U1", "Ada", "tomorrow")
			r.settle()
			if n := len(r.model.calls(elen, "")); n != 2 {
				t.Errorf("model calls on a new day = %d, want 2", n)
			}
		})
	}
}

func TestBudgetWarnsAtEightyPercent(t *testing.T) {
	var mu sync.Mutex
	ratios := map[string]float64{}
	var logMu sync.Mutex
	logs := &bytes.Buffer{}
	r := newRig(t, withPricedModel, func(r *rig) {
		r.logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &logMu, w: logs}, nil))
		r.opts.Budgets = agents.Budgets{Workspace: 18}
		r.e = r.engine(fakePrompts{}, func(d *agents.Deps) {
			d.Spending = r.store
			d.OnBudget = func(scope string, ratio float64) { mu.Lock(); ratios[scope] = ratio; mu.Unlock() }
		})
	})
	r.model.fallback = spending
	first := r.send("", "U1", "Ada", "question") // 15 of 18 once answered
	r.settle()
	r.send(first.TS, "U1", "Ada", "more")
	r.send(first.TS, "U1", "Ada", "still more")
	r.settle()
	mu.Lock()
	defer mu.Unlock()
	if got := ratios[agents.BudgetWorkspace]; got < 0.8 {
		t.Errorf("workspace ratio = %g, want at least 0.8", got)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logs.String(), "daily model budget 80% used"); n != 1 {
		t.Errorf("80%% log lines = %d, want 1:\n%s", n, logs)
	}
}

// budgetLedger watches, on every replica and in one order (its lock is
// held across each call), the loads that read the budget totals and the
// commits of usage, to tell how many turns were under way when the
// budget ran out: those whose load read it unspent and whose usage was
// committed after. A check that reads the totals itself (Spending.Spent)
// is counted apart: turns read their budgets with their load.
type budgetLedger struct {
	mu           sync.Mutex
	limit, total int64
	read         map[string]bool // lock token → its load read the budget unspent; no usage committed under it yet
	outstanding  map[string]bool // read's tokens when the budget ran out (nil before)
	underWay     int             // of outstanding, those whose usage was committed later
	ownReads     int             // checks that read the totals apart from a load
}

type ledgerSpending struct {
	agents.Spending
	l *budgetLedger
}

func (s ledgerSpending) Spent(ctx context.Context, person, channel string) (memory.Spent, error) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.l.ownReads++
	return s.Spending.Spent(ctx, person, channel)
}

type ledgerStore struct {
	storePorts
	l *budgetLedger
}

func (s ledgerStore) AcquireAndLoad(ctx context.Context, convID string, ttl time.Duration, q memory.Lookup) (memory.Lock, memory.Snapshot, memory.Found, error) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	lk, snap, found, err := s.storePorts.AcquireAndLoad(ctx, convID, ttl, q)
	if spent, ok := found.Spent[""]; err == nil && ok && spent.Workspace < s.l.limit {
		s.l.read[lk.Token] = true
	}
	return lk, snap, found, err
}

func (s ledgerStore) Commit(ctx context.Context, lk memory.Lock, c memory.Commit) (bool, error) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	pending, err := s.storePorts.Commit(ctx, lk, c)
	if err == nil && len(c.Usage) > 0 {
		delete(s.l.read, lk.Token)
		if s.l.outstanding[lk.Token] {
			s.l.underWay++
			delete(s.l.outstanding, lk.Token)
		}
		for _, u := range c.Usage {
			s.l.total += u.InputTokens + u.OutputTokens
		}
		if s.l.total >= s.l.limit && s.l.outstanding == nil {
			s.l.outstanding = maps.Clone(s.l.read)
		}
	}
	return pending, err
}

// TestBudgetsAcrossReplicas runs three replicas on one Redis: the
// workspace budget is never exceeded by more than the turns under way
// when it ran out, and every refused thread gets exactly one notice,
// though each message reaches every replica.
func TestBudgetsAcrossReplicas(t *testing.T) {
	r := newRig(t, withPricedModel)
	db := redistest.New(t)
	const limit, perTurn, threads = 45, 15, 12
	r.opts.Budgets = agents.Budgets{Workspace: limit}
	r.opts.SweepInterval = 5 * time.Millisecond
	// One worker a replica: at most three turns are under way when the
	// budget runs out, so it bites before the twelfth thread. With more,
	// all twelve could load before the first commit counted a token, and
	// the budget would be right to let them all run.
	r.opts.MaxParallel = 1
	r.model.fallback = spending
	ledger := &budgetLedger{limit: limit, read: map[string]bool{}}
	posted := make(chan struct{}, 1)
	r.chat.afterPost = func() {
		select {
		case posted <- struct{}{}:
		default:
		}
	}
	stores := make([]*memory.Redis, 3)
	engines := make([]*agents.Engine, 3)
	for i := range engines {
		stores[i] = db.Store(t, memory.Options{Now: r.clock.Now})
		engines[i] = r.engine(fakePrompts{}, onStore(ledgerStore{stores[i], ledger}),
			func(d *agents.Deps) { d.Spending = ledgerSpending{stores[i], ledger} })
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, e := range engines {
		wg.Go(func() {
			if err := e.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	var roots []string
	for range threads {
		ev := agents.Event{ID: "Ev" + r.nextTS(), Team: team, Channel: chanA, TS: r.nextTS(), UserID: "U1", UserName: "Ada", Text: "question"}
		roots = append(roots, ev.TS)
		for _, e := range engines {
			if err := handle(ctx, e, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Wait until every thread has its answer or its notice.
	answered := func() map[string]int {
		r.chat.mu.Lock()
		defer r.chat.mu.Unlock()
		out := map[string]int{}
		for _, p := range r.chat.posts {
			out[p.ThreadTS]++
		}
		return out
	}
	for len(answered()) < threads {
		receive(t, posted, "no more posts: threads answered or refused fewer than all")
	}
	cancel()
	waitAll(t, &wg, "the replicas did not stop")
	spent, err := stores[0].Spent(context.Background(), "", chanA)
	if err != nil {
		t.Fatal(err)
	}
	calls := int64(len(r.model.calls(elen, "")))
	if spent.Workspace != calls*perTurn {
		t.Errorf("counted %d tokens for %d calls, want %d", spent.Workspace, calls, calls*perTurn)
	}
	ledger.mu.Lock()
	underWay, ranOut, ownReads := ledger.underWay, ledger.outstanding != nil, ledger.ownReads
	ledger.mu.Unlock()
	if !ranOut {
		t.Fatalf("the budget never ran out (%d tokens counted)", spent.Workspace)
	}
	if ownReads != 0 {
		t.Errorf("%d checks read the budget totals apart from their load, want none", ownReads)
	}
	if over := spent.Workspace - limit; over > int64(underWay)*perTurn {
		t.Errorf("budget %d exceeded by %d tokens, more than the %d turns under way when it ran out", limit, over, underWay)
	}
	if calls >= threads {
		t.Errorf("every thread was answered (%d calls): the budget never bit", calls)
	}
	posts := answered()
	notices := 0
	r.chat.mu.Lock()
	for _, p := range r.chat.posts {
		if strings.Contains(p.Text, "daily model budget of the workspace") {
			notices++
		}
	}
	r.chat.mu.Unlock()
	for _, root := range roots {
		if posts[root] != 1 {
			t.Errorf("thread %s got %d posts, want one answer or one notice", root, posts[root])
		}
	}
	if want := threads - int(calls); notices != want {
		t.Errorf("notices = %d, want %d (one per refused thread)", notices, want)
	}
}

// With budgets on, a turn's store work takes the round trips it takes
// without (TestRoundTripsPerTurn): today's counters are read in the
// round trip that takes the lock and loads the thread, and counting its
// usage rides in the commit that ends it.
func TestRoundTripsPerTurnWithBudgets(t *testing.T) {
	for _, tt := range []struct {
		name    string
		budgets agents.Budgets
		turn    int64
	}{
		{"budgets off", agents.Budgets{}, 3},
		{"budgets on", agents.Budgets{PerPerson: 1000, PerChannel: 1000, Workspace: 1000}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var trips *redistest.RoundTrips
			r := newRig(t, withCountedRedis(&trips), withPricedModel, func(r *rig) {
				r.opts.Budgets = tt.budgets
				r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Spending = r.store })
			})
			r.model.fallback = spending
			r.send("", "U1", "Ada", "a first thread, for the caches")
			r.settle()
			ev := r.send("", "U1", "Ada", "hello")
			handled := trips.Count()
			r.e.Process(context.Background(), agents.ConversationID(team, chanA, ev.TS), chanA)
			if n := trips.Count() - handled; n > tt.turn {
				t.Errorf("the turn took %d round trips, want at most %d", n, tt.turn)
			}
			counts, err := r.store.Usage(context.Background(), r.clock.Now(), r.clock.Now())
			if err != nil || len(counts) != 3 || counts[0].Calls != 2 {
				t.Errorf("usage after two turns = %+v, %v; want its three groups, two calls each", counts, err)
			}
		})
	}
}

// BenchmarkTurnBudgets is a person's question answered by the
// facilitator on Redis, with budgets off and on; it reports the Redis
// round trips and the process's CPU time (user and system, every
// goroutine's) per turn beside the time.
func BenchmarkTurnBudgets(b *testing.B) {
	for _, bb := range []struct {
		name    string
		budgets agents.Budgets
	}{
		{"off", agents.Budgets{}},
		{"on", agents.Budgets{PerPerson: 1 << 40, PerChannel: 1 << 40, Workspace: 1 << 40}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			var trips *redistest.RoundTrips
			r := newRig(b, withCountedRedis(&trips), withPricedModel, func(r *rig) {
				r.opts.Budgets = bb.budgets
				r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Spending = r.store })
			})
			r.model.fallback = spending
			turns := 0
			start := trips.Count()
			began := processCPU(b)
			for b.Loop() {
				ev := r.send("", "U1", "Ada", "hello")
				r.e.Process(context.Background(), agents.ConversationID(team, chanA, ev.TS), chanA)
				turns++
			}
			b.ReportMetric(float64(trips.Count()-start)/float64(turns), "trips/turn")
			b.ReportMetric(float64(processCPU(b)-began)/float64(time.Millisecond)/float64(turns), "cpu-ms/turn")
		})
	}
}

// A load reads the totals of the people its conversation's turns were
// counted for and of the authors recorded since: another person's reply
// in someone's thread is checked in the turn's usual round trips, and
// counts for the person whose message began the exchange.
func TestRoundTripsOfAReplyWithBudgets(t *testing.T) {
	var trips *redistest.RoundTrips
	r := newRig(t, withCountedRedis(&trips), withPricedModel, func(r *rig) {
		r.opts.Budgets = agents.Budgets{PerPerson: 1000}
		r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Spending = r.store })
	})
	r.model.fallback = spending
	root := r.send("", "U1", "Ada", "a question")
	r.settle()
	r.send(root.TS, "U2", "Bo", "and what about mine")
	handled := trips.Count()
	r.e.Process(context.Background(), agents.ConversationID(team, chanA, root.TS), chanA)
	if n := trips.Count() - handled; n > 3 {
		t.Errorf("the turn took %d round trips, want at most 3", n)
	}
	if n := len(r.model.calls(elen, "")); n != 2 {
		t.Fatalf("model calls = %d, want 2", n)
	}
	for person, want := range map[string]int64{"U1": 30, "U2": 0} {
		if s, err := r.store.Spent(context.Background(), person, chanA); err != nil || s.Person != want {
			t.Errorf("spent by %s = %+v, %v; want %d", person, s, err, want)
		}
	}
}

// A replica that recorded none of a conversation's messages and checked
// none of its turns does not know whose budget its turn counts against:
// it reads the totals in a round trip of their own, and refuses alike.
// Having checked once, it reads them with the load from then on.
func TestBudgetCheckedOnAReplicaThatSawNothing(t *testing.T) {
	r := newRig(t, withPricedModel, func(r *rig) {
		r.opts.Budgets = agents.Budgets{PerPerson: 15}
		r.e = r.engine(fakePrompts{}, func(d *agents.Deps) { d.Spending = r.store })
	})
	r.model.fallback = spending
	r.send("", "U1", "Ada", "question")
	r.settle()
	var reads int
	var mu sync.Mutex
	other := r.engine(fakePrompts{}, func(d *agents.Deps) {
		d.Spending = countedSpending{Spending: r.store, n: &reads, mu: &mu}
	})
	second := r.send("", "U1", "Ada", "another question") // recorded by the first replica
	settleEngines(t, r.store, r.clock, other)
	if n := len(r.model.calls(elen, "")); n != 1 {
		t.Errorf("model calls = %d, want 1: the person's budget is spent", n)
	}
	if st := r.state(second.TS); st.Status != agents.StatusConcluded {
		t.Errorf("status = %q, want concluded", st.Status)
	}
	want := chanA + " U1 ⚠️ The daily model budget of your messages is spent; it resets at 00:00 UTC."
	if !slices.Contains(r.chat.ephemeral, want) {
		t.Errorf("ephemeral notices %q, want %q", r.chat.ephemeral, want)
	}
	r.send(second.TS, "U1", "Ada", "hello?") // reopens the thread: checked again
	settleEngines(t, r.store, r.clock, other)
	if n := len(r.model.calls(elen, "")); n != 1 {
		t.Errorf("model calls after the thread reopened = %d, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if reads != 1 {
		t.Errorf("totals read apart from the load %d times, want 1", reads)
	}
}

type countedSpending struct {
	agents.Spending
	mu *sync.Mutex
	n  *int
}

func (s countedSpending) Spent(ctx context.Context, person, channel string) (memory.Spent, error) {
	s.mu.Lock()
	*s.n++
	s.mu.Unlock()
	return s.Spending.Spent(ctx, person, channel)
}
