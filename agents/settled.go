package agents

import (
	"context"
	"fmt"

	"github.com/conclavehq/conclave/ens"
)

// Settled reports whether a conversation has nothing left to do now: every
// message routed, no turn queued or running, no conclusion or post
// waiting, no human agent's call pending, no reaction change queued. The
// inactivity deadline is not work: a settled conversation may still
// conclude on timeout later. A conversation never recorded is settled.
//
// It is how a transport that drives the engine itself (the terminal's
// scripted mode) knows when the agents are done with a message.
func (e *Engine) Settled(ctx context.Context, team, channel, threadTS string) (bool, error) {
	return e.settled(ctx, team, channel, threadTS, false)
}

// SettledButCalls is Settled, except that human agents' calls pending do
// not count as work: the conversation waits for nobody but people. A
// transport that speaks for the human agents itself (`conclave templates
// test`) waits for this; waiting for Settled would hold it until each
// call timed out.
func (e *Engine) SettledButCalls(ctx context.Context, team, channel, threadTS string) (bool, error) {
	return e.settled(ctx, team, channel, threadTS, true)
}

func (e *Engine) settled(ctx context.Context, team, channel, threadTS string, butCalls bool) (bool, error) {
	id := ConversationID(team, channel, threadTS)
	if e.workers.running(id) || e.reactions.queued() > 0 {
		return false, nil
	}
	snap, err := e.convs.Snapshot(ctx, id)
	if err != nil {
		return false, fmt.Errorf("agents: read conversation %s: %w", id, err)
	}
	if !snap.Exists {
		return true, nil
	}
	st, err := decodeState(snap.Conversation.State)
	if err != nil {
		return false, fmt.Errorf("agents: conversation %s: %w", id, err)
	}
	for _, m := range snap.Messages {
		if !st.Routed[m.TS] {
			return false, nil
		}
	}
	busy := st.Busy()
	if butCalls {
		busy = st.BusyButCalls()
	}
	if busy {
		return false, nil
	}
	list, err := e.ChannelAgents(ctx, e.opts.rosterOf(channel))
	if err != nil {
		return false, err
	}
	hasFacilitator := false
	for _, ca := range list {
		hasFacilitator = hasFacilitator || ca.Err == nil && ca.Agent.Role == ens.RoleFacilitator
	}
	now := e.now()
	d := st.Deadline(now, 0, e.opts.MaxTurns, hasFacilitator)
	return d.IsZero() || d.After(now), nil
}
