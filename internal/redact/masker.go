package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
)

// Redacted is what a configured secret value becomes wherever it would
// go out: a Slack post, a stored message, a trace, a span, a log line.
const Redacted = "[redacted]"

// minValueLen is the shortest secret value a Masker masks; a shorter one,
// or one of digits only, would mask ordinary words, numbers and JSON's
// own tokens (true, null), and keys and tokens are longer.
const minValueLen = 8

// Secrets are what a Masker masks, as configured.
type Secrets struct {
	// Values are tokens, API keys and header values, masked wherever they
	// appear, as written and as JSON writes them inside a string.
	Values []string
	// URLs are endpoints (model, MCP, RPC, Redis, OTel): their user-info,
	// passwords, query values and key-like path segments are masked, in
	// every form URLPairs knows.
	URLs []string
	// Args are the arguments of MCP servers marked secret_args.
	Args []string
}

// Masker masks configured secrets by value. It is the one masker of every
// way out of conclave; a nil *Masker masks nothing. It is safe for
// concurrent use.
type Masker struct {
	pairs []pair // longest old first, so that a secret holding another is masked whole
}

type pair struct{ old, new string }

// New builds the Masker of s; nil when s holds nothing to mask.
func New(s Secrets) *Masker {
	var pairs []pair
	add := func(old, new string) {
		if old != "" && old != new {
			pairs = append(pairs, pair{old, new})
		}
	}
	for _, v := range s.Values {
		if len(v) < minValueLen || strings.Trim(v, "0123456789") == "" {
			continue
		}
		add(v, Redacted)
		if quoted, err := json.Marshal(v); err == nil {
			add(string(quoted[1:len(quoted)-1]), Redacted)
		}
	}
	for _, u := range s.URLs {
		p := URLPairs(u)
		for i := 0; i+1 < len(p); i += 2 {
			add(p[i], p[i+1])
		}
	}
	args := ValuePairs(s.Args...)
	for i := 0; i+1 < len(args); i += 2 {
		add(args[i], args[i+1])
	}
	if len(pairs) == 0 {
		return nil
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.old) - len(a.old) })
	pairs = slices.CompactFunc(pairs, func(a, b pair) bool { return a.old == b.old })
	return &Masker{pairs: pairs}
}

// String returns s with every secret masked. It looks each one up with
// strings.Contains, which for a text holding none (the usual case) costs
// a few scans, where a strings.Replacer walks its trie at every byte.
func (m *Masker) String(s string) string {
	if m == nil {
		return s
	}
	for _, p := range m.pairs {
		if strings.Contains(s, p.old) {
			s = strings.ReplaceAll(s, p.old, p.new)
		}
	}
	return s
}

// Bytes returns b with every secret masked (b itself when it holds none).
func (m *Masker) Bytes(b []byte) []byte {
	if m == nil {
		return b
	}
	for _, p := range m.pairs {
		if bytes.Contains(b, []byte(p.old)) {
			b = bytes.ReplaceAll(b, []byte(p.old), []byte(p.new))
		}
	}
	return b
}

// Writer is w with every Write masked: for a log, whose handler writes
// one record per Write, so that no line shows a secret, the libraries'
// own lines included. It is w itself when m is nil.
func (m *Masker) Writer(w io.Writer) io.Writer {
	if m == nil {
		return w
	}
	return maskingWriter{w: w, m: m}
}

type maskingWriter struct {
	w io.Writer
	m *Masker
}

func (mw maskingWriter) Write(p []byte) (int, error) {
	if _, err := mw.w.Write(mw.m.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
