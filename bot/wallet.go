package bot

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/conclavehq/conclave/agents/pairing"
)

// Notifier shows a short message to one Slack user in a channel (WebAPI's
// PostEphemeral).
type Notifier interface {
	PostEphemeral(ctx context.Context, channel, user, text string) error
}

// ErrWalletNotConfigured is returned by WalletVerifier.Issue when
// http.public_url is not set: there is no page to send anyone to.
var ErrWalletNotConfigured = errors.New("wallet verification is not configured")

const (
	// walletRequestTimeout bounds the store and Slack calls of one request
	// to the wallet page.
	walletRequestTimeout = 10 * time.Second
)

// The wallet page's rate limits (SPEC §13.4), over all its routes: per
// link token, enough for a person who reloads and switches accounts a few
// times; per client address, enough for a few people behind one address.
// Past either, the answer is 429 with Retry-After.
var (
	walletTokenLimit  = requestLimit{Burst: 10, Every: 6 * time.Second}
	walletClientLimit = requestLimit{Burst: 30, Every: 2 * time.Second}
)

// siweChainID is the EIP-155 chain id written in the sign-in message. A
// personal_sign signature proves control of the key whatever the chain; 1
// is what wallets expect of a plain sign-in.
const siweChainID = 1

// WalletOptions configure a WalletVerifier.
type WalletOptions struct {
	// PublicURL is where people reach conclave's HTTP server
	// (http.public_url); empty turns verification off.
	PublicURL string
	Logger    *slog.Logger
	Now       func() time.Time // default time.Now
	// TrustedProxies are the networks of the proxies in front of conclave
	// (http.trusted_proxies): only a request from one of them has its
	// X-Forwarded-For read for the client's address.
	TrustedProxies []netip.Prefix
}

// WalletRequest is who asked for a verification link, and where.
type WalletRequest struct {
	UserID   string
	UserName string // Slack handle, as the command carries it
	TeamID   string
	TeamName string // workspace domain or name
	Channel  string // where the confirmation is shown
}

// WalletVerifier proves that a Slack user controls an Ethereum address: it
// issues one-time links (Issue) to a page it serves (ServeHTTP, under
// /wallet/), where a browser wallet signs an EIP-4361 message written by
// conclave; a valid EIP-191 signature links the address to the user.
//
// The rules (a link works once, for pairing.WalletLinkTTL; viewing the page
// changes nothing; the signature is checked against conclave's own copy of
// the text) are pairing.Wallets'; the verifier serves the page and renders
// their outcomes.
type WalletVerifier struct {
	opts   WalletOptions
	base   *url.URL // nil when not configured
	links  *pairing.Wallets
	notify Notifier
	log    *slog.Logger
	mux    *http.ServeMux
	page   *template.Template
	csp    string

	perToken, perClient *limiter
}

// Embedded page assets: inline in the page, allowed by their hashes.
var (
	//go:embed wallet_page.html
	walletPageHTML string
	//go:embed wallet_page.js
	walletPageJS string
	//go:embed wallet_page.css
	walletPageCSS string
)

// NewWalletVerifier builds a verifier. A PublicURL that is not an absolute
// http(s) URL is an error; an empty one gives a verifier whose Issue
// returns ErrWalletNotConfigured and whose pages are not found.
func NewWalletVerifier(opts WalletOptions, store pairing.WalletStore, notify Notifier) (*WalletVerifier, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger.With(slog.String("component", "wallet"))
	w := &WalletVerifier{
		opts:   opts,
		links:  pairing.NewWallets(store, log, opts.Now),
		notify: notify,
		log:    log,
		mux:    http.NewServeMux(),
		page:   template.Must(template.New("wallet").Parse(walletPageHTML)),
		csp: strings.Join([]string{
			"default-src 'none'",
			"script-src " + cspHash(walletPageJS),
			"style-src " + cspHash(walletPageCSS),
			"connect-src 'self'",
			"img-src data:",
			"base-uri 'none'",
			"form-action 'none'",
			"frame-ancestors 'none'",
		}, "; "),
	}
	// Both limiters count every request, the refused ones too.
	w.perToken, w.perClient = newLimiter(walletTokenLimit, opts.Now), newLimiter(walletClientLimit, opts.Now)
	if opts.PublicURL != "" {
		u, err := url.Parse(strings.TrimRight(opts.PublicURL, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("bot: wallet: public URL %q is not an absolute http(s) URL", opts.PublicURL)
		}
		u.RawQuery, u.Fragment = "", ""
		w.base = u
	}
	w.mux.HandleFunc("GET /wallet/{token}", w.servePage)
	w.mux.HandleFunc("GET /wallet/{token}/message", w.serveMessage)
	w.mux.HandleFunc("POST /wallet/{token}", w.serveVerify)
	return w, nil
}

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Configured reports whether links can be issued.
func (w *WalletVerifier) Configured() bool { return w.base != nil }

// Issue creates a one-time link for req and returns its URL.
// ErrWalletNotConfigured when there is no public URL.
func (w *WalletVerifier) Issue(ctx context.Context, req WalletRequest) (string, error) {
	if w.base == nil {
		return "", ErrWalletNotConfigured
	}
	token, _, err := w.links.Issue(ctx, pairing.WalletLink{
		UserID: req.UserID, UserName: req.UserName, TeamID: req.TeamID, TeamName: req.TeamName, Channel: req.Channel,
	})
	if err != nil {
		return "", fmt.Errorf("bot: %w", err)
	}
	return w.pageURL(token), nil
}

func (w *WalletVerifier) pageURL(token string) string {
	return w.base.String() + "/wallet/" + token
}

// ServeHTTP serves the wallet page and its two calls under /wallet/:
//
//	GET  /wallet/{token}                  the page (no side effect)
//	GET  /wallet/{token}/message?address= the text to sign for that address
//	POST /wallet/{token}                  {"address", "signature"}: verify and link
func (w *WalletVerifier) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	h := rw.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Robots-Tag", "noindex, nofollow")
	if w.base == nil {
		http.NotFound(rw, r)
		return
	}
	if wait, limited := w.limited(r); limited {
		rw.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		writeJSON(rw, http.StatusTooManyRequests, map[string]any{"error": "Too many requests; try again in a minute."})
		return
	}
	w.mux.ServeHTTP(rw, r)
}

// limited takes one request of the client's address and of the link
// token's budgets, and says whether either is spent (and for how long).
// The client is the connection's peer: a forwarded-for header is anyone's
// to write, so it is not believed.
func (w *WalletVerifier) limited(r *http.Request) (time.Duration, bool) {
	token, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/wallet/"), "/")
	okToken, waitToken := w.perToken.allow(token)
	if !okToken {
		return waitToken, true
	}
	// The token is checked before the client's budget is spent: requests
	// with made-up tokens (answered "gone" by the handler, without a
	// side effect) do not spend it, so they cannot lock genuine links out
	// of an address many people share (an ingress without
	// trusted_proxies, an office's NAT).
	if _, err := w.peekLink(r.Context(), token); err != nil {
		return 0, false
	}
	okClient, waitClient := w.perClient.allow(clientOf(r, w.opts.TrustedProxies))
	return waitClient, !okClient
}

// clientOf is the address a request comes from: its peer's, or, when the
// peer is a trusted proxy, the nearest address of X-Forwarded-For that is
// not one (read from the right: what a client writes itself is on the
// left, and is trusted no further than the proxies that passed it on).
func clientOf(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	isTrusted := func(s string) bool {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		return err == nil && slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(a.Unmap()) })
	}
	if !isTrusted(host) {
		return host
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if _, err := netip.ParseAddr(hop); err != nil {
			return host // a malformed hop: trust nothing left of it
		}
		if !isTrusted(hop) {
			return hop
		}
	}
	return host
}

// msgGone is shown when a link no longer works.
const msgGone = "This link has expired or has already been used. Run /verify-wallet in Slack for a new one."

// pageData fills wallet_page.html.
type pageData struct {
	Token    string
	UserID   string
	UserName string
	Team     string
	Expires  string
	Gone     string // set when the link no longer works
	Script   template.JS
	Style    template.CSS
}

func (w *WalletVerifier) servePage(rw http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	data := pageData{Script: template.JS(walletPageJS), Style: template.CSS(walletPageCSS)} // #nosec G203 -- the page's own embedded script and style, pinned by CSP hashes
	status := http.StatusOK
	link, err := w.peekLink(r.Context(), token)
	switch {
	case errors.Is(err, pairing.ErrLinkGone):
		status, data.Gone = http.StatusGone, msgGone
	case err != nil:
		w.log.Error("wallet page: store unavailable", slog.Any(logError, err))
		status, data.Gone = http.StatusServiceUnavailable, "conclave cannot reach its store right now; try again in a moment."
	default:
		data.Token, data.UserID, data.UserName = token, link.UserID, link.UserName
		data.Team = firstNonEmpty(link.TeamName, link.TeamID)
		data.Expires = link.Expires.UTC().Format(time.RFC3339)
	}
	var buf bytes.Buffer
	if err := w.page.Execute(&buf, data); err != nil {
		w.log.Error("wallet page: render", slog.Any(logError, err))
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	}
	h := rw.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", w.csp)
	rw.WriteHeader(status)
	_, _ = rw.Write(buf.Bytes())
}

// peekLink reads a pending verification without spending it.
func (w *WalletVerifier) peekLink(ctx context.Context, token string) (pairing.WalletLink, error) {
	ctx, cancel := context.WithTimeout(ctx, walletRequestTimeout)
	defer cancel()
	return w.links.Link(ctx, token)
}

// signInMessage writes the EIP-4361 message a link asks addr to sign.
func (w *WalletVerifier) signInMessage(token string, link pairing.WalletLink, addr common.Address) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s wants you to sign in with your Ethereum account:\n", w.base.Host)
	fmt.Fprintf(&b, "%s\n\n", addr.Hex())
	fmt.Fprintf(&b, "%s\n\n", statement(link))
	fmt.Fprintf(&b, "URI: %s\n", w.pageURL(token))
	fmt.Fprintf(&b, "Version: 1\n")
	fmt.Fprintf(&b, "Chain ID: %d\n", siweChainID)
	fmt.Fprintf(&b, "Nonce: %s\n", token)
	fmt.Fprintf(&b, "Issued At: %s\n", link.IssuedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "Expiration Time: %s", link.Expires.UTC().Format(time.RFC3339))
	return b.String()
}

// statement names the Slack user and workspace the address is linked to.
// EIP-4361 allows only URI characters and spaces in it, so names are
// reduced to those.
func statement(link pairing.WalletLink) string {
	who := link.UserID
	if name := siweSafe(link.UserName); name != "" {
		who = name + " (" + link.UserID + ")"
	}
	team := link.TeamID
	if name := siweSafe(link.TeamName); name != "" && name != link.TeamID {
		team = name + " (" + link.TeamID + ")"
	}
	return "Link this Ethereum account to the Slack user " + who + " in the workspace " + team + " on conclave."
}

// siweSafe keeps the characters EIP-4361 allows in a statement: RFC 3986
// unreserved and reserved characters, and spaces.
func siweSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', strings.ContainsRune("-._~:/?#[]@!$&'()*+,;= ", r):
			b.WriteRune(r)
		}
	}
	return strings.TrimSpace(b.String())
}

// parseAddress reads a hex address, with or without EIP-55 capitals; a
// mixed-case address must carry a valid checksum.
func parseAddress(s string) (common.Address, bool) {
	if !common.IsHexAddress(s) || !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
		return common.Address{}, false
	}
	a := common.HexToAddress(s)
	body := s[2:]
	if body != strings.ToLower(body) && body != strings.ToUpper(body) && a.Hex() != "0x"+body {
		return common.Address{}, false
	}
	return a, true
}

func (w *WalletVerifier) serveMessage(rw http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	link, err := w.peekLink(r.Context(), token)
	if err != nil {
		w.refuse(rw, err)
		return
	}
	addr, ok := parseAddress(r.URL.Query().Get("address"))
	if !ok {
		w.refuse(rw, errBadAddress)
		return
	}
	msg := w.signInMessage(token, link, addr)
	ctx, cancel := context.WithTimeout(r.Context(), walletRequestTimeout)
	defer cancel()
	if err := w.links.KeepMessage(ctx, token, link, addr, msg); err != nil {
		w.refuse(rw, err)
		return
	}
	writeJSON(rw, http.StatusOK, map[string]any{"message": msg, "address": addr.Hex()})
}

// verifyRequest is the POST body.
type verifyRequest struct {
	Address   string `json:"address"`
	Signature string `json:"signature"`
}

// errBadAddress is shown when the page sends no valid address.
var errBadAddress = errors.New("that is not an Ethereum address")

func (w *WalletVerifier) serveVerify(rw http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeJSON(rw, http.StatusUnsupportedMediaType, map[string]any{"error": "Send JSON."})
		return
	}
	var req verifyRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	if err := dec.Decode(&req); err != nil {
		writeJSON(rw, http.StatusBadRequest, map[string]any{"error": "The request is not the JSON this page sends."})
		return
	}
	link, addr, err := w.verify(r.Context(), token, req)
	if err != nil {
		w.refuse(rw, err)
		return
	}
	writeJSON(rw, http.StatusOK, map[string]any{
		"ok": true, "address": addr.Hex(),
		"message": "Linked " + addr.Hex() + " to your Slack account. You can close this page.",
	})
	w.log.Info("audit", slog.String(logAction, "wallet_linked"), slog.String(logUser, link.UserID),
		slog.String("address", addr.Hex()), slog.String(logChannel, link.Channel), slog.Time("at", w.opts.Now()))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), walletRequestTimeout)
	defer cancel()
	text := "Your wallet " + addr.Hex() + " is now linked to your Slack account."
	if err := w.notify.PostEphemeral(ctx, link.Channel, link.UserID, text); err != nil {
		w.log.Warn("wallet linked, but the Slack notice failed", slog.String(logUser, link.UserID), slog.Any(logError, err))
	}
}

// verify reads the link and the address and has the rules check the
// signature; nothing changes on any error.
func (w *WalletVerifier) verify(ctx context.Context, token string, req verifyRequest) (pairing.WalletLink, common.Address, error) {
	link, err := w.peekLink(ctx, token)
	if err != nil {
		return link, common.Address{}, err
	}
	addr, ok := parseAddress(req.Address)
	if !ok {
		return link, addr, errBadAddress
	}
	ctx, cancel := context.WithTimeout(ctx, walletRequestTimeout)
	defer cancel()
	return link, addr, w.links.Verify(ctx, token, link, addr, req.Signature)
}

// refuse answers a failed call with the reason, or a generic one for
// failures that are not the caller's.
func (w *WalletVerifier) refuse(rw http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, pairing.ErrLinkGone):
		writeJSON(rw, http.StatusGone, map[string]any{"error": msgGone})
	case errors.Is(err, errBadAddress), errors.Is(err, pairing.ErrNoMessage), errors.Is(err, pairing.ErrBadSignature):
		writeJSON(rw, http.StatusBadRequest, map[string]any{"error": sentence(err)})
	case errors.Is(err, pairing.ErrWrongKey):
		writeJSON(rw, http.StatusForbidden, map[string]any{"error": sentence(err)})
	default:
		w.log.Error("wallet verification failed", slog.Any(logError, err))
		writeJSON(rw, http.StatusServiceUnavailable, map[string]any{"error": "conclave could not complete this right now; try again in a moment."})
	}
}

// sentence capitalises an error message and ends it with a full stop.
func sentence(err error) string {
	s := err.Error()
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func writeJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}
