// Package memory holds everything conclave keeps between events: thread
// messages, conversation state, memory sessions, channel registrations,
// pairings, wallet links, dedup marks, per-conversation locks and one-time
// nonces.
//
// One Store interface has two implementations that pass one conformance
// suite: Redis (shared by every replica, persistent) and in-process (the
// embedded default: one replica, lost on exit).
//
// The store knows nothing of conversation semantics: the conversation's
// engine state is an opaque blob owned by package agents. What the store
// guarantees is atomicity where the engine needs it (dedup marks with the
// message they guard, state writes guarded by the lock token) and bounded
// retention.
package memory

import (
	"context"
	"errors"
	"time"
)

// Errors callers branch on.
var (
	// ErrNotFound: the conversation, message, nonce or record does not exist.
	ErrNotFound = errors.New("memory: not found")
	// ErrLocked: another holder has the conversation's lock.
	ErrLocked = errors.New("memory: conversation is locked")
	// ErrLockLost: the lock expired or was taken over; the holder must stop
	// without writing or posting.
	ErrLockLost = errors.New("memory: lock lost")
)

// DedupTTL is how long event and message dedup marks are kept.
const DedupTTL = 24 * time.Hour

// Message is one message of a Slack thread as the store keeps it. The TS
// (Slack's message timestamp) is unique within a conversation and orders the
// thread.
type Message struct {
	TS      string `json:"ts"`
	UserID  string `json:"user,omitempty"`  // Slack user who wrote it; empty for conclave's own posts
	BotID   string `json:"bot,omitempty"`   // set for other apps' bot messages
	Agent   string `json:"agent,omitempty"` // ENS name of the authoring agent (conclave posts, paired human agents)
	Kind    string `json:"kind"`            // engine-defined: person, agent, human, bot, note, …
	Subtype string `json:"subtype,omitempty"`
	Raw     string `json:"raw,omitempty"`  // text as Slack carries it
	Text    string `json:"text"`           // normalised text used for prompts and matching
	Name    string `json:"name,omitempty"` // author's display name at the time of writing
	TurnID  string `json:"turn,omitempty"` // the turn that posted it (agent posts)
	// Meta carries engine-defined extras (threading outcome, …).
	Meta map[string]string `json:"meta,omitempty"`
	At   time.Time         `json:"at"`
	// Trace is the W3C traceparent of the span that received it, when
	// traces are exported (OpenTelemetry).
	Trace string `json:"trace,omitempty"`
}

// Conversation is the stored record of one thread. State is owned by the
// engine (package agents) and stored verbatim.
type Conversation struct {
	ID       string `json:"id"`
	Team     string `json:"team,omitempty"`
	Channel  string `json:"channel"`
	ThreadTS string `json:"thread_ts"`
	State    []byte `json:"state,omitempty"`
}

// Snapshot is a conversation's record and its messages, oldest first, read
// in one round trip.
type Snapshot struct {
	// Exists is false when nothing has been stored for the conversation yet
	// (Conversation then holds only the ID).
	Exists       bool
	Conversation Conversation
	Messages     []Message
}

// Lock is a held per-conversation lock. Token identifies the holder.
type Lock struct {
	ConversationID string
	Token          string
}

// Lookup names small records read in the same round trip as another call
// (Lookup, AcquireAndLoad): what handling an event or a step needs besides
// the conversation. An empty field reads nothing.
type Lookup struct {
	Channel      string // the agents added to this channel at run time
	User         string // the human agent paired with this Slack user
	Conversation string // whether this conversation exists
	// Spent, when set, reads today's budget totals as UsageLog.Spent
	// does, so that a turn's budgets are checked with the read that loads
	// its conversation. RecordLooked leaves it unread.
	Spent *SpentQuery
}

// SpentQuery names the budget totals a Lookup reads: the workspace's, a
// channel's (none when "") and each person's of People.
type SpentQuery struct {
	Channel string
	People  []string
}

// Found is what a Lookup read.
type Found struct {
	ChannelAgents []string // as ChannelAgents returns them
	HumanAgent    string   // "" when Lookup.User is paired with none
	Exists        bool     // Lookup.Conversation exists (as Snapshot.Exists)
	// Spent is, when Lookup.Spent was set, what UsageLog.Spent reads for
	// each person of it and for "", with its channel, keyed by person.
	Spent map[string]Spent
}

// SessionEntry is one message of a memory session.
type SessionEntry struct {
	Role           string `json:"role"`             // user, assistant or system
	Content        string `json:"content"`          // the text, without any author prefix
	Author         string `json:"author,omitempty"` // "<Name> (<ENS or person>)" for user entries from a conversation
	ConversationID string `json:"conv,omitempty"`   // empty for hydrated entries
	TS             string `json:"ts,omitempty"`     // Slack ts of the message it came from
	// At is when the entry was stored: what the caller gives, else the
	// store's clock at the append. Entries written by versions that did not
	// stamp it read as the zero time.
	At time.Time `json:"at"`
}

// SessionAppend appends entries to one session of one namespace.
type SessionAppend struct {
	Namespace string // whose memory: an agent's ENS name, or ENS name + scope (see package agents)
	Key       string // the session key (business key or group id)
	Entries   []SessionEntry
}

// Commit is everything one turn writes, applied only while the lock is held.
type Commit struct {
	// Conversation is stored as given (its State replaces the old one).
	Conversation Conversation
	// Messages are upserted by TS.
	Messages []Message
	// Sessions are appended, each trimmed to the store's session bound.
	Sessions []SessionAppend
	// Deadline is when the conversation next needs attention without a new
	// message (inactivity, a call timing out); zero clears it.
	Deadline time.Time
	// Release releases the lock once c is applied, as ReleaseLock does, in
	// the same round trip (when c is not applied the lock is not released).
	Release bool
	// PendingPosts is how many posts of the conversation wait to be made
	// (its outbox); PendingPosts (the method) sums them over every
	// conversation.
	PendingPosts int
	// Traces are added to the conversation's turn traces, after those
	// kept, within Options.TraceMaxBytes, and kept Options.TraceRetention;
	// past Options.TraceTotalMaxBytes other conversations' traces go. The
	// thread (Conversation's Channel and ThreadTS) then leads to them
	// (TraceRef).
	Traces []TurnTrace
	// Usage is added to the counters of the store's current UTC day
	// (UsageLog).
	Usage []Usage
}

// Store is conclave's persistence. All methods are safe for concurrent use.
type Store interface {
	// RecordMessage stores an inbound message of conversation (team,
	// channel, threadTS) and marks the conversation pending, atomically with
	// setting dedup marks for eventID (when not empty) and channel+m.TS, kept
	// DedupTTL. It reports false, and changes nothing else, when either mark
	// already exists, or when the conversation already holds a message with
	// m.TS; the conversation is then still marked pending, so a retry of a
	// message recorded but not yet handled is handled. A Slack message
	// belongs to exactly one conversation, so the marks are kept per
	// conversation. Every write to a conversation (this one, UpdateMessage,
	// DeleteMessage, Commit) restarts its retention clock.
	RecordMessage(ctx context.Context, conv Conversation, m Message, eventID string) (recorded bool, err error)
	// UpdateMessage replaces the text of a stored message (an edit).
	// ErrNotFound when the message is unknown.
	UpdateMessage(ctx context.Context, convID, ts, raw, text string) error
	// DeleteMessage removes a stored message. Deleting an unknown message is
	// not an error.
	DeleteMessage(ctx context.Context, convID, ts string) error
	// Snapshot reads a conversation without a lock (for inspection).
	Snapshot(ctx context.Context, convID string) (Snapshot, error)

	// MarkPending records that the conversation has work to look at.
	MarkPending(ctx context.Context, convID string) error
	// Due lists up to limit conversations (all when limit <= 0) that are
	// pending, or whose deadline is at or before now: pending ones first,
	// longest pending first, then by deadline, earliest first. A pending
	// mark outlives the conversation's retention (Load then reads a
	// snapshot that does not exist and clears it); a deadline does not.
	Due(ctx context.Context, now time.Time, limit int) ([]string, error)

	// AcquireLock takes the conversation's lock for ttl (at least a
	// millisecond). ErrLocked when someone else holds it. Lock expiry is
	// measured by the store (Redis' clock), not by the caller.
	AcquireLock(ctx context.Context, convID string, ttl time.Duration) (Lock, error)
	// RenewLock extends a held lock. ErrLockLost when it is no longer held.
	RenewLock(ctx context.Context, l Lock, ttl time.Duration) error
	// CheckLock reports ErrLockLost when l is no longer held.
	CheckLock(ctx context.Context, l Lock) error
	// AcquireAndLoad takes the conversation's lock as AcquireLock does and,
	// holding it, loads the conversation as Load does and reads q, all in
	// one round trip. ErrLocked when someone else holds the lock (nothing is
	// loaded or cleared then).
	AcquireAndLoad(ctx context.Context, convID string, ttl time.Duration, q Lookup) (Lock, Snapshot, Found, error)
	// Load clears the conversation's pending mark and reads its snapshot,
	// under the lock. ErrLockLost when l is no longer held.
	//
	// Work a holder took stays due for the others when its lock would
	// expire: Load leaves a conversation that was pending or due listed by
	// Due from l's expiry on (a later deadline stays as it is). A holder
	// that stops without committing leaves it so; one that wants its work
	// taken up at once marks the conversation pending before it releases.
	Load(ctx context.Context, l Lock) (Snapshot, error)
	// Commit applies c if l is still held (ErrLockLost otherwise, and
	// nothing is written), all or nothing, and reports whether the
	// conversation is pending: marked since Load cleared the mark (a
	// message arrived meanwhile). The conversation's ID is l's (a different
	// non-empty c.Conversation.ID is an error).
	//
	// On Redis Cluster the session appends of c land in their own hash
	// slots just after the conversation is written; a crash in between
	// leaves them in the conversation's outbox, applied exactly once by the
	// next Load.
	Commit(ctx context.Context, l Lock, c Commit) (pending bool, err error)
	// PendingPosts is the number of posts waiting to be made, over every
	// conversation, as their last commits said.
	PendingPosts(ctx context.Context) (int, error)
	// ReleaseLock releases l (a lock no longer held is not an error) and
	// reports whether the conversation was marked pending meanwhile (that
	// is: whether it is pending now; Load cleared the earlier mark).
	ReleaseLock(ctx context.Context, l Lock) (pending bool, err error)

	// AppendSession appends entries to a memory session, creating it, all
	// or nothing; the session then keeps only its newest entries up to the
	// store's bound.
	AppendSession(ctx context.Context, a SessionAppend) error
	// ReadSession returns the newest n entries of a session (all when n <=
	// 0), oldest first. An unknown session reads as empty.
	ReadSession(ctx context.Context, namespace, key string, n int) ([]SessionEntry, error)
	// Sessions lists the session keys of a namespace, sorted.
	Sessions(ctx context.Context, namespace string) ([]string, error)
	// RecentSessions lists at most n session keys of a namespace (all
	// when n <= 0), the one appended to most recently first. Keys the
	// store has no time of use for (written by an earlier version) follow,
	// sorted.
	RecentSessions(ctx context.Context, namespace string, n int) ([]string, error)

	// Traces reads a conversation's turn traces and the feedback on them;
	// a conversation with none reads as empty.
	Traces(ctx context.Context, convID string) (Traces, error)
	// TraceRef returns the conversation whose traces a thread leads to
	// (ErrNotFound when none are kept).
	TraceRef(ctx context.Context, channel, threadTS string) (string, error)
	// RecordFeedback records a person's rating of a turn, replacing the
	// one that person gave the same turn before; it is kept
	// Options.TraceRetention.
	RecordFeedback(ctx context.Context, convID string, f Feedback) error

	// Lookup reads the records q names, in one round trip.
	Lookup(ctx context.Context, q Lookup) (Found, error)

	UsageLog

	// ChannelAgents lists the ENS names registered in a channel at run
	// time, in the order they were added.
	ChannelAgents(ctx context.Context, channel string) ([]string, error)
	// AddChannelAgent registers an agent; false when it was already there.
	AddChannelAgent(ctx context.Context, channel, ens string) (added bool, err error)
	// RemoveChannelAgent unregisters an agent; false when it was absent.
	RemoveChannelAgent(ctx context.Context, channel, ens string) (removed bool, err error)

	// PairHuman pairs a Slack user with a human agent, one to one: an
	// earlier pairing of either side is replaced. It returns the ENS name
	// the user was paired with before and the user the agent was paired
	// with before (empty when none). Pairing the same two again changes
	// nothing and returns them (prevAgent == ens, prevUser == userID).
	PairHuman(ctx context.Context, userID, ens string) (prevAgent, prevUser string, err error)
	// HumanAgent returns the human agent paired with a Slack user
	// (ErrNotFound when none).
	HumanAgent(ctx context.Context, userID string) (string, error)
	// HumanUser returns the Slack user paired with a human agent
	// (ErrNotFound when none).
	HumanUser(ctx context.Context, ens string) (string, error)
	// LinkWallet links a verified address to a Slack user (idempotent).
	LinkWallet(ctx context.Context, userID, address string) error
	// Wallets lists the addresses linked to a Slack user.
	Wallets(ctx context.Context, userID string) ([]string, error)

	// PutNonce stores a one-time value for ttl.
	PutNonce(ctx context.Context, nonce string, value []byte, ttl time.Duration) error
	// PeekNonce reads a nonce without spending it (ErrNotFound when unknown,
	// spent or expired).
	PeekNonce(ctx context.Context, nonce string) ([]byte, error)
	// SpendNonce reads and deletes a nonce atomically (ErrNotFound when
	// unknown, spent or expired).
	SpendNonce(ctx context.Context, nonce string) ([]byte, error)

	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store's connections.
	Close() error
}

// Intake is an inbound message to record together with the small records
// whether to record it depends on: the store reads Lookup and, when what
// it read meets every condition set, records the message as
// RecordMessage does, all in one round trip (Recorder.RecordLooked).
type Intake struct {
	Conversation Conversation
	Message      Message
	EventID      string
	// Lookup is read as Lookup reads it. Its Conversation, when set, is
	// Conversation.ID.
	Lookup Lookup
	// Conditions on what Lookup read. When one is not met nothing is
	// written (not even the pending mark) and the caller decides with what
	// was read.
	NeedChannelAgents bool // Lookup.Channel has at least one agent
	NeedUnpaired      bool // Lookup.User is paired with no human agent
	NeedExists        bool // Lookup.Conversation exists
}

// Intaken is what RecordLooked read and did.
type Intaken struct {
	Found    Found // what Lookup read, whether or not the conditions were met
	Met      bool  // the conditions were met and the message went to be recorded
	Recorded bool  // as RecordMessage reports (false for a duplicate); only when Met
}

// Recorder is a store that records an inbound message with the reads
// its recording depends on in one round trip. Both stores implement it;
// it stays out of Store so that a wrapper of a Store (embedding it, to
// observe or fail RecordMessage) is not bypassed unknowingly: such a
// wrapper is no Recorder unless it says so.
type Recorder interface {
	// RecordLooked reads in.Lookup and, when the conditions of in are met,
	// records in.Message as RecordMessage does. On Redis Cluster, where the
	// records live in other hash slots than the conversation, it takes two
	// round trips (the reads, then the record).
	RecordLooked(ctx context.Context, in Intake) (Intaken, error)
}

// meets reports whether what f read meets in's conditions.
func (in Intake) meets(f Found) bool {
	return !(in.NeedChannelAgents && len(f.ChannelAgents) == 0 ||
		in.NeedUnpaired && f.HumanAgent != "" ||
		in.NeedExists && !f.Exists)
}

func checkIntake(in Intake) error {
	if err := checkRecord(in.Conversation, in.Message); err != nil {
		return err
	}
	if in.Lookup.Conversation != "" && in.Lookup.Conversation != in.Conversation.ID {
		return errors.New("the intake's lookup names another conversation")
	}
	return nil
}
