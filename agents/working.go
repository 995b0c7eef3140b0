package agents

import (
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
)

// Working is told when a conversation's turns start and end, so that the
// transport can show who is working in the thread (Slack's thread
// status). Its methods are called from the turns themselves and must not
// block; a turn may end without a reply (a silent one, a failure).
type Working interface {
	TurnStarted(w Work)
	TurnEnded(w Work)
}

// Work is one running turn as Working sees it.
type Work struct {
	Channel  string
	ThreadTS string
	TurnID   string
	Agent    string // the agent's name, as its posts show it
	// Facilitator: the turn is the facilitator's (it "is thinking");
	// any other agent's turn is a question asked of it.
	Facilitator bool
}

// work is t as Working sees it.
func (s turnStep) work(t *turn.Turn) Work {
	c := s.c
	return Work{
		Channel: c.conv.Channel, ThreadTS: c.conv.ThreadTS, TurnID: t.ID,
		Agent: t.Agent.Name, Facilitator: t.Agent.Role == ens.RoleFacilitator,
	}
}

// working tells Working that t started; done tells it that t ended.
func (s turnStep) working(t *turn.Turn) {
	c := s.c
	if c.e.deps.Working != nil {
		c.e.deps.Working.TurnStarted(s.work(t))
	}
}
