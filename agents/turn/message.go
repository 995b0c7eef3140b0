package turn

import "time"

// Message is a message of the thread as a turn reads it: who wrote it,
// what it says and when. The engine converts the store's messages into it
// at its edge; a turn never sees the store's type.
type Message struct {
	TS    string    // its Slack ts, which orders the thread
	Kind  string    // the engine's kind: person, agent, human, bot, …
	Agent string    // the ENS name of the agent that wrote it, if one did
	Name  string    // its author's display name when written
	Text  string    // its normalised text, as prompts see it
	At    time.Time // when it was written
}
