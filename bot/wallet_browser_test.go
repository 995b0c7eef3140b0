package bot

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/gorilla/websocket"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write ../docs/wallet-page.png from the browser test")

// TestWalletPageInChromium loads the wallet page in a real headless
// Chromium, with an injected EIP-1193 wallet whose personal_sign is
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

// chromium is a headless Chromium driven over the DevTools protocol.
type chromium struct {
	cdp *cdpConn
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
	dir := t.TempDir()
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--remote-debugging-port=0", "--user-data-dir="+dir, "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// The browser's helpers share its process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wsURL, err := devToolsURL(ctx, filepath.Join(dir, "DevToolsActivePort"), exited)
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, &stderr)
	}
	conn, err := dialCDP(ctx, wsURL)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	t.Cleanup(conn.close)
	return &chromium{cdp: conn}
}

// devToolsURL waits for Chromium to write the port it listens on.
func devToolsURL(ctx context.Context, file string, exited <-chan struct{}) (string, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if f, err := os.Open(file); err == nil {
			sc := bufio.NewScanner(f)
			var lines []string
			for sc.Scan() {
				lines = append(lines, strings.TrimSpace(sc.Text()))
			}
			f.Close()
			if len(lines) >= 2 && lines[0] != "" && lines[1] != "" {
				return "ws://127.0.0.1:" + lines[0] + lines[1], nil
			}
		}
		select {
		case <-exited:
			return "", errors.New("exited before listening")
		case <-ctx.Done():
			return "", fmt.Errorf("no DevToolsActivePort: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// signRequest is what the injected wallet's personal_sign passes on.
type signRequest struct {
	ID      int    `json:"id"`
	Message string `json:"message"` // hex-encoded UTF-8
	Address string `json:"address"`
}

// tab is one page target, attached with its own session.
type tab struct {
	browser *chromium
	session string
	onSign  func(signRequest) (string, error)
}

// newTab opens a blank page whose every document first runs script, and
// binds conclaveTestSign to the tab's onSign.
func (b *chromium) newTab(t *testing.T, script string) *tab {
	t.Helper()
	ctx := testContext(t)
	var target struct {
		TargetID string `json:"targetId"`
	}
	b.cdp.mustCall(t, ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	b.cdp.mustCall(t, ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	tb := &tab{browser: b, session: attached.SessionID}
	t.Cleanup(func() {
		_ = b.cdp.call(context.Background(), "", "Target.closeTarget", map[string]any{"targetId": target.TargetID}, nil)
	})
	b.cdp.subscribe(tb.session, "Runtime.bindingCalled", func(params json.RawMessage) {
		var ev struct {
			Name      string `json:"name"`
			Payload   string `json:"payload"`
			ContextID int    `json:"executionContextId"`
		}
		var req signRequest
		if json.Unmarshal(params, &ev) != nil || ev.Name != "conclaveTestSign" || json.Unmarshal([]byte(ev.Payload), &req) != nil {
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
		_ = b.cdp.call(context.Background(), tb.session, "Runtime.evaluate", map[string]any{"expression": expr, "contextId": ev.ContextID}, nil)
	})
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"Page.enable", nil},
		{"Runtime.enable", nil},
		{"Runtime.addBinding", map[string]any{"name": "conclaveTestSign"}},
		{"Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": script}},
		{"Emulation.setDeviceMetricsOverride", map[string]any{"width": 760, "height": 860, "deviceScaleFactor": 1, "mobile": false}},
	} {
		b.cdp.mustCall(t, ctx, tb.session, c.method, c.params, nil)
	}
	return tb
}

// open navigates to url and waits for the load event.
func (tb *tab) open(t *testing.T, url string) {
	t.Helper()
	loaded := make(chan struct{}, 1)
	tb.browser.cdp.subscribe(tb.session, "Page.loadEventFired", func(json.RawMessage) {
		select {
		case loaded <- struct{}{}:
		default:
		}
	})
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	ctx := testContext(t)
	tb.browser.cdp.mustCall(t, ctx, tb.session, "Page.navigate", map[string]any{"url": url}, &nav)
	if nav.ErrorText != "" {
		t.Fatalf("navigate to %s: %s", url, nav.ErrorText)
	}
	select {
	case <-loaded:
	case <-ctx.Done():
		t.Fatalf("%s did not load", url)
	}
}

// eval evaluates a JavaScript expression and returns its value as text.
func (tb *tab) eval(t *testing.T, expr string) string {
	t.Helper()
	return tb.evaluate(t, expr, false)
}

// await evaluates an expression giving a promise and returns what it
// resolves to, as text.
func (tb *tab) await(t *testing.T, expr string) string {
	t.Helper()
	return tb.evaluate(t, expr, true)
}

func (tb *tab) evaluate(t *testing.T, expr string, await bool) string {
	t.Helper()
	var res struct {
		Result struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	tb.browser.cdp.mustCall(t, testContext(t), tb.session, "Runtime.evaluate",
		map[string]any{"expression": expr, "awaitPromise": await, "returnByValue": true}, &res)
	if res.Exception != nil {
		t.Fatalf("%s: %s", expr, res.Exception.Text)
	}
	var s string
	if json.Unmarshal(res.Result.Value, &s) == nil {
		return s
	}
	return string(res.Result.Value)
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
	var shot struct {
		Data string `json:"data"`
	}
	tb.browser.cdp.mustCall(t, testContext(t), tb.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		t.Fatal(err)
	}
	return png
}

// cdpConn is a Chrome DevTools Protocol connection to the browser target,
// carrying the flattened sessions of its pages.
type cdpConn struct {
	ws *websocket.Conn

	writeMu sync.Mutex
	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan cdpMessage
	subs    map[string]func(json.RawMessage) // session + " " + method
	events  chan cdpMessage
	wg      sync.WaitGroup
	closed  chan struct{}
}

type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func dialCDP(ctx context.Context, url string) (*cdpConn, error) {
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("devtools: %w", err)
	}
	c := &cdpConn{
		ws: ws, pending: map[int64]chan cdpMessage{}, subs: map[string]func(json.RawMessage){},
		events: make(chan cdpMessage, 256), closed: make(chan struct{}),
	}
	c.wg.Go(c.readLoop)
	// Events are handled apart from the reads, so a handler may call.
	c.wg.Go(c.eventLoop)
	return c, nil
}

func (c *cdpConn) readLoop() {
	defer close(c.events)
	for {
		var m cdpMessage
		if err := c.ws.ReadJSON(&m); err != nil {
			c.mu.Lock()
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		if m.ID != 0 {
			c.mu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		select {
		case c.events <- m:
		case <-c.closed:
			return
		}
	}
}

func (c *cdpConn) eventLoop() {
	for m := range c.events {
		c.mu.Lock()
		fn := c.subs[m.SessionID+" "+m.Method]
		c.mu.Unlock()
		if fn != nil {
			fn(m.Params)
		}
	}
}

func (c *cdpConn) subscribe(session, method string, fn func(json.RawMessage)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs[session+" "+method] = fn
}

// call sends one command and decodes its result into out (when not nil).
func (c *cdpConn) call(ctx context.Context, session, method string, params, out any) error {
	ch := make(chan cdpMessage, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	err = c.ws.WriteJSON(cdpMessage{ID: id, SessionID: session, Method: method, Params: raw})
	c.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		switch {
		case !ok:
			return fmt.Errorf("%s: connection closed", method)
		case m.Error != nil:
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		case out != nil:
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (c *cdpConn) mustCall(t *testing.T, ctx context.Context, session, method string, params, out any) {
	t.Helper()
	if err := c.call(ctx, session, method, params, out); err != nil {
		t.Fatal(err)
	}
}

func (c *cdpConn) close() {
	close(c.closed)
	c.ws.Close()
	c.wg.Wait()
}
