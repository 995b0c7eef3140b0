package memory

import (
	"context"
	"errors"
	"slices"
	"time"
)

// SessionInfo describes one memory session for an operator (conclave
// memory list).
type SessionInfo struct {
	Key     string
	Entries int
	// Bytes is the size of the entries' contents, as the model reads
	// them (the store's own encoding is not counted).
	Bytes int
	// Updated is when the newest entry was stored (zero for entries
	// written by versions that did not stamp them).
	Updated time.Time
}

// Forgotten is what ForgetSession removed.
type Forgotten struct {
	Entries int
	// Conversations are the conversations the session's entries came from,
	// sorted; their turn traces and the feedback on them were removed.
	Conversations []string
}

// Manager lets an operator see and remove memory sessions. Both stores
// implement it; it stays out of Store, which turns use, because nothing
// in a conversation lists or forgets sessions.
type Manager interface {
	// SessionInfos describes the sessions of a namespace whose key starts
	// with prefix (all when empty), sorted by key.
	SessionInfos(ctx context.Context, namespace, prefix string) ([]SessionInfo, error)
	// ForgetSession removes a session: its entries, its place in the
	// namespace's indexes, and the turn traces (and their feedback) of
	// every conversation its entries came from, since those turns sent
	// the session's content to the model. ErrNotFound when the namespace
	// holds no such session.
	ForgetSession(ctx context.Context, namespace, key string) (Forgotten, error)
}

var (
	_ Manager = (*InProcess)(nil)
	_ Manager = (*Redis)(nil)
)

// errNoSessionKey: a session is named by a key.
var errNoSessionKey = errors.New("memory: a session key is needed")

// sessionInfo sums up a session's entries.
func sessionInfo(key string, entries []SessionEntry) SessionInfo {
	info := SessionInfo{Key: key, Entries: len(entries)}
	for _, e := range entries {
		info.Bytes += len(e.Content)
		if e.At.After(info.Updated) {
			info.Updated = e.At
		}
	}
	return info
}

// sourceConversations lists, sorted and once each, the conversations
// entries came from.
func sourceConversations(entries []SessionEntry) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		if e.ConversationID != "" && !seen[e.ConversationID] {
			seen[e.ConversationID] = true
			out = append(out, e.ConversationID)
		}
	}
	slices.Sort(out)
	return out
}
