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
// per line, {"role": "user"|"assistant"|"system", "content": "…"}. Blank
// lines are skipped; any other key, a missing or empty content, another
// role or a line that is not such an object is an error. The whole input
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
		if k != "role" && k != "content" {
			return SessionEntry{}, fmt.Errorf("unknown key %q (want role and content)", k)
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
	return SessionEntry{Role: role, Content: content}, nil
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
// append, stamping entries without a time with at. Like every append, the
// session then keeps only its newest entries up to the store's bound.
func Hydrate(ctx context.Context, s Store, namespace, key string, entries []SessionEntry, at time.Time) error {
	if len(entries) == 0 {
		return errors.New("memory: hydrate: no messages")
	}
	stamped := slices.Clone(entries)
	for i := range stamped {
		if stamped[i].At.IsZero() {
			stamped[i].At = at
		}
	}
	if err := s.AppendSession(ctx, SessionAppend{Namespace: namespace, Key: key, Entries: stamped}); err != nil {
		return fmt.Errorf("memory: hydrate session %q of %s: %w", key, namespace, err)
	}
	return nil
}
