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
		if te.Line > 0 {
			return fmt.Sprintf("template error in %s:%d", te.File, te.Line)
		}
		return "template error in " + te.File
	}
	if le, ok := errors.AsType[*llm.Error](err); ok {
		switch {
		case le.Status >= 400:
			return fmt.Sprintf("the model endpoint returned HTTP %d", le.Status)
		case le.Reason == llm.ReasonTimeout || le.Reason == llm.ReasonDeadline:
			return "the model endpoint timed out"
		case le.Reason == llm.ReasonConnection:
			return "the model endpoint could not be reached"
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
