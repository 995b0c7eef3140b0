package memory

import (
	"fmt"
	"hash/fnv"
	"testing"
)

// The shard of a conversation places its keys: it must stay FNV-1a of
// its id, as stored conversations were placed.
func TestShardOfIsFNV1a(t *testing.T) {
	for i := range 1000 {
		id := fmt.Sprintf("T%d/C0%d/17000000%02d.%06d", i%7, i, i%100, i*37)
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		if got, want := shardOf(id), int(h.Sum32()%dueShards); got != want {
			t.Fatalf("shardOf(%q) = %d, want %d", id, got, want)
		}
	}
}

func TestConvKeys(t *testing.T) {
	k := newKeySchema("conclave:")
	id := "T1/C1/1700000000.000100:{x}"
	base := fmt.Sprintf("conclave:{c%02d}:", shardOf(id))
	e := "T1/C1/1700000000.000100%3A%7Bx%7D"
	want := convKeys{
		due: base + "due", posts: base + "posts",
		conv: base + "conv:" + e, msgs: base + "msgs:" + e, lock: base + "lock:" + e,
		outbox: base + "outbox:" + e, seen: base + "seen:" + e + ":",
	}
	if got := k.conv(id); got != want {
		t.Errorf("conv(%q) =\n%+v\nwant\n%+v", id, got, want)
	}
}

func BenchmarkConvKeys(b *testing.B) {
	k := newKeySchema("conclave:")
	b.ReportAllocs()
	for b.Loop() {
		_ = k.conv("T1/C1/1700000000.000100")
	}
}
