package bot

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/conclavehq/conclave/memory"
)

// WalletStore keeps wallet links and the one-time nonces of pending
// verifications (a memory.Store).
type WalletStore interface {
	// LinkWallet links a verified address to a Slack user (idempotent).
	LinkWallet(ctx context.Context, userID, address string) error
	// PutNonce stores a one-time value for ttl.
	PutNonce(ctx context.Context, nonce string, value []byte, ttl time.Duration) error
	// PeekNonce reads a nonce without spending it; memory.ErrNotFound when
	// unknown, spent or expired.
	PeekNonce(ctx context.Context, nonce string) ([]byte, error)
	// SpendNonce reads and deletes a nonce atomically; memory.ErrNotFound
	// when unknown, spent or expired.
	SpendNonce(ctx context.Context, nonce string) ([]byte, error)
}

// Notifier shows a short message to one Slack user in a channel (Bot's
// PostEphemeral).
type Notifier interface {
	PostEphemeral(ctx context.Context, channel, user, text string) error
}

// ErrWalletNotConfigured is returned by WalletVerifier.Issue when
// http.public_url is not set: there is no page to send anyone to.
var ErrWalletNotConfigured = errors.New("wallet verification is not configured")

const (
	// walletLinkTTL is how long a /verify-wallet link works.
	walletLinkTTL = 10 * time.Minute
	// walletRequestTimeout bounds the store and Slack calls of one request
	// to the wallet page.
	walletRequestTimeout = 10 * time.Second
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
// A link's record lives in the store for walletLinkTTL and is spent only by a
// successful verification: viewing the page (or a link preview fetching
// it) changes nothing. The exact text offered for signing is stored beside
// it, per address, and the signature is checked against that copy.
type WalletVerifier struct {
	opts   WalletOptions
	base   *url.URL // nil when not configured
	store  WalletStore
	notify Notifier
	log    *slog.Logger
	mux    *http.ServeMux
	page   *template.Template
	csp    string
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
func NewWalletVerifier(opts WalletOptions, store WalletStore, notify Notifier) (*WalletVerifier, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &WalletVerifier{
		opts:   opts,
		store:  store,
		notify: notify,
		log:    opts.Logger.With(slog.String("component", "wallet")),
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

// walletLink is a pending verification, stored under its token.
type walletLink struct {
	UserID   string    `json:"user"`
	UserName string    `json:"user_name,omitempty"`
	TeamID   string    `json:"team"`
	TeamName string    `json:"team_name,omitempty"`
	Channel  string    `json:"channel"`
	IssuedAt time.Time `json:"issued_at"`
	Expires  time.Time `json:"expires"`
}

// Keys of the nonces a verification uses.
func linkKey(token string) string { return "wallet:" + token }
func messageKey(token string, addr common.Address) string {
	return "wallet-message:" + token + ":" + strings.ToLower(addr.Hex())
}

// tokenPattern is a link token: 128 random bits in hex, also the
// EIP-4361 nonce (which must be alphanumeric).
var tokenPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func newLinkToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Issue creates a one-time link for req and returns its URL.
// ErrWalletNotConfigured when there is no public URL.
func (w *WalletVerifier) Issue(ctx context.Context, req WalletRequest) (string, error) {
	if w.base == nil {
		return "", ErrWalletNotConfigured
	}
	if req.UserID == "" {
		return "", errors.New("bot: wallet link: no user")
	}
	now := w.opts.Now().UTC().Truncate(time.Second)
	link := walletLink{
		UserID: req.UserID, UserName: req.UserName, TeamID: req.TeamID, TeamName: req.TeamName,
		Channel: req.Channel, IssuedAt: now, Expires: now.Add(walletLinkTTL),
	}
	value, err := json.Marshal(link)
	if err != nil {
		return "", fmt.Errorf("bot: wallet link: %w", err)
	}
	token := newLinkToken()
	if err := w.store.PutNonce(ctx, linkKey(token), value, walletLinkTTL); err != nil {
		return "", fmt.Errorf("bot: wallet link: %w", err)
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
	w.mux.ServeHTTP(rw, r)
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
	case errors.Is(err, errLinkGone):
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

// errLinkGone: the token is malformed, unknown, spent or expired.
var errLinkGone = errors.New("link expired or used")

// peekLink reads a pending verification without spending it.
func (w *WalletVerifier) peekLink(ctx context.Context, token string) (walletLink, error) {
	if !tokenPattern.MatchString(token) {
		return walletLink{}, errLinkGone
	}
	ctx, cancel := context.WithTimeout(ctx, walletRequestTimeout)
	defer cancel()
	raw, err := w.store.PeekNonce(ctx, linkKey(token))
	if errors.Is(err, memory.ErrNotFound) {
		return walletLink{}, errLinkGone
	}
	if err != nil {
		return walletLink{}, err
	}
	var link walletLink
	if err := json.Unmarshal(raw, &link); err != nil {
		return walletLink{}, fmt.Errorf("bot: wallet link %s…: %w", token[:6], err)
	}
	if !w.opts.Now().Before(link.Expires) {
		return walletLink{}, errLinkGone
	}
	return link, nil
}

// signInMessage writes the EIP-4361 message a link asks addr to sign.
func (w *WalletVerifier) signInMessage(token string, link walletLink, addr common.Address) string {
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
func statement(link walletLink) string {
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
	// The copy lives as long as the link; writing it again is harmless (the
	// same text), and a copy outliving a spent link verifies nothing.
	ttl := link.Expires.Sub(w.opts.Now())
	if err := w.store.PutNonce(ctx, messageKey(token, addr), []byte(msg), max(ttl, time.Millisecond)); err != nil {
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

// Errors of verification, each with the reason shown on the page.
var (
	errBadAddress = errors.New("that is not an Ethereum address")
	errNoMessage  = errors.New("no message was prepared for this address: reload the page and try again")
	errBadSig     = errors.New("the signature is not a valid Ethereum signature")
	errWrongKey   = errors.New("the signature was not made by that address")
)

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

// verify checks a signature against the stored message and, when it holds,
// spends the link and links the address. Nothing changes on any error.
func (w *WalletVerifier) verify(ctx context.Context, token string, req verifyRequest) (walletLink, common.Address, error) {
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
	msg, err := w.store.PeekNonce(ctx, messageKey(token, addr))
	if errors.Is(err, memory.ErrNotFound) {
		return link, addr, errNoMessage
	}
	if err != nil {
		return link, addr, err
	}
	signer, err := recoverSigner(msg, req.Signature)
	if err != nil {
		return link, addr, err
	}
	if signer != addr {
		w.log.Warn("wallet signature from another address refused", slog.String(logUser, link.UserID),
			slog.String("claimed", addr.Hex()), slog.String("signer", signer.Hex()))
		return link, addr, errWrongKey
	}
	// Spending is the one step that decides: of two valid requests racing,
	// only one gets the link.
	if _, err := w.store.SpendNonce(ctx, linkKey(token)); err != nil {
		if errors.Is(err, memory.ErrNotFound) {
			return link, addr, errLinkGone
		}
		return link, addr, err
	}
	if err := w.store.LinkWallet(ctx, link.UserID, addr.Hex()); err != nil {
		// Give the link back so that the person can try again.
		raw, _ := json.Marshal(link)
		if ttl := link.Expires.Sub(w.opts.Now()); ttl > time.Millisecond {
			if perr := w.store.PutNonce(ctx, linkKey(token), raw, ttl); perr != nil {
				w.log.Warn("could not restore a wallet link after a failed save", slog.Any(logError, perr))
			}
		}
		return link, addr, err
	}
	if _, err := w.store.SpendNonce(ctx, messageKey(token, addr)); err != nil && !errors.Is(err, memory.ErrNotFound) {
		w.log.Debug("wallet message copy not removed; it expires with the link", slog.Any(logError, err))
	}
	return link, addr, nil
}

// recoverSigner returns the address whose key made an EIP-191
// (personal_sign) signature of msg. v may be 27/28 (what wallets send) or
// 0/1; a high s value (a malleated signature) is refused.
func recoverSigner(msg []byte, sigHex string) (common.Address, error) {
	sig, err := hexutil.Decode(strings.TrimSpace(sigHex))
	if err != nil || len(sig) != crypto.SignatureLength {
		return common.Address{}, errBadSig
	}
	v := sig[crypto.RecoveryIDOffset]
	if v >= 27 {
		v -= 27
	}
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64])
	if !crypto.ValidateSignatureValues(v, r, s, true) {
		return common.Address{}, errBadSig
	}
	sig[crypto.RecoveryIDOffset] = v
	pub, err := crypto.SigToPub(accounts.TextHash(msg), sig)
	if err != nil {
		return common.Address{}, errBadSig
	}
	return crypto.PubkeyToAddress(*pub), nil
}

// refuse answers a failed call with the reason, or a generic one for
// failures that are not the caller's.
func (w *WalletVerifier) refuse(rw http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errLinkGone):
		writeJSON(rw, http.StatusGone, map[string]any{"error": msgGone})
	case errors.Is(err, errBadAddress), errors.Is(err, errNoMessage), errors.Is(err, errBadSig):
		writeJSON(rw, http.StatusBadRequest, map[string]any{"error": sentence(err)})
	case errors.Is(err, errWrongKey):
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
