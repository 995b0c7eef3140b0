package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// maxHydrateErrors is how many line errors ParseJSONL reports before it
// only counts the rest.
const maxHydrateErrors = 20

// hydrateRoles are the roles a hydrated entry may have.
var hydrateRoles = []string{"user", "assistant", "system"}

// ParseJSONL reads the messages of a session to hydrate: one JSON object
// per line, {"role": "user"|"assistant"|"system", "content": "…"}, with an
// optional "at": when the message was written, an RFC 3339 time or a date
// (YYYY-MM-DD, midnight UTC), which the entry keeps. Blank lines are
// skipped; any other key, a missing or empty content, another role, an
// "at" of another form or a line that is not such an object is an error. The whole input
// is checked before anything is returned, and every error reads
// "<name>:<line>: <message>" (errors.Join of them, the first
// maxHydrateErrors in full).
func ParseJSONL(name string, r io.Reader) ([]SessionEntry, error) {
	var (
		entries []SessionEntry
		errs    []error
		bad     int
	)
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		text, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %w", name, line, rerr)
		}
		if line == 1 {
			text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
		}
		if trimmed := bytes.TrimSpace(text); len(trimmed) > 0 {
			e, err := parseHydrateLine(trimmed)
			switch {
			case err == nil:
				entries = append(entries, e)
			case bad < maxHydrateErrors:
				errs = append(errs, fmt.Errorf("%s:%d: %w", name, line, err))
				bad++
			default:
				bad++
			}
		}
		if rerr != nil {
			break
		}
	}
	if bad > maxHydrateErrors {
		errs = append(errs, fmt.Errorf("%s: %d more errors", name, bad-maxHydrateErrors))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: no messages", name)
	}
	return entries, nil
}

func parseHydrateLine(line []byte) (SessionEntry, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return SessionEntry{}, errors.New(`want a JSON object {"role": …, "content": …}`)
		}
		return SessionEntry{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if fields == nil {
		return SessionEntry{}, errors.New(`want a JSON object {"role": …, "content": …}`)
	}
	for k := range fields {
		if k != "role" && k != "content" && k != "at" {
			return SessionEntry{}, fmt.Errorf("unknown key %q (want role, content and an optional at)", k)
		}
	}
	role, err := hydrateString(fields, "role")
	if err != nil {
		return SessionEntry{}, err
	}
	if !slices.Contains(hydrateRoles, role) {
		return SessionEntry{}, fmt.Errorf("role %q is not one of %s", role, strings.Join(hydrateRoles, ", "))
	}
	content, err := hydrateString(fields, "content")
	if err != nil {
		return SessionEntry{}, err
	}
	if strings.TrimSpace(content) == "" {
		return SessionEntry{}, errors.New("empty content")
	}
	e := SessionEntry{Role: role, Content: content}
	if _, ok := fields["at"]; ok {
		s, err := hydrateString(fields, "at")
		if err != nil {
			return SessionEntry{}, err
		}
		if e.At, err = hydrateTime(s); err != nil {
			return SessionEntry{}, err
		}
	}
	return e, nil
}

// hydrateTime reads a hydrated entry's "at": an RFC 3339 time, or a date
// taken as midnight UTC.
func hydrateTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf(`"at" %q is neither an RFC 3339 time (2025-03-03T10:00:00Z) nor a date (2025-03-03)`, s)
}

func hydrateString(fields map[string]json.RawMessage, key string) (string, error) {
	raw, ok := fields[key]
	if !ok {
		return "", fmt.Errorf("missing %q", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || string(raw) == "null" {
		return "", fmt.Errorf("%q must be a string", key)
	}
	return s, nil
}

// Hydrate appends entries to the session key of namespace in one atomic
// append. An entry keeps its own time; one without is stamped at. An
// entry dated after at is an error, and nothing is appended. Like every
// append, the session then keeps only its newest entries up to the
// store's bound.
func Hydrate(ctx context.Context, s Store, namespace, key string, entries []SessionEntry, at time.Time) error {
	if len(entries) == 0 {
		return errors.New("memory: hydrate: no messages")
	}
	stamped := slices.Clone(entries)
	for i := range stamped {
		switch {
		case stamped[i].At.IsZero():
			stamped[i].At = at
		case stamped[i].At.After(at):
			return fmt.Errorf("memory: hydrate: message %d is dated %s, later than now (%s); nothing was appended",
				i+1, stamped[i].At.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
		}
	}
	if err := s.AppendSession(ctx, SessionAppend{Namespace: namespace, Key: key, Entries: stamped}); err != nil {
		return fmt.Errorf("memory: hydrate session %q of %s: %w", key, namespace, err)
	}
	return nil
}
