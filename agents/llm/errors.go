package llm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/conclavehq/conclave/internal/clip"
	"github.com/conclavehq/conclave/internal/redact"
)

// ErrEmptyReply reports a reply with no choice or only white space; it is
// retried like a server error and returned, wrapped in *Error, when the
// retries run out. An empty reply the model ended at its length limit or
// its content filter stopped is not retried (Reason says which).
var ErrEmptyReply = errors.New("empty reply")

// Reasons of a failed completion, short enough for a notice in a thread.
const (
	ReasonRateLimited = "rate limited"
	ReasonServer      = "server error"
	ReasonTimeout     = "timed out"
	ReasonConnection  = "connection failed"
	ReasonEmpty       = "empty reply"
	ReasonLength      = "length limit"   // an empty reply cut by the token limit: not retried
	ReasonFiltered    = "content filter" // an empty reply stopped by the content filter: not retried
	ReasonMalformed   = "malformed reply"
	ReasonRejected    = "request rejected" // a 4xx other than 429: not retried
	ReasonInvalid     = "invalid request"  // refused before sending
	ReasonDeadline    = "total timeout"
	ReasonCanceled    = "canceled"
)

// Error is a completion that failed, after its retries. Its message names
// the profile, the model, the attempts made and the last failure; it never
// contains the API key or a secret header value.
type Error struct {
	Profile  string
	Model    string
	Attempts int    // calls made
	Status   int    // HTTP status of the last call; 0 when it got none
	Reason   string // one of the Reason constants
	msg      string // the last failure, redacted
	cause    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("llm: profile %q, model %q: %s after %d %s: %s",
		e.Profile, e.Model, e.Reason, e.Attempts, plural(e.Attempts, "attempt"), e.msg)
}

// Unwrap gives the underlying error: ErrEmptyReply, a context error, or the
// client library's error (*openai.APIError, *openai.RequestError). Print
// the *Error, not what it wraps: only its message is redacted.
func (e *Error) Unwrap() error { return e.cause }

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// redactor removes secrets from text bound for error messages: the API
// key and secret-looking header values, and what the base URL carries
// (user-info, query values, path keys; internal/redact).
type redactor struct{ r *strings.Replacer }

func newRedactor(p Profile) redactor {
	pairs := redact.URLPairs(p.BaseURL)
	if p.APIKey != "" {
		pairs = append(pairs, p.APIKey, "[redacted]")
	}
	for name, value := range p.Headers {
		n := strings.ToLower(name)
		secret := strings.Contains(n, "key") || strings.Contains(n, "token") ||
			strings.Contains(n, "secret") || strings.Contains(n, "auth")
		if secret && value != "" {
			pairs = append(pairs, value, "[redacted]")
		}
	}
	return redactor{strings.NewReplacer(pairs...)}
}

func (r redactor) clean(s string) string { return r.r.Replace(s) }

// clipQuote bounds text quoted from a server (an HTML error page, say).
func clipQuote(s string, n int) string {
	return clip.Runes(strings.TrimSpace(s), n, "…")
}
