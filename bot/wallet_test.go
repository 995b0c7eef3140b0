package bot

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/conclavehq/conclave/agents/pairing"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/internal/testclock"
	"github.com/conclavehq/conclave/internal/testlog"
	"github.com/conclavehq/conclave/memory"
)

// testKey is a deterministic private key for signing in tests.
func testKey(t testing.TB, seed byte) *ecdsa.PrivateKey {
	t.Helper()
	k, err := crypto.ToECDSA(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyAddress(k *ecdsa.PrivateKey) common.Address { return crypto.PubkeyToAddress(k.PublicKey) }

// personalSign signs msg as a wallet's personal_sign does (v = 27 or 28).
func personalSign(t testing.TB, k *ecdsa.PrivateKey, msg string) string {
	t.Helper()
	sig, err := crypto.Sign(accounts.TextHash([]byte(msg)), k)
	if err != nil {
		t.Fatal(err)
	}
	sig[crypto.RecoveryIDOffset] += 27
	return hexutil.Encode(sig)
}

// walletRig is a wallet verifier served over HTTP, with a real store and a
// real Bot (Web API only) over the fake Slack for the notices.
type walletRig struct {
	w     *WalletVerifier
	srv   *httptest.Server
	store *memory.InProcess
	fake  *fakeslack.Server
	clock *testclock.Clock
	logs  *testlog.Buffer
}

func newWalletRig(t *testing.T) *walletRig {
	t.Helper()
	return newWalletRigOver(t, nil)
}

// newWalletRigOver is newWalletRig with the verifier's store wrapped by
// wrap (nil: not wrapped).
func newWalletRigOver(t *testing.T, wrap func(pairing.WalletStore) pairing.WalletStore) *walletRig {
	t.Helper()
	r := &walletRig{clock: testclock.New(time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)), logs: &testlog.Buffer{}}
	r.fake = fakeslack.New(t, fakeslack.Options{Users: testUsers, Channels: testChannels})
	r.store = memory.NewInProcess(memory.Options{Now: r.clock.Now})
	log := slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := NewWebAPI(Options{AppToken: fakeslack.AppToken, BotToken: fakeslack.BotToken, APIURL: r.fake.APIURL()}, log)
	var h http.Handler
	r.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) { h.ServeHTTP(rw, req) }))
	t.Cleanup(r.srv.Close)
	var store pairing.WalletStore = r.store
	if wrap != nil {
		store = wrap(r.store)
	}
	w, err := NewWalletVerifier(WalletOptions{PublicURL: r.srv.URL + "/", Logger: log, Now: r.clock.Now}, store, b)
	if err != nil {
		t.Fatal(err)
	}
	r.w, h = w, w
	return r
}

// issue creates a link for U1 asked in C1 and returns its token.
func (r *walletRig) issue(t *testing.T) string {
	t.Helper()
	link, err := r.w.Issue(testContext(t), WalletRequest{UserID: "U1", UserName: "ada", TeamID: "T0001", TeamName: "fake", Channel: "C1"})
	if err != nil {
		t.Fatal(err)
	}
	prefix := r.srv.URL + "/wallet/"
	if !strings.HasPrefix(link, prefix) {
		t.Fatalf("link %q is not under %s", link, prefix)
	}
	return strings.TrimPrefix(link, prefix)
}

type walletAnswer struct {
	status int
	body   map[string]any
	header http.Header
}

func (a walletAnswer) text(key string) string {
	s, _ := a.body[key].(string)
	return s
}

func (r *walletRig) do(t *testing.T, method, path, contentType, body string) walletAnswer {
	t.Helper()
	return walletCall(t, method, r.srv.URL+path, contentType, body)
}

// walletCall makes one request to a wallet page's server and reads the
// answer: JSON into body, anything else as body["html"].
func walletCall(t *testing.T, method, target, contentType, body string) walletAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := walletAnswer{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s %s: %v: %s", method, target, err, raw)
		}
	} else {
		a.body["html"] = string(raw)
	}
	return a
}

// message asks for the text to sign for addr, as the page does.
func (r *walletRig) message(t *testing.T, token, addr string) string {
	t.Helper()
	return fetchMessage(t, r.srv.URL+"/wallet/"+token, addr)
}

func (r *walletRig) post(t *testing.T, token, addr, sig string) walletAnswer {
	t.Helper()
	return postSignature(t, r.srv.URL+"/wallet/"+token, addr, sig)
}

// fetchMessage asks the wallet page at page for the text addr is to sign.
func fetchMessage(t *testing.T, page, addr string) string {
	t.Helper()
	a := walletCall(t, http.MethodGet, page+"/message?address="+url.QueryEscape(addr), "", "")
	if a.status != http.StatusOK {
		t.Fatalf("message for %s: %d %v", addr, a.status, a.body)
	}
	return a.text("message")
}

// postSignature submits a signature to the wallet page at page, as the
// page does.
func postSignature(t *testing.T, page, addr, sig string) walletAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"address": addr, "signature": sig})
	return walletCall(t, http.MethodPost, page, "application/json", string(body))
}

func (r *walletRig) wallets(t *testing.T, user string) []string {
	t.Helper()
	ws, err := r.store.Wallets(testContext(t), user)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestWalletLinkFlow(t *testing.T) {
	r := newWalletRig(t)
	key := testKey(t, 1)
	addr := keyAddress(key)
	token := r.issue(t)

	// Viewing the page, as often as link previews and prefetchers like,
	// spends nothing.
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodGet} {
		a := r.do(t, method, "/wallet/"+token, "", "")
		if a.status != http.StatusOK {
			t.Fatalf("%s page: %d", method, a.status)
		}
	}
	msg := r.message(t, token, strings.ToLower(addr.Hex()))
	if again := r.message(t, token, addr.Hex()); again != msg {
		t.Errorf("the message changed between two requests:\n%s\n---\n%s", msg, again)
	}

	host := strings.TrimPrefix(r.srv.URL, "http://")
	want := host + " wants you to sign in with your Ethereum account:\n" +
		addr.Hex() + "\n\n" +
		"Link this Ethereum account to the Slack user ada (U1) in the workspace fake (T0001) on conclave.\n\n" +
		"URI: " + r.srv.URL + "/wallet/" + token + "\n" +
		"Version: 1\n" +
		"Chain ID: 1\n" +
		"Nonce: " + token + "\n" +
		"Issued At: 2025-03-14T09:26:53Z\n" +
		"Expiration Time: 2025-03-14T09:36:53Z"
	if msg != want {
		t.Errorf("message:\n%s\nwant:\n%s", msg, want)
	}

	a := r.post(t, token, strings.ToLower(addr.Hex()), personalSign(t, key, msg))
	if a.status != http.StatusOK || a.body["ok"] != true || a.text("address") != addr.Hex() {
		t.Fatalf("verify: %d %v", a.status, a.body)
	}
	if got := r.wallets(t, "U1"); len(got) != 1 || got[0] != addr.Hex() {
		t.Errorf("wallets of U1 = %v, want [%s]", got, addr.Hex())
	}
	eph := r.fake.Ephemerals()
	if len(eph) != 1 || eph[0].Channel != "C1" || eph[0].User != "U1" || !strings.Contains(eph[0].Text, addr.Hex()) {
		t.Errorf("Slack notices = %+v, want one to U1 in C1 naming the address", eph)
	}
	if logs := r.logs.String(); !strings.Contains(logs, `"action":"wallet_linked"`) || !strings.Contains(logs, addr.Hex()) {
		t.Errorf("no audit record of the link:\n%s", logs)
	}
	// A second address, through a second link: a user may link several.
	key2 := testKey(t, 2)
	token2 := r.issue(t)
	msg2 := r.message(t, token2, keyAddress(key2).Hex())
	if a := r.post(t, token2, keyAddress(key2).Hex(), personalSign(t, key2, msg2)); a.status != http.StatusOK {
		t.Fatalf("second link: %d %v", a.status, a.body)
	}
	if got := r.wallets(t, "U1"); len(got) != 2 {
		t.Errorf("wallets of U1 = %v, want both", got)
	}
}

func TestWalletRefusals(t *testing.T) {
	key, other := testKey(t, 1), testKey(t, 2)
	addr := keyAddress(key).Hex()
	tests := []struct {
		name   string
		run    func(t *testing.T, r *walletRig, token string) walletAnswer
		status int
		reason string
	}{
		{"forged: signed by another key", func(t *testing.T, r *walletRig, token string) walletAnswer {
			return r.post(t, token, addr, personalSign(t, other, r.message(t, token, addr)))
		}, http.StatusForbidden, "not made by that address"},
		{"wrong address claimed for a valid signature", func(t *testing.T, r *walletRig, token string) walletAnswer {
			r.message(t, token, addr)
			otherAddr := keyAddress(other).Hex()
			return r.post(t, token, otherAddr, personalSign(t, key, r.message(t, token, otherAddr)))
		}, http.StatusForbidden, "not made by that address"},
		{"signature of another text", func(t *testing.T, r *walletRig, token string) walletAnswer {
			msg := r.message(t, token, addr)
			return r.post(t, token, addr, personalSign(t, key, strings.Replace(msg, "ada", "eve", 1)))
		}, http.StatusForbidden, "not made by that address"},
		{"replayed", func(t *testing.T, r *walletRig, token string) walletAnswer {
			sig := personalSign(t, key, r.message(t, token, addr))
			if a := r.post(t, token, addr, sig); a.status != http.StatusOK {
				t.Fatalf("first post: %d %v", a.status, a.body)
			}
			return r.post(t, token, addr, sig)
		}, http.StatusGone, "already been used"},
		{"expired link", func(t *testing.T, r *walletRig, token string) walletAnswer {
			sig := personalSign(t, key, r.message(t, token, addr))
			r.clock.Advance(10*time.Minute + time.Second)
			return r.post(t, token, addr, sig)
		}, http.StatusGone, "expired"},
		{"unknown token", func(t *testing.T, r *walletRig, token string) walletAnswer {
			return r.post(t, strings.Repeat("ab", 16), addr, "0x00")
		}, http.StatusGone, "expired"},
		{"malformed token", func(t *testing.T, r *walletRig, token string) walletAnswer {
			return r.post(t, "NOT-A-TOKEN", addr, "0x00")
		}, http.StatusGone, "expired"},
		{"message never asked for", func(t *testing.T, r *walletRig, token string) walletAnswer {
			return r.post(t, token, addr, strings.Repeat("0", 130))
		}, http.StatusBadRequest, "reload the page"},
		{"not a signature", func(t *testing.T, r *walletRig, token string) walletAnswer {
			r.message(t, token, addr)
			return r.post(t, token, addr, "0x1234")
		}, http.StatusBadRequest, "not a valid Ethereum signature"},
		{"bad recovery id", func(t *testing.T, r *walletRig, token string) walletAnswer {
			sig, _ := hexutil.Decode(personalSign(t, key, r.message(t, token, addr)))
			sig[64] = 29
			return r.post(t, token, addr, hexutil.Encode(sig))
		}, http.StatusBadRequest, "not a valid Ethereum signature"},
		{"malleated signature (high s)", func(t *testing.T, r *walletRig, token string) walletAnswer {
			sig, _ := hexutil.Decode(personalSign(t, key, r.message(t, token, addr)))
			s := new(big.Int).SetBytes(sig[32:64])
			s.Sub(crypto.S256().Params().N, s)
			s.FillBytes(sig[32:64])
			sig[64] ^= 1 // 27 <-> 28
			return r.post(t, token, addr, hexutil.Encode(sig))
		}, http.StatusBadRequest, "not a valid Ethereum signature"},
		{"not an address", func(t *testing.T, r *walletRig, token string) walletAnswer {
			return r.post(t, token, "0x123", "0x00")
		}, http.StatusBadRequest, "not an Ethereum address"},
		{"bad checksum", func(t *testing.T, r *walletRig, token string) walletAnswer {
			return r.do(t, http.MethodGet, "/wallet/"+token+"/message?address="+flipCase(addr), "", "")
		}, http.StatusBadRequest, "not an Ethereum address"},
		{"not JSON", func(t *testing.T, r *walletRig, token string) walletAnswer {
			return r.do(t, http.MethodPost, "/wallet/"+token, "application/json", "{address")
		}, http.StatusBadRequest, "not the JSON"},
		{"a form post (cross-site)", func(t *testing.T, r *walletRig, token string) walletAnswer {
			return r.do(t, http.MethodPost, "/wallet/"+token, "application/x-www-form-urlencoded", "address="+addr)
		}, http.StatusUnsupportedMediaType, "Send JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWalletRig(t)
			token := r.issue(t)
			before := len(r.fake.Ephemerals())
			a := tt.run(t, r, token)
			if a.status != tt.status || !strings.Contains(a.text("error"), tt.reason) {
				t.Errorf("answer %d %v, want %d with %q", a.status, a.body, tt.status, tt.reason)
			}
			if tt.name == "replayed" {
				if got := r.wallets(t, "U1"); len(got) != 1 {
					t.Errorf("wallets = %v after a replay, want the one first linked", got)
				}
				if n := len(r.fake.Ephemerals()) - before; n != 1 {
					t.Errorf("%d Slack notices, want the first one only", n)
				}
				return
			}
			if got := r.wallets(t, "U1"); len(got) != 0 {
				t.Errorf("wallets = %v, want none linked", got)
			}
			if n := len(r.fake.Ephemerals()) - before; n != 0 {
				t.Errorf("%d Slack notices after a refusal", n)
			}
		})
	}
}

// flipCase swaps the case of the letters of a checksummed address, which
// breaks its checksum.
func flipCase(addr string) string {
	b := []byte(addr)
	for i := 2; i < len(b); i++ {
		switch c := b[i]; {
		case 'a' <= c && c <= 'f':
			b[i] = c - 'a' + 'A'
		case 'A' <= c && c <= 'F':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// A refused attempt leaves the link usable: a person who signed with the
// wrong account can try again with the right one.
func TestWalletRefusalKeepsTheLink(t *testing.T) {
	r := newWalletRig(t)
	key, other := testKey(t, 1), testKey(t, 2)
	addr := keyAddress(key).Hex()
	token := r.issue(t)
	msg := r.message(t, token, addr)
	if a := r.post(t, token, addr, personalSign(t, other, msg)); a.status != http.StatusForbidden {
		t.Fatalf("forged: %d %v", a.status, a.body)
	}
	// v = 0/1 (some signers) is accepted as well as 27/28.
	sig, _ := hexutil.Decode(personalSign(t, key, msg))
	sig[64] -= 27
	if a := r.post(t, token, addr, hexutil.Encode(sig)); a.status != http.StatusOK {
		t.Fatalf("then the right key: %d %v", a.status, a.body)
	}
	if got := r.wallets(t, "U1"); len(got) != 1 || got[0] != addr {
		t.Errorf("wallets = %v", got)
	}
}

func TestWalletPage(t *testing.T) {
	r := newWalletRig(t)
	token := r.issue(t)
	a := r.do(t, http.MethodGet, "/wallet/"+token, "", "")
	page := a.text("html")
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("page: %d %s", a.status, a.header.Get("Content-Type"))
	}
	t.Run("names the user and the workspace", func(t *testing.T) {
		for _, want := range []string{"ada (U1)", "fake", "Connect wallet and sign", `data-state="ready"`} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
	})
	t.Run("self-contained under a strict policy", func(t *testing.T) {
		csp := a.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src " + cspHash(walletPageJS), "style-src " + cspHash(walletPageCSS), "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("CSP allows unsafe sources: %q", csp)
		}
		if !strings.Contains(page, "<script>"+walletPageJS+"</script>") || !strings.Contains(page, "<style>"+walletPageCSS+"</style>") {
			t.Error("the inline script or style is not exactly the hashed asset")
		}
		for _, bad := range []string{"src=", "http://", "https://", "@import"} {
			if strings.Contains(page, bad) {
				t.Errorf("page loads something from elsewhere: it contains %q", bad)
			}
		}
	})
	t.Run("private and unframed", func(t *testing.T) {
		for k, v := range map[string]string{
			"Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
			"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		} {
			if got := a.header.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
	})
	t.Run("escapes what Slack sent", func(t *testing.T) {
		link, err := r.w.Issue(testContext(t), WalletRequest{UserID: "U1", UserName: `<img src=x onerror=alert(1)>`, TeamID: "T1", Channel: "C1"})
		if err != nil {
			t.Fatal(err)
		}
		a := r.do(t, http.MethodGet, strings.TrimPrefix(link, r.srv.URL), "", "")
		if strings.Contains(a.text("html"), "<img") {
			t.Error("a user name was written into the page unescaped")
		}
	})
	t.Run("a used or unknown link says so", func(t *testing.T) {
		a := r.do(t, http.MethodGet, "/wallet/"+strings.Repeat("0", 32), "", "")
		if a.status != http.StatusGone || !strings.Contains(a.text("html"), "expired or has already been used") ||
			strings.Contains(a.text("html"), "<script>") {
			t.Errorf("unknown link: %d\n%s", a.status, a.text("html"))
		}
	})
	t.Run("other paths are not found", func(t *testing.T) {
		for _, p := range []string{"/wallet/", "/wallet/" + token + "/other", "/elsewhere"} {
			if a := r.do(t, http.MethodGet, p, "", ""); a.status != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", p, a.status)
			}
		}
	})
}

func TestWalletNotConfigured(t *testing.T) {
	w, err := NewWalletVerifier(WalletOptions{}, memory.NewInProcess(memory.Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Issue(testContext(t), WalletRequest{UserID: "U1"}); !errors.Is(err, ErrWalletNotConfigured) {
		t.Errorf("Issue = %v, want ErrWalletNotConfigured", err)
	}
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/wallet/"+strings.Repeat("0", 32), nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("page = %d, want 404", rec.Code)
	}
	for _, bad := range []string{"ftp://x", "/relative", "https://"} {
		if _, err := NewWalletVerifier(WalletOptions{PublicURL: bad}, nil, nil); err == nil {
			t.Errorf("public URL %q accepted", bad)
		}
	}
}

func TestStatementKeepsToEIP4361(t *testing.T) {
	tests := []struct {
		name string
		link pairing.WalletLink
		want string
	}{
		{"names", pairing.WalletLink{UserID: "U1", UserName: "ada.l", TeamID: "T1", TeamName: "acme"},
			"Link this Ethereum account to the Slack user ada.l (U1) in the workspace acme (T1) on conclave."},
		{"no names", pairing.WalletLink{UserID: "U1", TeamID: "T1"},
			"Link this Ethereum account to the Slack user U1 in the workspace T1 on conclave."},
		{"line breaks and quotes dropped", pairing.WalletLink{UserID: "U1", UserName: "ada\nNonce: 1\"é", TeamID: "T1", TeamName: "T1"},
			"Link this Ethereum account to the Slack user adaNonce: 1 (U1) in the workspace T1 on conclave."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statement(tt.link); got != tt.want {
				t.Errorf("statement = %q, want %q", got, tt.want)
			}
		})
	}
}
