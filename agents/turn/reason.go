package turn

import (
	"errors"
	"fmt"
	"strings"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/redact"
	"github.com/conclavehq/conclave/templates"
)

// ErrTurnDeadline: a turn's model calls outlasted its deadline
// (turn_timeout).
var ErrTurnDeadline = errors.New("the turn passed its deadline")

// ErrContextOverflow: the endpoint refused a turn's request as longer
// than the model's context window, and again with its history cut to
// half the input budget.
var ErrContextOverflow = errors.New("the conversation is too long for the model's context window, even with its history cut to half")

// FilteredMark ends a reply the endpoint's content filter cut short.
const FilteredMark = "(cut by the model's content filter)"

// MarkCut is a reply's text, masked with mask and marked when it is partial: " …"
// when the token limit cut it, the FilteredMark when the content filter
// did. A model that repeats a secret it was shown (a key in a tool's
// result, an instruction) does not post it nor store it.
func MarkCut(mask *redact.Masker, resp llm.Response) string {
	text := mask.String(resp.Content)
	if strings.TrimSpace(text) == "" {
		return text
	}
	switch {
	case resp.Truncated():
		text = strings.TrimRight(text, " \n\t") + " …"
	case resp.Filtered():
		text = strings.TrimRight(text, " \n\t") + " … " + FilteredMark
	}
	return text
}

// NoticeReason is the reason a ⚠️ notice gives for a failed turn: a class
// of failure, never the error's text. Upstream error bodies, URLs, host
// names and keys stay in the log (SPEC §12.2), since everyone in the
// channel reads the notice.
func NoticeReason(err error) string {
	if errors.Is(err, ErrTurnDeadline) {
		return ErrTurnDeadline.Error()
	}
	if errors.Is(err, ErrContextOverflow) {
		return ErrContextOverflow.Error()
	}
	if te, ok := errors.AsType[*templates.Error](err); ok {
		where := te.RepoFile()
		if te.Line > 0 {
			where = fmt.Sprintf("%s:%d", te.RepoFile(), te.Line)
		}
		// The author wrote a required's message, and conclave the empty
		// prompt's: neither holds data from the conversation.
		if errors.Is(err, templates.ErrRequired) || errors.Is(err, templates.ErrEmptyPrompt) {
			return "template error in " + where + ": " + te.Message
		}
		return "template error in " + where
	}
	if le, ok := errors.AsType[*llm.Error](err); ok {
		switch {
		case le.Status >= 400:
			return fmt.Sprintf("the model endpoint returned HTTP %d", le.Status)
		case le.Reason == llm.ReasonTimeout || le.Reason == llm.ReasonDeadline:
			return "the model endpoint timed out"
		case le.Reason == llm.ReasonConnection:
			return "the model endpoint could not be reached"
		case le.Reason == llm.ReasonLength:
			return "the model stopped at its length limit"
		case le.Reason == llm.ReasonFiltered:
			return "the model's content filter stopped the reply"
		case le.Reason == llm.ReasonEmpty:
			return "the model endpoint returned an empty reply"
		case le.Reason == llm.ReasonMalformed:
			return "the model endpoint returned a malformed reply"
		case le.Reason == llm.ReasonInvalid:
			return "the model request was refused before sending"
		}
		return "the model call failed"
	}
	switch {
	case errors.Is(err, ens.ErrGatewayRefused):
		return "identity look-up failed: " + ens.ErrGatewayRefused.Error()
	case errors.Is(err, ens.ErrGatewayUnreachable):
		return "identity look-up failed: " + ens.ErrGatewayUnreachable.Error()
	case errors.Is(err, ens.ErrNotFound), errors.Is(err, ens.ErrNoRPC):
		return "identity look-up failed"
	}
	return "an internal error (see conclave's log)"
}
