package agents

import (
	"errors"
	"fmt"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/templates"
)

// noticeReason is the reason a ⚠️ notice gives for a failed turn: a class
// of failure, never the error's text. Upstream error bodies, URLs, host
// names and keys stay in the log (SPEC §12.2), since everyone in the
// channel reads the notice.
func noticeReason(err error) string {
	if errors.Is(err, errTurnDeadline) {
		return errTurnDeadline.Error()
	}
	if errors.Is(err, errContextOverflow) {
		return errContextOverflow.Error()
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
