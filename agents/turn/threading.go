package turn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kaptinlin/jsonrepair"

	"github.com/conclavehq/conclave/internal/fuzzy"
)

// Outcomes of parsing a threading reply, recorded on the stored message.
const (
	ThreadingOK       = "ok"       // valid JSON, possibly inside a fence or prose
	ThreadingRepaired = "repaired" // valid only after jsonrepair
	ThreadingFailed   = "failed"   // no usable object
)

// ThreadingReminder is sent, as a user message after the model's raw
// reply, when a threading reply could not be parsed.
const ThreadingReminder = `Your reply was not a valid JSON object. Reply with only {"session": "<key or empty>", "message": "<text to post or empty>"}.`

// ThreadingReply is the expert's answer to context-not-found.
type ThreadingReply struct {
	Session string
	Message string
}

// ParseThreading reads a threading reply with fallbacks: the text as JSON,
// then the content of its first fenced code block, then its first {…}
// object, then each of those repaired with jsonrepair. It returns the reply
// and the outcome; the error says why it failed.
func ParseThreading(raw string) (ThreadingReply, string, error) {
	text := strings.TrimSpace(raw)
	r, err := decodeThreading(text)
	if err == nil {
		return r, ThreadingOK, nil
	}
	firstErr := err
	var candidates []string
	if fenced, ok := fencedBlock(text); ok {
		candidates = append(candidates, fenced)
	}
	if obj, ok := firstObject(text); ok {
		candidates = append(candidates, obj)
	}
	for _, c := range candidates {
		if r, err := decodeThreading(c); err == nil {
			return r, ThreadingOK, nil
		}
	}
	for _, c := range append(candidates, text) {
		if c == "" {
			continue
		}
		fixed, err := jsonrepair.Repair(c)
		if err != nil {
			continue
		}
		if r, err := decodeThreading(fixed); err == nil {
			return r, ThreadingRepaired, nil
		}
	}
	return ThreadingReply{}, ThreadingFailed, fmt.Errorf("threading reply is not a JSON object: %w", firstErr)
}

var errNotObject = errors.New("root is not an object")

// decodeThreading decodes exactly one JSON object holding the threading
// fields: session a string, a number (its decimal text) or null; message a
// string or null; other keys ignored.
func decodeThreading(s string) (ThreadingReply, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return ThreadingReply{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ThreadingReply{}, errors.New("text after the JSON value")
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return ThreadingReply{}, errNotObject
	}
	var r ThreadingReply
	session, _ := sessionField(obj)
	switch v := session.(type) {
	case nil:
	case string:
		r.Session = strings.TrimSpace(v)
	case json.Number:
		r.Session = decimalText(v)
	default:
		return ThreadingReply{}, fmt.Errorf("session is a %T, not a string", v)
	}
	switch v := obj["message"].(type) {
	case nil:
	case string:
		r.Message = strings.TrimSpace(v)
	default:
		return ThreadingReply{}, fmt.Errorf("message is a %T, not a string", v)
	}
	return r, nil
}

// decimalText writes a JSON number in plain decimal (1e3 → "1000").
func decimalText(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, "eE") {
		return s
	}
	f, ok := new(big.Float).SetPrec(256).SetString(s)
	if !ok {
		return s
	}
	if f.IsInt() {
		i, _ := f.Int(nil)
		return i.String()
	}
	return f.Text('f', -1)
}

// fencedBlock returns the content of the first ``` fence (its language tag
// dropped); an unclosed fence runs to the end of the text.
func fencedBlock(s string) (string, bool) {
	i := strings.Index(s, "```")
	if i < 0 {
		return "", false
	}
	body := s[i+3:]
	if nl := strings.IndexByte(body, '\n'); nl >= 0 && !strings.ContainsAny(body[:nl], "{[\"") {
		body = body[nl+1:]
	}
	if j := strings.Index(body, "```"); j >= 0 {
		body = body[:j]
	}
	return strings.TrimSpace(body), true
}

// firstObject returns the first balanced {…} of s, string literals
// respected; an unbalanced one (a truncated reply) runs to the end.
func firstObject(s string) (string, bool) {
	start := strings.IndexByte(s, '{')
	if start < 0 {
		return "", false
	}
	depth, inString, escaped := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return s[start : i+1], true
			}
		}
	}
	return s[start:], true
}

// Session match kinds, for logs.
const (
	MatchExact = "exact"
	MatchCase  = "case-insensitive"
	MatchFuzzy = "fuzzy"
)

// MatchSession picks the existing session a threading key refers to: the
// same key, else the same key ignoring case, else the most similar key
// (normalised Levenshtein on keys lowercased without spaces, "-" and "_")
// scoring at least threshold whose runs of digits are all identical, so that
// business ids never match a neighbour. Ties go to the higher score, then
// the alphabetically first key.
func MatchSession(key string, existing []string, threshold float64) (match, kind string, score float64) {
	if key == "" {
		return "", "", 0
	}
	keys := append([]string(nil), existing...)
	sort.Strings(keys)
	for _, k := range keys {
		if k == key {
			return k, MatchExact, 1
		}
	}
	for _, k := range keys {
		if strings.EqualFold(k, key) {
			return k, MatchCase, 1
		}
	}
	nk := normaliseKey(key)
	digits := digitRuns(nk)
	best, bestScore := "", -1.0
	for _, k := range keys {
		n := normaliseKey(k)
		if !slices.Equal(digitRuns(n), digits) {
			continue
		}
		s := similarity(nk, n)
		if s >= threshold && s > bestScore {
			best, bestScore = k, s
		}
	}
	if best == "" {
		return "", "", 0
	}
	return best, MatchFuzzy, bestScore
}

func normaliseKey(k string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(k) {
		if unicode.IsSpace(r) || r == '-' || r == '_' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func digitRuns(s string) []string {
	var runs []string
	var cur bytes.Buffer
	for _, r := range s {
		if '0' <= r && r <= '9' {
			cur.WriteRune(r)
			continue
		}
		if cur.Len() > 0 {
			runs = append(runs, cur.String())
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		runs = append(runs, cur.String())
	}
	return runs
}

// similarity is 1 - levenshtein(a, b) / max(len(a), len(b)), in runes.
func similarity(a, b string) float64 {
	longest := max(utf8.RuneCountInString(a), utf8.RuneCountInString(b))
	if longest == 0 {
		return 1
	}
	return 1 - float64(fuzzy.Distance(a, b))/float64(longest)
}
