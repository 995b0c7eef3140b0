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
	id := ConversationID(team, channel, threadTS)
	e.mu.Lock()
	busy := e.busy[id]
	e.mu.Unlock()
	if busy || e.reactions.queued() > 0 {
		return false, nil
	}
	snap, err := e.deps.Store.Snapshot(ctx, id)
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
	if st.busy() {
		return false, nil
	}
	list, err := e.ChannelAgents(ctx, channel)
	if err != nil {
		return false, err
	}
	hasFacilitator := false
	for _, ca := range list {
		hasFacilitator = hasFacilitator || ca.Err == nil && ca.Agent.Role == ens.RoleFacilitator
	}
	now := e.now()
	d := st.deadline(now, 0, e.opts.MaxTurns, hasFacilitator)
	return d.IsZero() || d.After(now), nil
}
