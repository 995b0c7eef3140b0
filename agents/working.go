package agents

import "github.com/conclavehq/conclave/ens"

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
func (c runner) work(t *turnRun) Work {
	return Work{
		Channel: c.conv.Channel, ThreadTS: c.conv.ThreadTS, TurnID: t.id,
		Agent: t.agent.Name, Facilitator: t.agent.Role == ens.RoleFacilitator,
	}
}

// working tells Working that t started; done tells it that t ended.
func (c runner) working(t *turnRun) {
	if c.deps.Working != nil {
		c.deps.Working.TurnStarted(c.work(t))
	}
}
