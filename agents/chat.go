// Package agents is conclave's domain: who is triggered by a message, what
// each role sees, the conversation lifecycle (start, threading, body,
// conclude, restart), turns run one at a time per conversation across
// replicas, and the loop guards.
//
// It consumes small interfaces (a chat transport, a model, a store, an
// identity resolver, prompts) so each can be faked in tests.
package agents

import (
	"context"
	"time"
)

// EventKind says what happened to a message.
type EventKind int

// The kinds of message events.
const (
	EventMessage EventKind = iota // a new message
	EventEdited                   // message_changed: new text, no turn
	EventDeleted                  // message_deleted: remove from history
)

// Event is one inbound Slack message event, decoded and normalised by the
// transport. The transport drops DMs, joins and conclave's own posts before
// they get here.
type Event struct {
	ID       string // Slack event_id; empty when not from the Events API
	Kind     EventKind
	Team     string
	Channel  string
	TS       string // the message's ts (for edits and deletions: the edited or deleted message)
	ThreadTS string // empty for a top-level message
	UserID   string // author's Slack user; empty for some bot messages
	BotID    string // set for other apps' bot messages
	Subtype  string // "", thread_broadcast, file_share, me_message, bot_message, …
	Raw      string // text as Slack sent it (for file_share: plus "[file: name]")
	Text     string // normalised: <@U…> → @Display Name, <#C…|n> → #n, <url|label> → label (url), entities unescaped
	UserName string // author's display name (else real name, else user name)
	At       time.Time
}

// Reply is one post of an agent in a thread.
type Reply struct {
	Channel  string
	ThreadTS string
	Text     string // model text, Markdown; the transport escapes it for Slack
	Username string // the agent's name
	IconURL  string // the agent's avatar, if any
	TurnID   string // carried as message metadata, to find the post again
	// Mention lists Slack users to mention (paired users of named human
	// agents); the only mentions a post may contain.
	Mention []string
}

// Chat is what the engine needs of Slack.
type Chat interface {
	// PostReply posts r (split into several messages when long) and returns
	// the ts of the first message.
	PostReply(ctx context.Context, r Reply) (ts string, err error)
	// PostEphemeral shows text to one user in a channel.
	PostEphemeral(ctx context.Context, channel, user, text string) error
	// AddReaction and RemoveReaction set or clear an emoji on a message.
	AddReaction(ctx context.Context, channel, ts, name string) error
	RemoveReaction(ctx context.Context, channel, ts, name string) error
	// FindTurnPost reports whether a reply carrying turnID already exists in
	// the thread (for posting exactly once after an uncertain outcome), and
	// its ts.
	FindTurnPost(ctx context.Context, channel, threadTS, turnID string) (ts string, found bool, err error)
	// ThreadHistory returns up to limit latest messages of a thread, oldest
	// first, as events (root included when within the limit).
	ThreadHistory(ctx context.Context, channel, threadTS string, limit int) ([]Event, error)
	// ChannelDescription returns a channel's purpose, normalised.
	ChannelDescription(ctx context.Context, channel string) (string, error)
}
