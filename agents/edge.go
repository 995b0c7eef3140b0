package agents

import (
	"context"
	"log/slog"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/memory"
)

// What a turn reads is gathered by the step and converted here, at the
// engine's edge: a turn never sees the store's types, the store nor
// Slack.

// describe is the channel's description for a turn's prompts, read from
// Slack (the transport caches it) before the turn runs; "" when it cannot
// be read.
func describe(ctx context.Context, c *convo) string {
	desc, err := c.chat.ChannelDescription(ctx, c.e.opts.rosterOf(c.conv.Channel))
	if err != nil {
		c.log.Warn("channel description", slog.Any(logError, err))
	}
	return desc
}

// threadOf is the thread as a turn reads it: the store's messages
// converted at the engine's edge.
func threadOf(msgs []memory.Message) []turn.Message {
	out := make([]turn.Message, len(msgs))
	for i, m := range msgs {
		out[i] = turnMessage(m)
	}
	return out
}

// turnMessage is a stored message as a turn reads it.
func turnMessage(m memory.Message) turn.Message {
	return turn.Message{TS: m.TS, Kind: m.Kind, Agent: m.Agent, Name: m.Name, Text: m.Text, At: m.At}
}
