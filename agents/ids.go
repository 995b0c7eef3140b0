package agents

import (
	"crypto/sha1" // #nosec G505 -- RFC 9562 UUIDv5 is defined with SHA-1; ids, not security
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// namespaceURL is RFC 9562's URL namespace. Conversation ids are name-based
// UUIDs in it, so every replica derives the same id for a thread without
// asking anyone.
var namespaceURL = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// uuidV5 is the SHA-1 name-based UUID of name in namespace ns (RFC 9562 §5.5).
func uuidV5(ns [16]byte, name string) string {
	h := sha1.New() // #nosec G401 -- RFC 9562 UUIDv5 is defined with SHA-1; ids, not security
	h.Write(ns[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// ConversationID is the id of the conversation held by a Slack thread: the
// UUIDv5, in the URL namespace, of "team/channel/thread_ts".
func ConversationID(team, channel, threadTS string) string {
	return uuidV5(namespaceURL, team+"/"+channel+"/"+threadTS)
}

// GroupSessionID is the memory session id shared by clones and human agents
// in a conversation. names are the ENS names of the group — the channel's
// registered agents plus the human agents who wrote in the thread, each
// clone replaced by the human it was forked from. They are trimmed,
// lowercased, de-duplicated and sorted, joined by "\n", and the id is "grp-"
// followed by the first 32 hex characters of the SHA-256 of that text.
func GroupSessionID(names []string) string {
	seen := make(map[string]bool, len(names))
	var group []string
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		group = append(group, n)
	}
	sort.Strings(group)
	sum := sha256.Sum256([]byte(strings.Join(group, "\n")))
	return "grp-" + hex.EncodeToString(sum[:])[:32]
}
