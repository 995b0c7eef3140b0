package ens_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/internal/testlog"
)

// waitingInResolve counts the goroutines that wait in the cache for a
// look-up to answer (blocked in Resolve's select).
func waitingInResolve() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, frames, _ := strings.Cut(g, "\n")
		if strings.Contains(head, "[select") && strings.HasPrefix(frames, "github.com/conclavehq/conclave/ens.(*Cache).resolve(") {
			count++
		}
	}
	return count
}

type cacheRig struct {
	fake  *fakeChain
	clock *testclock.Clock
	logs  *testlog.Buffer
	d     *ens.Directory
}

func newCacheRig(t *testing.T) cacheRig {
	t.Helper()
	r := cacheRig{fake: newFakeChain(t), clock: testclock.New(time.Time{}), logs: &testlog.Buffer{}}
	seedAgents(r.fake)
	r.d = newDirectory(t, r.fake, ens.Options{
		CacheTTL: 10 * time.Minute, NegativeTTL: time.Minute, StaleMax: 24 * time.Hour,
		Now: r.clock.Now, Logger: slog.New(slog.NewTextHandler(r.logs, nil)),
	})
	return r
}

const claudine = "claudine.acme.137.protocol6022.eth"

func TestCacheHitMakesNoCalls(t *testing.T) {
	r := newCacheRig(t)
	ctx := context.Background()
	first, err := r.d.Resolve(ctx, claudine)
	if err != nil {
		t.Fatal(err)
	}
	cold := r.fake.CallCount("")
	if cold == 0 {
		t.Fatal("a cold look-up made no RPC call")
	}
	for _, form := range []string{claudine, "Claudine.acme.137.6022.eth", "claudine.ACME.137.protocol6022.eth"} {
		got, err := r.d.Resolve(ctx, form)
		if err != nil || got.EnsDomain != first.EnsDomain || got.Owner != first.Owner {
			t.Fatalf("Resolve(%q) = %+v, %v", form, got, err)
		}
	}
	if n := r.fake.CallCount(""); n != cold {
		t.Errorf("warm look-ups made %d RPC calls", n-cold)
	}
	if s := r.d.CacheStats(); s.Hits != 3 || s.Misses != 1 {
		t.Errorf("stats = %+v, want 3 hits and 1 miss", s)
	}

	r.clock.Advance(10*time.Minute + time.Second)
	if _, err := r.d.Resolve(ctx, claudine); err != nil {
		t.Fatal(err)
	}
	if n := r.fake.CallCount("agentRef"); n != 2 {
		t.Errorf("after the TTL, agentRef calls = %d, want 2", n)
	}
}

func TestCacheCollapsesConcurrentLookups(t *testing.T) {
	r := newCacheRig(t)
	release := r.fake.HoldCalls()
	defer release()
	const callers = 8
	var wg sync.WaitGroup
	errs := make([]error, callers)
	owners := make([]string, callers)
	for i := range callers {
		form := claudine
		if i%2 == 1 {
			form = "claudine.acme.137.6022.eth"
		}
		wg.Go(func() {
			a, err := r.d.Resolve(context.Background(), form)
			errs[i], owners[i] = err, a.Owner
		})
	}
	// Release the chain only once the first look-up is held in it and
	// every caller waits for an answer.
	for r.fake.WaitingCalls() == 0 || waitingInResolve() < callers {
		runtime.Gosched()
	}
	release()
	wg.Wait()
	if s := r.d.CacheStats(); s.Collapsed != callers-1 || s.Misses != 1 {
		t.Errorf("stats = %+v, want %d collapsed and 1 miss", s, callers-1)
	}
	for i := range callers {
		if errs[i] != nil || owners[i] != ownerAlice.Hex() {
			t.Fatalf("caller %d: owner %q, error %v", i, owners[i], errs[i])
		}
	}
	if n := r.fake.CallCount("agentRef"); n != 1 {
		t.Errorf("%d concurrent look-ups made %d agentRef calls, want 1", callers, n)
	}
	if n := r.fake.CallCount("informationOf"); n != 1 {
		t.Errorf("informationOf calls = %d, want 1", n)
	}
}

func TestCacheWaiterOutlivesCancelledLeader(t *testing.T) {
	r := newCacheRig(t)
	release := r.fake.HoldCalls()
	defer release()
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderDone := make(chan error, 1)
	go func() {
		_, err := r.d.Resolve(leaderCtx, claudine)
		leaderDone <- err
	}()
	for r.fake.WaitingCalls() == 0 {
		runtime.Gosched()
	}
	waiterDone := make(chan error, 1)
	go func() {
		_, err := r.d.Resolve(context.Background(), claudine)
		waiterDone <- err
	}()
	for waitingInResolve() < 2 {
		runtime.Gosched()
	}
	cancelLeader()
	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader error = %v, want context.Canceled", err)
	}
	release()
	if err := <-waiterDone; err != nil {
		t.Fatalf("the waiter inherited the leader's cancellation: %v", err)
	}
}

func TestCacheNegative(t *testing.T) {
	r := newCacheRig(t)
	ctx := context.Background()
	const nobody = "nobody.acme.137.protocol6022.eth"
	for range 3 {
		if _, err := r.d.Resolve(ctx, nobody); !errors.Is(err, ens.ErrNotFound) {
			t.Fatalf("error = %v, want ErrNotFound", err)
		}
	}
	if n := r.fake.CallCount("agentRef"); n != 2 { // one per base
		t.Fatalf("agentRef calls = %d, want 2 (both bases, once)", n)
	}
	// Minted meanwhile: still unknown until the negative TTL passes.
	r.fake.Mint(nobody, 9, fakeToken{Name: "nobody", Owner: ownerBob})
	if _, err := r.d.Resolve(ctx, nobody); !errors.Is(err, ens.ErrNotFound) {
		t.Fatalf("within the negative TTL: error = %v", err)
	}
	r.clock.Advance(time.Minute + time.Second)
	if a, err := r.d.Resolve(ctx, nobody); err != nil || a.Owner != ownerBob.Hex() {
		t.Fatalf("after the negative TTL: %+v, %v", a, err)
	}
}

func TestCacheServesStaleWhenChainDown(t *testing.T) {
	r := newCacheRig(t)
	ctx := context.Background()
	fresh, err := r.d.Resolve(ctx, claudine)
	if err != nil {
		t.Fatal(err)
	}
	r.fake.SetDown(true)

	r.clock.Advance(time.Hour)
	stale, err := r.d.Resolve(ctx, claudine)
	if err != nil {
		t.Fatalf("chain down, entry an hour old: %v", err)
	}
	if stale.Owner != fresh.Owner || stale.EnsDomain != fresh.EnsDomain {
		t.Errorf("stale agent = %+v, want %+v", stale, fresh)
	}
	if s := r.d.CacheStats(); s.Stale != 1 {
		t.Errorf("stats = %+v, want 1 stale", s)
	}
	// While the chain is down it is asked again only after the negative TTL.
	calls := r.fake.CallCount("")
	if _, err := r.d.Resolve(ctx, claudine); err != nil || r.fake.CallCount("") != calls {
		t.Errorf("right after serving stale: error %v, %d more RPC calls", err, r.fake.CallCount("")-calls)
	}
	r.clock.Advance(time.Minute + time.Second)
	if _, err := r.d.Resolve(ctx, claudine); err != nil || r.fake.CallCount("") == calls {
		t.Errorf("after the negative TTL: error %v, and the chain was not asked again", err)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "serving a cached identity") || !strings.Contains(logs, claudine) ||
		!strings.Contains(logs, "connection refused") {
		t.Errorf("serving stale was not logged with the name and cause: %q", logs)
	}

	r.clock.Advance(24 * time.Hour)
	if _, err := r.d.Resolve(ctx, claudine); !errors.Is(err, errConnRefused) {
		t.Errorf("past stale_max: error = %v, want the chain's error", err)
	}

	r.fake.SetDown(false)
	if _, err := r.d.Resolve(ctx, claudine); err != nil {
		t.Errorf("chain back: %v", err)
	}
}

func TestCacheForget(t *testing.T) {
	r := newCacheRig(t)
	ctx := context.Background()
	if _, err := r.d.Resolve(ctx, claudine); err != nil {
		t.Fatal(err)
	}
	r.fake.SetOwner(1, ownerBob)
	r.d.Forget("claudine.acme.137.6022.eth")
	if a, err := r.d.Resolve(ctx, claudine); err != nil || a.Owner != ownerBob.Hex() {
		t.Fatalf("after Forget: %+v, %v", a, err)
	}
}

// TestCacheCopies checks that a caller changing its agent does not change
// the cached one.
func TestCacheCopies(t *testing.T) {
	r := newCacheRig(t)
	ctx := context.Background()
	a, err := r.d.Resolve(ctx, claudine)
	if err != nil {
		t.Fatal(err)
	}
	a.Attributes["role"] = "facilitator"
	a.TokenID.SetInt64(99)
	b, _ := r.d.Resolve(ctx, claudine)
	if b.Attributes["role"] != "Expert" || b.TokenID.Int64() != 1 {
		t.Errorf("cached agent changed through a caller's copy: %+v", b)
	}
}
