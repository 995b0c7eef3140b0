package bot

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/conclavehq/conclave/agents/pairing"
	"github.com/conclavehq/conclave/internal/testclock"
)

// keyRecorder is a wallet store that records the keys of the one-time
// values put in it.
type keyRecorder struct {
	pairing.WalletStore
	mu   sync.Mutex
	keys map[string]bool
}

func (k *keyRecorder) PutNonce(ctx context.Context, nonce string, value []byte, ttl time.Duration) error {
	k.mu.Lock()
	k.keys[nonce] = true
	k.mu.Unlock()
	return k.WalletStore.PutNonce(ctx, nonce, value, ttl)
}

// kept counts the distinct keys with prefix ever put.
func (k *keyRecorder) kept(prefix string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for key := range k.keys {
		if strings.HasPrefix(key, prefix) {
			n++
		}
	}
	return n
}

// 1,000 message requests with one link token, each for another address,
// leave one kept message (each new address replaces the last), and past
// the token's burst the answer is 429 with Retry-After.
func TestWalletMessageFlood(t *testing.T) {
	rec := &keyRecorder{keys: map[string]bool{}}
	r := newWalletRigOver(t, func(s pairing.WalletStore) pairing.WalletStore { rec.WalletStore = s; return rec })
	token := r.issue(t)
	statuses := map[int]int{}
	var retryAfter string
	for i := range 1000 {
		addr := common.BigToAddress(big.NewInt(int64(i + 1))).Hex()
		a := r.do(t, http.MethodGet, "/wallet/"+token+"/message?address="+addr, "", "")
		statuses[a.status]++
		if a.status == http.StatusTooManyRequests && retryAfter == "" {
			retryAfter = a.header.Get("Retry-After")
			if a.text("error") != "Too many requests; try again in a minute." {
				t.Errorf("429 body = %v", a.body)
			}
		}
	}
	burst := walletTokenLimit.Burst
	if statuses[http.StatusOK] != burst || statuses[http.StatusTooManyRequests] != 1000-burst {
		t.Errorf("statuses %v, want %d × 200 and %d × 429", statuses, burst, 1000-burst)
	}
	if retryAfter != "6" {
		t.Errorf("Retry-After = %q, want 6", retryAfter)
	}
	if n := rec.kept("wallet-message:"); n != 1 {
		t.Errorf("%d message keys were stored, want 1", n)
	}
	// Time gives the budget back.
	r.clock.Advance(walletTokenLimit.Every)
	if a := r.do(t, http.MethodGet, "/wallet/"+token, "", ""); a.status != http.StatusOK {
		t.Errorf("after %s: %d", walletTokenLimit.Every, a.status)
	}
}

// A new address replaces the text kept for the link: the first address's
// signature no longer verifies, the second's does.
func TestWalletNewAddressReplacesTheMessage(t *testing.T) {
	r := newWalletRig(t)
	first, second := testKey(t, 1), testKey(t, 2)
	token := r.issue(t)
	msg1 := r.message(t, token, keyAddress(first).Hex())
	msg2 := r.message(t, token, keyAddress(second).Hex())
	a := r.post(t, token, keyAddress(first).Hex(), personalSign(t, first, msg1))
	if a.status != http.StatusBadRequest || !strings.Contains(a.text("error"), "No message was prepared for this address") {
		t.Fatalf("the replaced address: %d %v", a.status, a.body)
	}
	if a := r.post(t, token, keyAddress(second).Hex(), personalSign(t, second, msg2)); a.status != http.StatusOK {
		t.Fatalf("the last address: %d %v", a.status, a.body)
	}
}

// One client address has a budget of its own, over every link token.
func TestWalletClientLimit(t *testing.T) {
	r := newWalletRig(t)
	burst := walletClientLimit.Burst
	var tokens []string
	for range burst + 5 {
		tokens = append(tokens, r.issue(t))
	}
	for i, token := range tokens {
		a := r.do(t, http.MethodGet, "/wallet/"+token, "", "")
		want := http.StatusOK
		if i >= burst {
			want = http.StatusTooManyRequests
		}
		if a.status != want {
			t.Fatalf("request %d: %d, want %d", i+1, a.status, want)
		}
	}
	r.clock.Advance(walletClientLimit.Every)
	if a := r.do(t, http.MethodGet, "/wallet/"+tokens[0], "", ""); a.status != http.StatusOK {
		t.Errorf("after %s: %d", walletClientLimit.Every, a.status)
	}
}

func TestLimiter(t *testing.T) {
	clock := testclock.New(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	l := newLimiter(requestLimit{Burst: 2, Every: 10 * time.Second}, clock.Now)
	step := func(key string, wantOK bool, wantWait time.Duration) {
		t.Helper()
		ok, wait := l.allow(key)
		if ok != wantOK || wait != wantWait {
			t.Errorf("allow(%s) = %v, %s; want %v, %s", key, ok, wait, wantOK, wantWait)
		}
	}
	step("a", true, 0)
	step("a", true, 0)
	step("a", false, 10*time.Second)
	step("b", true, 0) // keys are apart
	clock.Advance(4 * time.Second)
	step("a", false, 6*time.Second)
	clock.Advance(6 * time.Second)
	step("a", true, 0)
	step("a", false, 10*time.Second)
	clock.Advance(time.Hour)
	step("a", true, 0) // never more than the burst
	step("a", true, 0)
	step("a", false, 10*time.Second)

	// A limiter full of keys forgets the full buckets, and refuses a new
	// key only when none is.
	full := newLimiter(requestLimit{Burst: 1, Every: time.Minute}, clock.Now)
	for i := range maxBuckets {
		full.allow(fmt.Sprint(i))
	}
	if ok, _ := full.allow("new"); ok {
		t.Error("a new key was allowed with no room left")
	}
	clock.Advance(time.Minute)
	if ok, _ := full.allow("new"); !ok {
		t.Error("a new key was refused once the old buckets were full again")
	}
	if n := len(full.buckets); n != 1 {
		t.Errorf("%d buckets kept, want 1", n)
	}
}
