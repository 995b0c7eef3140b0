package agents

// The few internals the behaviour tests in package agents_test reach. They
// drive the engine through its API; what is here lets them run one step
// synchronously, wait for the reaction queue, and read the values the
// engine writes into stored state and messages. Nothing else in those
// tests names an unexported identifier, so a change of the internals is
// fixed here only.

import (
	"context"
	"time"

	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
)

// Values the engine writes: a conversation's status, a stored message's
// kind, a turn's threading outcome, and marks in texts.
const (
	StatusOpen      = statusOpen
	StatusConcluded = statusConcluded

	KindPerson = kindPerson
	KindAgent  = kindAgent

	ThreadingOK       = turn.ThreadingOK
	ThreadingRepaired = turn.ThreadingRepaired
	ThreadingFailed   = turn.ThreadingFailed
	ThreadingReminder = turn.ThreadingReminder

	EndToken        = turn.EndToken
	TruncatedMark   = truncatedMark
	BudgetWorkspace = budgetWorkspace
)

// ConvState is a conversation's engine state as stored.
type ConvState = convState

// DecodeState reads a stored conversation state.
func DecodeState(b []byte) (*ConvState, error) { return decodeState(b) }

// FirstLabel is an ENS name's first label, as the engine names an agent.
func FirstLabel(name string) string { return firstLabel(name) }

// EstimateTokens is the engine's token estimate of a text.
func EstimateTokens(s string) int { return turn.EstimateTokens(s) }

// Process runs one step of conversation id as a worker does (channel may
// be empty when unknown).
func (e *Engine) Process(ctx context.Context, id, channel string) {
	e.process(ctx, ctx, task{id: id, channel: channel})
}

// DispatchSoon hands conversation id straight to a worker.
func (e *Engine) DispatchSoon(id string) { e.dispatchSoon(task{id: id}) }

// Sweep runs one sweep and returns the conversations it handed to
// workers (at most limit).
func (e *Engine) Sweep(ctx context.Context, limit int) []string {
	work := make(chan task, limit)
	e.sweep(ctx, work)
	close(work)
	var ids []string
	for t := range work {
		ids = append(ids, t.id)
	}
	return ids
}

// WaitReactions waits until the reaction changes queued so far are applied.
func (e *Engine) WaitReactions() { e.reactions.wait() }

// LockTTL is the conversation lock's lifetime, defaults applied.
func (e *Engine) LockTTL() time.Duration { return e.opts.LockTTL }

// ComputeTokens reports whether compute is bounded, and by how many tokens.
func (e *Engine) ComputeTokens() (bounded bool, n int) { return e.cpu != nil, cap(e.cpu) }

// Dispatches reports whether the ticket hands its conversation to a worker.
func (t Ticket) Dispatches() bool { return t.dispatch != nil }

// Unreached lists, for a reply of self, what it wrote for each call that
// reaches none of the agents, and the agent it meant ("" when none).
func (e *Engine) Unreached(text string, agents []ens.Agent, self string) (wrote, meant []string) {
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.EnsDomain
	}
	for _, m := range unreachedCalls(text, agents, e.forms(names), self) {
		wrote = append(wrote, m.wrote)
		meant = append(meant, m.agent.EnsDomain)
	}
	return wrote, meant
}
