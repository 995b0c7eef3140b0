// Package redact masks the secrets that URLs and command lines carry, in
// configuration printed, logs and errors: a URL's user-info, its query
// values and the path segments that look like keys (Infura's /v3/<key>,
// Alchemy's /v2/<key>), and the arguments of a command marked secret. The
// rest stays as written, so that an operator still sees which host is
// meant.
//
// It imports nothing of conclave, so that every package may use it, the
// leaves (ens) included.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces a secret.
const Mask = "****"

// minKeyLen is the shortest path segment taken for a key, minRunLen the
// shortest run of letters and digits in it.
const (
	minKeyLen = 16
	minRunLen = 12
)

// URL returns raw with its user-info, query values, fragment and key-like
// path segments masked:
//
//	https://ada:pw@rpc.example/v3/0123456789abcdef0123456789abcdef?key=abc
//	→ https://****@rpc.example/v3/****?key=****
//
// Text that is not a URL with a host is masked whole; "" stays "".
func URL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return Mask
	}
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString(Mask + "@")
	}
	b.WriteString(u.Host)
	b.WriteString(maskPath(u.EscapedPath()))
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?" + maskQuery(u.RawQuery))
	}
	if u.Fragment != "" {
		b.WriteString("#" + Mask)
	}
	return b.String()
}

// maskPath masks each segment of an escaped path that looks like a key.
func maskPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if looksLikeKey(s) {
			segs[i] = Mask
		}
	}
	return strings.Join(segs, "/")
}

// looksLikeKey tells a path segment that is probably a credential: at
// least minKeyLen characters of letters, digits, '-', '_' and '.', with a
// run of minRunLen between those separators that holds a digit. Hex and
// base-62 keys and UUIDs are; words, versions and dated model names
// ("gpt-4o-mini-2024-07-18") are not.
func looksLikeKey(s string) bool {
	if len(s) < minKeyLen {
		return false
	}
	run, digit, found := 0, false, false
	for _, r := range s + "-" {
		switch {
		case '0' <= r && r <= '9':
			run, digit = run+1, true
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			run++
		case r == '-', r == '_', r == '.':
			found = found || run >= minRunLen && digit
			run, digit = 0, false
		default:
			return false
		}
	}
	return found
}

// maskQuery keeps a query's names and masks its values.
func maskQuery(q string) string {
	if q == "" {
		return ""
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		parts[i] = name + "=" + Mask
	}
	return strings.Join(parts, "&")
}

// URLPairs are old, new pairs for strings.NewReplacer that mask rawURL in
// a text, in each form errors quote it: as written; with the password
// replaced as net/url and net/http write it; and in the URLs made from it
// (a path appended: the user-info, the query and the key-like segments
// are replaced wherever they appear). Nothing for a URL with nothing to
// mask, nor for text that is not a URL with a host (an error saying so
// quotes it, and it names no secret that can be told apart).
func URLPairs(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil
	}
	masked := URL(rawURL)
	if masked == rawURL {
		return nil
	}
	pairs := []string{rawURL, masked}
	if u.User != nil {
		pairs = append(pairs, u.Redacted(), masked)
		name := u.User.Username()
		if _, has := u.User.Password(); has {
			pairs = append(pairs, u.User.String()+"@", Mask+"@", name+":***@", Mask+"@", name+":xxxxx@", Mask+"@")
		} else if name != "" {
			pairs = append(pairs, name+"@", Mask+"@")
		}
	}
	if u.RawQuery != "" {
		pairs = append(pairs, "?"+u.RawQuery, "?"+maskQuery(u.RawQuery))
	}
	for _, s := range strings.Split(u.EscapedPath(), "/") {
		if looksLikeKey(s) {
			pairs = append(pairs, "/"+s, "/"+Mask)
		}
	}
	return pairs
}

// Text masks each of rawURLs in s (see URLPairs).
func Text(s string, rawURLs ...string) string {
	var pairs []string
	for _, u := range rawURLs {
		pairs = append(pairs, URLPairs(u)...)
	}
	if len(pairs) == 0 {
		return s
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// minSecretLen is the shortest value masked wherever it appears in a
// text; a shorter one ("-v", "on") would mask ordinary words.
const minSecretLen = 4

// ValuePairs are old, new pairs for strings.NewReplacer that mask each
// secret value (an env or header value, an argument) in a text.
func ValuePairs(values ...string) []string {
	var pairs []string
	for _, v := range values {
		if len(v) >= minSecretLen {
			pairs = append(pairs, v, Mask)
		}
	}
	return pairs
}

// Args is a command line with its arguments masked, the program kept
// (for an MCP server whose arguments carry secrets: secret_args).
func Args(command []string) []string {
	if command == nil {
		return nil
	}
	out := make([]string, len(command))
	for i, a := range command {
		if i > 0 {
			a = Mask
		}
		out[i] = a
	}
	return out
}
