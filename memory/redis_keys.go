package memory

import (
	"fmt"
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
type keySchema struct {
	prefix string
	shards []shardKeys // by shard, built once: every store call names some
}

// shardKeys are the keys of one shard.
type shardKeys struct{ base, due, posts string }

func newKeySchema(prefix string) keySchema {
	k := keySchema{prefix: prefix, shards: make([]shardKeys, dueShards)}
	for i := range k.shards {
		base := fmt.Sprintf("%s{c%02d}:", prefix, i)
		k.shards[i] = shardKeys{base: base, due: base + "due", posts: base + "posts"}
	}
	return k
}

func shardOf(convID string) int {
	// FNV-1a, 32 bits, as hash/fnv computes it, without its allocation.
	h := uint32(2166136261)
	for i := range len(convID) {
		h ^= uint32(convID[i])
		h *= 16777619
	}
	return int(h % dueShards)
}

func (k keySchema) shard(i int) string { return k.shards[i].base }

func (k keySchema) due(shard int) string { return k.shards[shard].due }

// posts counts the pending posts of a shard's conversations (a hash:
// conversation → count).
func (k keySchema) posts(shard int) string { return k.shards[shard].posts }

// convKeys are the keys of one conversation, all in one hash slot.
type convKeys struct {
	due, conv, msgs, lock, outbox, seen, posts string
}

func (k keySchema) conv(id string) convKeys {
	sh := k.shards[shardOf(id)]
	e := esc(id)
	// The five keys are slices of one string: one allocation, not five.
	var b strings.Builder
	b.Grow(5*(len(sh.base)+len(e)) + len("conv:msgs:lock:outbox:seen::"))
	var ends [5]int
	for i, kind := range [...]string{"conv:", "msgs:", "lock:", "outbox:", "seen:"} {
		b.WriteString(sh.base)
		b.WriteString(kind)
		b.WriteString(e)
		if kind == "seen:" {
			b.WriteByte(':')
		}
		ends[i] = b.Len()
	}
	all := b.String()
	return convKeys{
		due: sh.due, posts: sh.posts,
		conv: all[:ends[0]], msgs: all[ends[0]:ends[1]], lock: all[ends[1]:ends[2]],
		outbox: all[ends[2]:ends[3]], seen: all[ends[3]:ends[4]],
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
