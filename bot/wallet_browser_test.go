package bot

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write ../docs/wallet-page.png from the browser test")

// TestWalletPageInChromium loads the wallet page in a real headless
// Chromium (driven by chromedp), with an injected EIP-1193 wallet whose personal_sign is
// answered by this test with a go-ethereum key: the page must connect,
// sign the server's message, submit it, and show the success, under its
// Content-Security-Policy.
func TestWalletPageInChromium(t *testing.T) {
	browser := startChromium(t)
	r := newWalletRig(t)
	key := testKey(t, 3)
	addr := keyAddress(key)

	t.Run("connect, sign, linked", func(t *testing.T) {
		token := r.issue(t)
		tab := browser.newTab(t, injectedWallet(strings.ToLower(addr.Hex())))
		var mu sync.Mutex
		var signed []string
		tab.onSign = func(req signRequest) (string, error) {
			msg, err := hexutil.Decode(req.Message)
			if err != nil {
				return "", err
			}
			mu.Lock()
			defer mu.Unlock()
			signed = append(signed, string(msg))
			return personalSign(t, key, string(msg)), nil
		}
		tab.open(t, r.srv.URL+"/wallet/"+token)
		if state := tab.eval(t, `document.body.dataset.state`); state != "ready" {
			t.Fatalf("page state %q before the click, want ready", state)
		}
		if violations := tab.eval(t, `String(window.__cspViolations)`); violations != "0" {
			t.Fatalf("%s Content-Security-Policy violations on load: the page's own script or style was blocked", violations)
		}
		tab.eval(t, `document.getElementById("connect").click()`)
		state := tab.settled(t)
		status := tab.eval(t, `document.getElementById("status").textContent`)
		if state != "linked" || !strings.Contains(status, addr.Hex()) {
			t.Fatalf("page ended %q: %q", state, status)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(signed) != 1 || !strings.Contains(signed[0], "Nonce: "+token) || !strings.Contains(signed[0], addr.Hex()) {
			t.Errorf("the wallet was asked to sign %q", signed)
		}
		if shown := tab.eval(t, `document.getElementById("message-text").textContent`); len(signed) == 1 && shown != signed[0] {
			t.Errorf("the page shows\n%s\nbut the wallet signed\n%s", shown, signed[0])
		}
		if got := r.wallets(t, "U1"); len(got) != 1 || got[0] != addr.Hex() {
			t.Errorf("wallets of U1 = %v, want [%s]", got, addr.Hex())
		}
		eph := r.fake.Ephemerals()
		if len(eph) != 1 || eph[0].User != "U1" || eph[0].Channel != "C1" || !strings.Contains(eph[0].Text, addr.Hex()) {
			t.Errorf("Slack notices = %+v", eph)
		}
		if violations := tab.eval(t, `String(window.__cspViolations)`); violations != "0" {
			t.Errorf("%s Content-Security-Policy violations", violations)
		}
		png := tab.screenshot(t)
		if len(png) < 1000 || string(png[1:4]) != "PNG" {
			t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
		}
		if *updateScreenshot {
			if err := os.WriteFile(filepath.Join("..", "docs", "wallet-page.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("the wallet declines", func(t *testing.T) {
		token := r.issue(t)
		tab := browser.newTab(t, injectedWallet(addr.Hex()))
		tab.onSign = func(signRequest) (string, error) { return "", errors.New("User rejected the request.") }
		tab.open(t, r.srv.URL+"/wallet/"+token)
		tab.eval(t, `document.getElementById("connect").click()`)
		state := tab.settled(t)
		status := tab.eval(t, `document.getElementById("status").textContent`)
		if state != "failed" || !strings.Contains(status, "declined") {
			t.Errorf("page ended %q: %q", state, status)
		}
		if disabled := tab.eval(t, `String(document.getElementById("connect").disabled)`); disabled != "false" {
			t.Error("the button stays disabled after a refusal: no way to try again")
		}
	})

	t.Run("no wallet in the browser", func(t *testing.T) {
		token := r.issue(t)
		tab := browser.newTab(t, "")
		tab.open(t, r.srv.URL+"/wallet/"+token)
		tab.eval(t, `document.getElementById("connect").click()`)
		if status := tab.eval(t, `document.getElementById("status").textContent`); !strings.Contains(status, "No browser wallet found") {
			t.Errorf("status = %q", status)
		}
	})
}

// injectedWallet is an EIP-1193 provider for address whose personal_sign
// calls the test through the conclaveTestSign binding. It also counts CSP
// violations. Empty address: only the counter.
func injectedWallet(address string) string {
	counter := `window.__cspViolations = 0;
document.addEventListener("securitypolicyviolation", () => { window.__cspViolations++; });`
	if address == "" {
		return counter
	}
	return counter + fmt.Sprintf(`
(() => {
	const pending = new Map();
	let seq = 0;
	window.__conclaveSigned = (id, signature, error) => {
		const p = pending.get(id);
		pending.delete(id);
		if (!p) { return; }
		if (error) { p.reject(Object.assign(new Error(error), { code: 4001 })); } else { p.resolve(signature); }
	};
	window.ethereum = {
		request({ method, params }) {
			switch (method) {
			case "eth_requestAccounts":
			case "eth_accounts":
				return Promise.resolve([%q]);
			case "personal_sign":
				return new Promise((resolve, reject) => {
					const id = ++seq;
					pending.set(id, { resolve, reject });
					conclaveTestSign(JSON.stringify({ id, message: params[0], address: params[1] }));
				});
			default:
				return Promise.reject(Object.assign(new Error("unsupported " + method), { code: 4200 }));
			}
		},
	};
})();`, address)
}

// chromium is a headless Chromium driven by chromedp.
type chromium struct {
	ctx context.Context // the browser's first tab; new tabs derive from it
}

// startChromium starts a headless Chromium for the test, or skips the test
// when there is none (unless CONCLAVE_REQUIRE_CHROMIUM=1).
func startChromium(t *testing.T) *chromium {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CONCLAVE_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("chromium is not installed and CONCLAVE_REQUIRE_CHROMIUM=1 (apt-get install -y chromium)")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium); set CONCLAVE_REQUIRE_CHROMIUM=1 to make this a failure")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel() // closes the browser and waits for it
		cancelAlloc()
	})
	// The first run starts the browser, which lives as long as ctx: it
	// takes no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return &chromium{ctx: ctx}
}

// signRequest is what the injected wallet's personal_sign passes on.
type signRequest struct {
	ID      int    `json:"id"`
	Message string `json:"message"` // hex-encoded UTF-8
	Address string `json:"address"`
}

// tab is one page of the browser.
type tab struct {
	ctx    context.Context
	onSign func(signRequest) (string, error)
}

// call sends one DevTools command to the tab's target.
func call[P, R any](c cdp.Command[P, R], params P) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, c, params)
		return err
	})
}

// newTab opens a blank page whose every document first runs script, and
// binds conclaveTestSign to the tab's onSign.
func (b *chromium) newTab(t *testing.T, script string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	tb := &tab{ctx: ctx}
	var answers sync.WaitGroup
	t.Cleanup(func() {
		cancel() // ends the events below
		answers.Wait()
	})
	// The first run opens the tab, which lives as long as the context of
	// that run: it takes no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("new tab: %v", err)
	}
	tb.run(t,
		call(cdpruntime.Enable, cdp.Empty{}),
		call(cdpruntime.AddBinding, cdpruntime.AddBindingParams{Name: "conclaveTestSign"}),
		call(page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script}),
		chromedp.EmulateViewport(760, 860),
	)
	calls := chromedp.Events(ctx, cdpruntime.BindingCalled)
	answers.Go(func() {
		for ev, err := range calls {
			if err != nil {
				return
			}
			if ev.Name == "conclaveTestSign" {
				tb.answer(ev)
			}
		}
	})
	return tb
}

// answer gives the page the signer's answer to one personal_sign.
func (tb *tab) answer(e cdpruntime.EventBindingCalled) {
	var req signRequest
	if json.Unmarshal([]byte(e.Payload), &req) != nil {
		return
	}
	sig, errText := "", ""
	if tb.onSign == nil {
		errText = "no signer"
	} else if s, err := tb.onSign(req); err != nil {
		errText = err.Error()
	} else {
		sig = s
	}
	expr := fmt.Sprintf("window.__conclaveSigned(%d, %q, %q)", req.ID, sig, errText)
	_ = chromedp.Do(tb.ctx, call(cdpruntime.Evaluate, cdpruntime.EvaluateParams{Expression: expr, ContextID: e.ExecutionContextID}))
}

// run runs actions on the tab, bounded in time; an error fails the test.
func (tb *tab) run(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// open navigates to url and waits for the page to load.
func (tb *tab) open(t *testing.T, url string) {
	t.Helper()
	tb.run(t, chromedp.Navigate(url))
}

// eval evaluates a JavaScript expression and returns its value as text.
func (tb *tab) eval(t *testing.T, expr string) string {
	t.Helper()
	return tb.evaluate(t, expr)
}

// await evaluates an expression giving a promise and returns what it
// resolves to, as text.
func (tb *tab) await(t *testing.T, expr string) string {
	t.Helper()
	return tb.evaluate(t, expr, chromedp.EvalAwaitPromise)
}

func (tb *tab) evaluate(t *testing.T, expr string, opts ...chromedp.EvaluateOption) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	res, err := chromedp.Run(ctx, chromedp.Evaluate[*cdpruntime.RemoteObject](expr, append(opts, chromedp.EvalAsValue)...))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	var s string
	if json.Unmarshal(res.Value, &s) == nil {
		return s
	}
	return string(res.Value)
}

// settled waits until the page has linked the wallet or failed, and
// returns which.
func (tb *tab) settled(t *testing.T) string {
	t.Helper()
	return tb.await(t, `new Promise(resolve => {
		const check = () => {
			const s = document.body.dataset.state;
			if (s === "linked" || s === "failed") { resolve(s); } else { setTimeout(check, 20); }
		};
		check();
	})`)
}

func (tb *tab) screenshot(t *testing.T) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	return png
}
