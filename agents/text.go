package agents

import (
	"strings"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/internal/clip"
)

// truncatedMark ends a text cut to the message-size cap.
const truncatedMark = turn.TruncatedMark

// capText keeps the first max runes of s and marks the cut, so one huge
// Slack message cannot blow a prompt's budget. max <= 0 means no cap.
func capText(s string, max int) string {
	return clip.Runes(s, max, truncatedMark)
}

// firstLine is the first line of s, capped at 300 runes: what a log or
// a model reads of an error.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return capText(s, 300)
}
