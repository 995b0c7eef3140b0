package agents

import (
	"context"
	"log/slog"
	"strings"

	"github.com/conclavehq/conclave/agents/turn"

	"github.com/conclavehq/conclave/ens"
)

// No loops (SPEC §14.7): a facilitator that says again what it said, or
// calls only agents that may not take another turn, is going round in
// circles; its reply is not posted and the conversation concludes
// ("stalled") instead of running to max_turns.

// Why a facilitator reply stalls the conversation.
const (
	stallRepeated = "it repeats one of its two previous replies"
	stallCapped   = "it calls only agents at their turn cap"
)

// sameReply reports whether two replies are equal after trimming, case
// and white space.
func sameReply(a, b string) bool {
	return strings.Join(strings.Fields(strings.ToLower(a)), " ") == strings.Join(strings.Fields(strings.ToLower(b)), " ")
}

// stalled says why the facilitator's reply (its :end: removed) is not to
// be posted, or "" when it is: it equals one of its recent replies, or
// every agent it calls is an expert or clone at its turn cap (turns and
// maxTurns: convState.AgentTurns, max_turns_per_agent).
func (r *roster) stalled(reply, self string, recent []string, turns map[string]int, maxTurns int) string {
	if strings.TrimSpace(reply) == "" {
		return ""
	}
	for _, prev := range recent {
		if sameReply(reply, prev) {
			return stallRepeated
		}
	}
	capped := 0
	for _, n := range findMentions(reply, r.Forms) {
		if n == self {
			continue
		}
		switch r.Agents[n].Role {
		case ens.RoleExpert, ens.RoleClone:
			if turns[n] >= maxTurns {
				capped++
				continue
			}
		}
		return "" // a live call
	}
	if capped > 0 {
		return stallCapped
	}
	return ""
}

// callsAgents reports whether text calls an agent other than self.
func (r *roster) callsAgents(text, self string) bool {
	for _, n := range findMentions(text, r.Forms) {
		if n != self {
			return true
		}
	}
	return false
}

// stall ends the exchange on a facilitator reply that goes round in
// circles: nothing is posted (a reply already streamed is replaced by
// the turn's notice), and the conclusion runs with reason "stalled".
func (s turnStep) stall(ctx context.Context, t *turn.Turn, why string) error {
	c := s.c
	c.log.Warn("the facilitator goes round in circles; its reply is not posted and the conversation concludes",
		slog.String(logTurn, t.ID), slog.String("why", why))
	t.Report.Outcome = "stalled"
	if _, ok := c.m.Read().Streamed(t.ID); ok {
		s.notify(ctx, t, "it was going round in circles ("+why+"); concluding")
	}
	c.conclude(ctx, &concludeRequest{Reason: concludeByStall})
	return nil
}
