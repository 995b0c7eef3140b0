package agents

import "github.com/conclavehq/conclave/agents/turn"

// truncatedMark ends a text cut to the message-size cap (turn.CapText).
const truncatedMark = turn.TruncatedMark
