package agents

import (
	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/templates"
)

// The conversation's state and machine live in agents/conversation; these
// are their names in the engine.
type (
	convState       = conversation.State
	queuedTurn      = conversation.QueuedTurn
	concludeRequest = conversation.ConcludeRequest
	pendingPost     = conversation.PendingPost
	streamMark      = conversation.StreamMark
	inbound         = conversation.Inbound
	namedAgent      = conversation.NamedAgent
	limits          = conversation.Limits
	action          = conversation.Action
)

// Conversation status.
const (
	statusNew       = conversation.StatusNew
	statusIgnored   = conversation.StatusIgnored
	statusOpen      = conversation.StatusOpen
	statusConcluded = conversation.StatusConcluded
)

// Why a conclusion was asked for.
const (
	concludeByEnd     = conversation.ConcludeByEnd
	concludeByPerson  = conversation.ConcludeByPerson
	concludeByTimeout = conversation.ConcludeByTimeout
	concludeByGuard   = conversation.ConcludeByGuard
	concludeByStall   = conversation.ConcludeByStall
	concludeByBudget  = conversation.ConcludeByBudget
)

// concludeReasons are the reasons as templates read them
// (.ConcludeReason).
var concludeReasons = map[string]string{
	concludeByEnd:     templates.ConcludeEnd,
	concludeByPerson:  templates.ConcludePerson,
	concludeByTimeout: templates.ConcludeInactivity,
	concludeByGuard:   templates.ConcludeMaxTurns,
	concludeByStall:   templates.ConcludeStalled,
	concludeByBudget:  templates.ConcludeBudget,
}

// decodeState decodes a stored state (tests read it this way).
func decodeState(b []byte) (*convState, error) { return conversation.Decode(b) }

func isPersonKind(kind string) bool { return conversation.IsPersonKind(kind) }

// lessTS orders Slack timestamps numerically.
func lessTS(a, b string) bool { return conversation.LessTS(a, b) }
