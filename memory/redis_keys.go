package memory

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// dueShards is how many due indexes conversations are spread over. A
// conversation's keys share the hash tag of its shard, so that its pending
// mark and deadline change atomically with its records, on Redis Cluster
// too. Changing it moves every conversation's keys: it is fixed.
const dueShards = 16

// keyEscaper keeps hash-tag braces and the separator out of names taken
// from outside (session keys are business ids).
var keyEscaper = strings.NewReplacer("%", "%25", ":", "%3A", "{", "%7B", "}", "%7D")

func esc(s string) string { return keyEscaper.Replace(s) }

// keySchema builds every key the Redis store uses; docs/memory.md lists
// them.
type keySchema struct{ prefix string }

func shardOf(convID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(convID))
	return int(h.Sum32() % dueShards)
}

func (k keySchema) shard(i int) string { return fmt.Sprintf("%s{c%02d}:", k.prefix, i) }

func (k keySchema) due(shard int) string { return k.shard(shard) + "due" }

// posts counts the pending posts of a shard's conversations (a hash:
// conversation → count).
func (k keySchema) posts(shard int) string { return k.shard(shard) + "posts" }

// convKeys are the keys of one conversation, all in one hash slot.
type convKeys struct {
	due, conv, msgs, lock, outbox, seen, posts string
}

func (k keySchema) conv(id string) convKeys {
	s := shardOf(id)
	base := k.shard(s)
	e := esc(id)
	return convKeys{
		due:    k.due(s),
		conv:   base + "conv:" + e,
		msgs:   base + "msgs:" + e,
		lock:   base + "lock:" + e,
		outbox: base + "outbox:" + e,
		seen:   base + "seen:" + e + ":",
		posts:  k.posts(s),
	}
}

func (c convKeys) seenTS(ts string) string    { return c.seen + "ts:" + esc(ts) }
func (c convKeys) seenEvent(ev string) string { return c.seen + "ev:" + esc(ev) }

// sessionKeys are the keys of one namespace's memory, all in one hash slot.
type sessionKeys struct{ base string }

func (k keySchema) sessions(namespace string) sessionKeys {
	return sessionKeys{base: k.prefix + "{n:" + esc(namespace) + "}:"}
}

func (s sessionKeys) index() string                  { return s.base + "keys" }
func (s sessionKeys) recent() string                 { return s.base + "recent" }
func (s sessionKeys) list(key string) string         { return s.base + "s:" + esc(key) }
func (s sessionKeys) applied(commitID string) string { return s.base + "applied:" + commitID }

func (k keySchema) channel(ch string) string   { return k.prefix + "chan:" + esc(ch) }
func (k keySchema) pairByUser() string         { return k.prefix + "{pair}:by-user" }
func (k keySchema) pairByAgent() string        { return k.prefix + "{pair}:by-agent" }
func (k keySchema) wallets(user string) string { return k.prefix + "wallets:" + esc(user) }
func (k keySchema) nonce(nonce string) string  { return k.prefix + "nonce:" + esc(nonce) }
