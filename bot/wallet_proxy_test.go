package bot

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestWalletMadeUpTokensSpendNoClientBudget: requests with made-up link
// tokens from an address many people share do not lock a genuine link
// out of it; they are answered "gone".
func TestWalletMadeUpTokensSpendNoClientBudget(t *testing.T) {
	r := newWalletRig(t)
	for i := range 3 * walletClientLimit.Burst {
		if a := r.do(t, http.MethodGet, "/wallet/made-up-token-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "", ""); a.status != http.StatusGone {
			t.Fatalf("made-up token %d: %d, want 410", i, a.status)
		}
	}
	if a := r.do(t, http.MethodGet, "/wallet/"+r.issue(t), "", ""); a.status != http.StatusOK {
		t.Errorf("a genuine link after made-up ones: %d, want 200", a.status)
	}
}

// TestWalletClientBehindTrustedProxies: X-Forwarded-For names the client
// only when the peer is a trusted proxy, read from the right past the
// trusted hops.
func TestWalletClientBehindTrustedProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tt := range []struct {
		name, peer, xff string
		trusted         []netip.Prefix
		want            string
	}{
		{"no proxy configured: the peer", "10.1.2.3:5000", "203.0.113.9", nil, "10.1.2.3"},
		{"an untrusted peer's header is ignored", "198.51.100.7:5000", "203.0.113.9", trusted, "198.51.100.7"},
		{"a trusted proxy names the client", "10.1.2.3:5000", "203.0.113.9", trusted, "203.0.113.9"},
		{"a forged left part is skipped", "10.1.2.3:5000", "1.2.3.4, 203.0.113.9", trusted, "203.0.113.9"},
		{"trusted hops are passed", "10.1.2.3:5000", "203.0.113.9, 10.9.9.9", trusted, "203.0.113.9"},
		{"IPv6 proxy", "[fd00::1]:5000", "2001:db8::5", trusted, "2001:db8::5"},
		{"a malformed hop trusts nothing left of it", "10.1.2.3:5000", "203.0.113.9, not-an-ip", trusted, "10.1.2.3"},
		{"no header: the proxy", "10.1.2.3:5000", "", trusted, "10.1.2.3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/wallet/x", nil)
			req.RemoteAddr = tt.peer
			if tt.xff != "" {
				req.Header.Set("X-Forwarded-For", tt.xff)
			}
			if got := clientOf(req, tt.trusted); got != tt.want {
				t.Errorf("clientOf = %q, want %q", got, tt.want)
			}
		})
	}
}
