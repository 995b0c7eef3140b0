package memory

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Defaults of the retention bounds (config keys memory.max_session_messages
// and memory.conversation_ttl).
const (
	DefaultMaxSessionMessages = 1000
	DefaultConversationTTL    = 720 * time.Hour
)

// Options are the settings both implementations share.
type Options struct {
	// MaxSessionMessages bounds each memory session to its newest entries
	// (DefaultMaxSessionMessages when <= 0).
	MaxSessionMessages int
	// ConversationTTL is how long a conversation is kept after its last
	// write (DefaultConversationTTL when <= 0).
	ConversationTTL time.Duration
	// TraceRetention is how long a conversation's turn traces are kept
	// after the last commit that added one (DefaultTraceRetention when
	// <= 0); feedback is kept as long after its own write.
	TraceRetention time.Duration
	// TraceMaxBytes bounds a conversation's stored (compressed) traces:
	// the oldest are dropped first, the newest always kept
	// (DefaultTraceMaxBytes when <= 0).
	TraceMaxBytes int
	// TraceTotalMaxBytes bounds the stored traces of all conversations
	// together: past it, whole conversations' traces go, the least
	// recently traced first, the one just traced never
	// (DefaultTraceTotalMaxBytes when <= 0). See docs/memory.md for how
	// closely each store holds it.
	TraceTotalMaxBytes int
	// Now is the store's clock (time.Now when nil). The in-process store
	// measures every expiry with it; the Redis store only orders pending
	// conversations with it (Redis measures expiry itself).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxSessionMessages <= 0 {
		o.MaxSessionMessages = DefaultMaxSessionMessages
	}
	if o.ConversationTTL <= 0 {
		o.ConversationTTL = DefaultConversationTTL
	}
	if o.TraceRetention <= 0 {
		o.TraceRetention = DefaultTraceRetention
	}
	if o.TraceMaxBytes <= 0 {
		o.TraceMaxBytes = DefaultTraceMaxBytes
	}
	if o.TraceTotalMaxBytes <= 0 {
		o.TraceTotalMaxBytes = DefaultTraceTotalMaxBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

var errNoConversation = errors.New("conversation id is empty")

func checkRecord(conv Conversation, m Message) error {
	if conv.ID == "" {
		return errNoConversation
	}
	if m.TS == "" {
		return errors.New("message ts is empty")
	}
	return nil
}

func checkAcquire(convID string, ttl time.Duration) error {
	if convID == "" {
		return fmt.Errorf("memory: acquire lock: %w", errNoConversation)
	}
	if err := checkTTL(ttl); err != nil {
		return fmt.Errorf("memory: acquire lock %s: %w", convID, err)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("ttl %v is under a millisecond", ttl)
	}
	return nil
}

// checkCommit checks a commit under l, its session appends included, and
// returns the conversation to store.
func checkCommit(l Lock, c Commit) (Conversation, error) {
	conv := c.Conversation
	if conv.ID != "" && conv.ID != l.ConversationID {
		return conv, fmt.Errorf("commit of conversation %q under the lock of %q", conv.ID, l.ConversationID)
	}
	conv.ID = l.ConversationID
	for _, m := range c.Messages {
		if m.TS == "" {
			return conv, errors.New("message ts is empty")
		}
	}
	return conv, checkSessionAppends(c.Sessions)
}

func checkSessionAppends(as []SessionAppend) error {
	for _, a := range as {
		if a.Namespace == "" || a.Key == "" {
			return fmt.Errorf("session %q of namespace %q: namespace and key are required", a.Key, a.Namespace)
		}
	}
	return nil
}

// stamped returns the appends with every entry stored without a time
// given now: a session entry always carries when it was stored (package
// agents dates memory with it). Entries with a time keep theirs.
func stamped(as []SessionAppend, now time.Time) []SessionAppend {
	out := slices.Clone(as)
	for i, a := range out {
		if !slices.ContainsFunc(a.Entries, func(e SessionEntry) bool { return e.At.IsZero() }) {
			continue
		}
		out[i].Entries = slices.Clone(a.Entries)
		for j := range out[i].Entries {
			if out[i].Entries[j].At.IsZero() {
				out[i].Entries[j].At = now
			}
		}
	}
	return out
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// compareTS orders Slack timestamps ("1700000000.000100") numerically.
func compareTS(a, b string) int {
	ia, fa, _ := strings.Cut(a, ".")
	ib, fb, _ := strings.Cut(b, ".")
	ia, ib = strings.TrimLeft(ia, "0"), strings.TrimLeft(ib, "0")
	if c := cmp.Compare(len(ia), len(ib)); c != 0 {
		return c
	}
	if c := cmp.Compare(ia, ib); c != 0 {
		return c
	}
	n := max(len(fa), len(fb))
	fa += strings.Repeat("0", n-len(fa))
	fb += strings.Repeat("0", n-len(fb))
	if c := cmp.Compare(fa, fb); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

func sortMessages(ms []Message) {
	slices.SortFunc(ms, func(a, b Message) int { return compareTS(a.TS, b.TS) })
}

// dueItem is one conversation in Due's answer, before ordering.
type dueItem struct {
	id      string
	pending bool
	at      time.Time // pending since, or the deadline
}

func orderDue(items []dueItem, limit int) []string {
	slices.SortFunc(items, func(a, b dueItem) int {
		if a.pending != b.pending {
			if a.pending {
				return -1
			}
			return 1
		}
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	if limit > 0 && len(items) > limit {
		items = items[:limit]
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.id
	}
	return ids
}

func cloneMessage(m Message) Message {
	m.Meta = maps.Clone(m.Meta)
	return m
}

func cloneConversation(c Conversation) Conversation {
	c.State = slices.Clone(c.State)
	return c
}
