package agents

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ConversationID is the id of the conversation held by a Slack thread: the
// UUIDv5, in RFC 9562's URL namespace, of "team/channel/thread_ts". A
// name-based id lets every replica derive the same id for a thread without
// asking anyone.
func ConversationID(team, channel, threadTS string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte(team+"/"+channel+"/"+threadTS)).String()
}

// GroupSessionID is the memory session id shared by clones and human agents
// in a conversation. names are the ENS names of the group — the agents that
// took part in the conversation (wrote in the thread or were named in it),
// each clone replaced by the human it was forked from. They are trimmed,
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

// TSTime reads a Slack ts ("1700000000.000100") as a time, in UTC: zero
// when it is not one. It is the one conversion of a ts to a time.
func TSTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s <= 0 {
		return time.Time{}
	}
	frac = (frac + "000000")[:6]
	us, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		us = 0
	}
	return time.Unix(s, us*1000).UTC()
}
