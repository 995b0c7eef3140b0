package turn

import (
	"regexp"
	"strings"
)

// Keys are keys (SPEC §14.7): a threading reply's key is one business id,
// never the template's own placeholder sent back, a phrase or a key cut
// by the length limit; those are refused whatever the session policy
// says, so that no such "key" becomes a session every conversation
// shares.

// sessionFields are the names models give the key's field, in the order
// they are tried: "session" first, then what small models write instead.
var sessionFields = []string{"session", "session_key", "sessionkey", "key"}

// sessionField finds the key's field in a threading object: "session",
// else, in any case, one of sessionFields.
func sessionField(obj map[string]any) (any, bool) {
	if v, ok := obj["session"]; ok {
		return v, true
	}
	for _, want := range sessionFields {
		for k, v := range obj {
			if strings.EqualFold(k, want) {
				return v, true
			}
		}
	}
	return nil, false
}

// Placeholders are what the threading prompt shows as the values of its
// fields ("<key or empty>", "<text to post or empty>").
type Placeholders struct{ Session, Message []string }

// Built-in placeholders: the ones the built-in context-not-found prompt
// shows, refused whatever the prompt in use shows.
var (
	defaultPlaceholders = Placeholders{Session: []string{"<key or empty>"}, Message: []string{"<text to post or empty>"}}
	placeholderField    = regexp.MustCompile(`"(session|message)"\s*:\s*"([^"]*)"`)
)

// PlaceholdersOf reads the placeholders a rendered threading prompt
// shows, beside the built-in ones.
func PlaceholdersOf(prompt string) Placeholders {
	p := Placeholders{
		Session: append([]string(nil), defaultPlaceholders.Session...),
		Message: append([]string(nil), defaultPlaceholders.Message...),
	}
	for _, m := range placeholderField.FindAllStringSubmatch(prompt, -1) {
		if strings.TrimSpace(m[2]) == "" {
			continue
		}
		if m[1] == "session" {
			p.Session = append(p.Session, m[2])
		} else {
			p.Message = append(p.Message, m[2])
		}
	}
	return p
}

// IsPlaceholder reports whether v repeats one of ps (case, blanks and
// the angle brackets around it aside).
func IsPlaceholder(v string, ps []string) bool {
	bare := func(s string) string {
		return strings.Join(strings.Fields(strings.ToLower(strings.Trim(strings.TrimSpace(s), "<>"))), " ")
	}
	b := bare(v)
	if b == "" {
		return false
	}
	for _, p := range ps {
		if bare(p) == b {
			return true
		}
	}
	return false
}

// Why a threading key is refused.
const (
	keyHasBrackets   = "it holds < or >"
	keyIsPlaceholder = "it repeats the template's placeholder"
	keyIsCut         = "it ends in an ellipsis: the reply was cut"
	KeyHasSpaces     = "it is more than one token"
)

// CheckKey judges a threading key: the key to use ("" for none) and, when
// it is refused, why. A key is one token after trimming; one with blanks
// inside is refused unless pattern (the agent's session_pattern, nil for
// none) matches exactly one of its words, which is then the key.
func CheckKey(key string, ps Placeholders, pattern *regexp.Regexp) (string, string) {
	key = strings.TrimSpace(key)
	switch {
	case key == "":
		return "", ""
	case IsPlaceholder(key, ps.Session):
		return "", keyIsPlaceholder
	case strings.ContainsAny(key, "<>"):
		return "", keyHasBrackets
	case strings.HasSuffix(key, "…") || strings.HasSuffix(key, "..."):
		return "", keyIsCut
	}
	words := strings.Fields(key)
	if len(words) == 1 {
		return key, ""
	}
	if pattern == nil {
		return "", KeyHasSpaces
	}
	picked := ""
	for _, w := range words {
		w = strings.Trim(w, `.,;:!?"'()[]{}`)
		if w == "" || !pattern.MatchString(w) {
			continue
		}
		if picked != "" && picked != w {
			return "", KeyHasSpaces
		}
		picked = w
	}
	if picked == "" {
		return "", KeyHasSpaces
	}
	return picked, ""
}

// KeyWritten reports whether one of texts writes key, up to case, spaces,
// dashes and underscores, with no digit glued to a side of it that ends in
// a digit: "c-45653" writes C45653, "C456530" and "C45654" do not.
func KeyWritten(key string, texts []string) bool {
	k := normaliseKey(key)
	if k == "" {
		return false
	}
	isDigit := func(b byte) bool { return '0' <= b && b <= '9' }
	for _, text := range texts {
		n := normaliseKey(text)
		for from := 0; ; {
			i := strings.Index(n[from:], k)
			if i < 0 {
				break
			}
			i += from
			end := i + len(k)
			before := i > 0 && isDigit(k[0]) && isDigit(n[i-1])
			after := end < len(n) && isDigit(k[len(k)-1]) && isDigit(n[end])
			if !before && !after {
				return true
			}
			from = i + 1
		}
	}
	return false
}
