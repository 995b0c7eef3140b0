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
	// Trace is the W3C traceparent of the transport's span of the event,
	// to which the spans of the turns it wakes are linked ("": none).
	Trace string
}

// Reply is one post of an agent in a thread.
type Reply struct {
	Channel  string
	ThreadTS string
	Text     string // model text, Markdown; the transport escapes it for Slack
	Username string // the agent's name
	IconURL  string // the agent's avatar, if any
	// TurnID is the post id: carried, with each part's index, as message
	// metadata, to find the post again.
	TurnID string
	// Mention lists Slack users to mention (paired users of named human
	// agents); the only mentions a post may contain.
	Mention []string
	// Posted holds the ts of the parts already posted, in order: they are
	// not posted again.
	Posted []string
	// Update is the ts of a message streamed as the first part: that
	// message is updated (chat.update) instead of a new one posted.
	Update string
	// Partial: Text is a streamed reply so far; only its first part is
	// posted or updated.
	Partial bool
	// Notice: Text is a ⚠️ notice (a turn that failed, an overloaded
	// conversation), not an agent's reply.
	Notice bool
	// Feedback, when set, puts 👍/👎 buttons under the last part; a press
	// hands it back to Engine.RecordFeedback.
	Feedback string
	// Recipient is the person the reply answers (a Slack user id): a
	// reply streamed natively in a channel is streamed to them.
	Recipient string
}

// PostError is a failed post as the transport classifies it. An error of
// PostReply that is not a *PostError is transient.
type PostError struct {
	Err error
	// Permanent: trying again cannot help (channel_not_found,
	// not_in_channel, is_archived, msg_too_long, …).
	Permanent bool
	// RetryAfter is how long Slack asked to wait (a rate limit).
	RetryAfter time.Duration
}

func (e *PostError) Error() string { return e.Err.Error() }
func (e *PostError) Unwrap() error { return e.Err }

// Chat is what the engine needs of Slack.
type Chat interface {
	// PostReply posts r, split into several messages (parts) when long,
	// skipping the parts in r.Posted, in order, and stops at the first
	// part that fails. It returns the ts of every part posted so far
	// (r.Posted's, then its own), with the error when a part failed.
	PostReply(ctx context.Context, r Reply) (posted []string, err error)
	// PostEphemeral shows text to one user in a channel.
	PostEphemeral(ctx context.Context, channel, user, text string) error
	// AddReaction and RemoveReaction set or clear an emoji on a message.
	AddReaction(ctx context.Context, channel, ts, name string) error
	RemoveReaction(ctx context.Context, channel, ts, name string) error
	// FindPost looks in the thread for the parts of the post with id
	// postID (for posting exactly once after an uncertain outcome): the ts
	// of its parts found, in order, up to the first one missing.
	FindPost(ctx context.Context, channel, threadTS, postID string) (posted []string, err error)
	// ThreadHistory returns up to limit latest messages of a thread, oldest
	// first, as events (root included when within the limit).
	ThreadHistory(ctx context.Context, channel, threadTS string, limit int) ([]Event, error)
	// ChannelDescription returns a channel's purpose, normalised.
	ChannelDescription(ctx context.Context, channel string) (string, error)
}

// The parts of Chat each user holds: the outbox and a streamed reply
// post and look posts up; the reactor sets emoji; the view reads a
// channel's description.
type (
	replyPoster interface {
		PostReply(ctx context.Context, r Reply) (posted []string, err error)
		FindPost(ctx context.Context, channel, threadTS, postID string) (posted []string, err error)
	}
	reactionSetter interface {
		AddReaction(ctx context.Context, channel, ts, name string) error
		RemoveReaction(ctx context.Context, channel, ts, name string) error
	}
)

// workerChat is Slack as the worker that holds a conversation calls it
// (the step, the outbox): the worker gives its CPU token back while it
// waits on a call (see Engine.cpu). The accounting is applied here once,
// around the port; only the worker's goroutine, which holds a token,
// calls through it (a streamed reply's updates and the reactor's emoji
// run on goroutines of their own, and call Chat as it is).
type workerChat struct {
	chat Chat
	cpu  cpuTokens
}

func (c workerChat) PostReply(ctx context.Context, r Reply) (posted []string, err error) {
	c.cpu.off(func() { posted, err = c.chat.PostReply(ctx, r) })
	return posted, err
}

func (c workerChat) FindPost(ctx context.Context, channel, threadTS, postID string) (posted []string, err error) {
	c.cpu.off(func() { posted, err = c.chat.FindPost(ctx, channel, threadTS, postID) })
	return posted, err
}

func (c workerChat) PostEphemeral(ctx context.Context, channel, user, text string) (err error) {
	c.cpu.off(func() { err = c.chat.PostEphemeral(ctx, channel, user, text) })
	return err
}

func (c workerChat) ThreadHistory(ctx context.Context, channel, threadTS string, limit int) (events []Event, err error) {
	c.cpu.off(func() { events, err = c.chat.ThreadHistory(ctx, channel, threadTS, limit) })
	return events, err
}

func (c workerChat) ChannelDescription(ctx context.Context, channel string) (desc string, err error) {
	c.cpu.off(func() { desc, err = c.chat.ChannelDescription(ctx, channel) })
	return desc, err
}
