package agents

import (
	"context"
	"time"

	"github.com/conclavehq/conclave/memory"
)

// The engine's ports on the store: each as small as its user needs, and
// each passed to New on its own (Deps). memory.InProcess and memory.Redis
// satisfy them all; the engine never names the store's own interface.
// Chat, Model, Prompts, Resolver and Toolbox, the other ports, are
// declared beside their users.

// Inbound records what the transport hands the engine (Record): one
// look-up of what an event needs, then one write. A store that is also a
// memory.Recorder (both of memory's are) does both in one round trip.
type Inbound interface {
	// Lookup reads what recording an event needs: the channel's run-time
	// agents, the author's pairing, whether a reply's thread is known.
	Lookup(ctx context.Context, q memory.Lookup) (memory.Found, error)
	// RecordMessage stores a message with its dedup marks and marks its
	// conversation pending; recorded is false for a duplicate.
	RecordMessage(ctx context.Context, conv memory.Conversation, m memory.Message, eventID string) (recorded bool, err error)
	UpdateMessage(ctx context.Context, convID, ts, raw, text string) error
	DeleteMessage(ctx context.Context, convID, ts string) error
}

// Conversations is a turn's store protocol: load under the lock (one
// round trip), commit the state with its pending posts (one round trip
// per commit), release or settle.
type Conversations interface {
	// AcquireAndLoad takes a conversation's lock and loads it, with what
	// q asks of the channel, in one round trip.
	AcquireAndLoad(ctx context.Context, convID string, ttl time.Duration, q memory.Lookup) (memory.Lock, memory.Snapshot, memory.Found, error)
	// Load reloads a conversation whose lock is held.
	Load(ctx context.Context, l memory.Lock) (memory.Snapshot, error)
	// Commit writes state, messages, session entries and the deadline,
	// proving the lock; pending reports a message recorded meanwhile.
	Commit(ctx context.Context, l memory.Lock, c memory.Commit) (pending bool, err error)
	// Snapshot reads a conversation without its lock.
	Snapshot(ctx context.Context, convID string) (memory.Snapshot, error)
	// Due lists conversations with work due at now.
	Due(ctx context.Context, now time.Time, limit int) ([]string, error)
	// MarkPending leaves a conversation due at once.
	MarkPending(ctx context.Context, convID string) error
}

// LockChecker proves a lock still held (before a post found uncertain).
type LockChecker interface {
	CheckLock(ctx context.Context, l memory.Lock) error
}

// Locks keeps and gives back a conversation's lock.
type Locks interface {
	LockChecker
	RenewLock(ctx context.Context, l memory.Lock, ttl time.Duration) error
	ReleaseLock(ctx context.Context, l memory.Lock) (pending bool, err error)
}

// Sessions reads the memory sessions of experts, clones and humans
// (appends go with a conversation's commit).
type Sessions interface {
	ReadSession(ctx context.Context, namespace, key string, n int) ([]memory.SessionEntry, error)
	Sessions(ctx context.Context, namespace string) ([]string, error)
	RecentSessions(ctx context.Context, namespace string, n int) ([]string, error)
}

// Registry holds the agents added to channels at run time.
type Registry interface {
	ChannelAgents(ctx context.Context, channel string) ([]string, error)
	AddChannelAgent(ctx context.Context, channel, ens string) (added bool, err error)
	RemoveChannelAgent(ctx context.Context, channel, ens string) (removed bool, err error)
}

// Pairings reads who is paired with whom (the pairing rules write them,
// see agents/pairing).
type Pairings interface {
	HumanAgent(ctx context.Context, userID string) (string, error)
	HumanUser(ctx context.Context, ens string) (string, error)
}
