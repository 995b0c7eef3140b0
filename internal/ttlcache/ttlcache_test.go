package ttlcache

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func entry(v string, fetched time.Time, ttl time.Duration) Entry[string] {
	return Entry[string]{Value: v, Fetched: fetched, Expires: fetched.Add(ttl)}
}

func TestFreshUntilItExpires(t *testing.T) {
	c := New[string](10, nil)
	c.Put("a", entry("A", t0, time.Minute), t0)
	if v, ok := c.Fresh("a", t0.Add(time.Minute-time.Nanosecond)); !ok || v != "A" {
		t.Errorf("just before expiry: %q, %v; want A, true", v, ok)
	}
	if _, ok := c.Fresh("a", t0.Add(time.Minute)); ok {
		t.Error("fresh at its expiry")
	}
	if e, ok := c.Get("a"); !ok || e.Value != "A" {
		t.Errorf("an expired entry is gone from Get: %+v, %v", e, ok)
	}
	c.Delete("a")
	if _, ok := c.Get("a"); ok {
		t.Error("a deleted entry is still there")
	}
}

func TestAFullCacheDropsWhatItDoesNotKeep(t *testing.T) {
	c := New[string](3, nil)
	c.Put("old", entry("O", t0, time.Second), t0)
	c.Put("b", entry("B", t0, time.Hour), t0)
	c.Put("c", entry("C", t0, time.Hour), t0)
	c.Put("c", entry("C2", t0, time.Hour), t0) // a key already there takes no room
	if n := c.Len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	c.Put("d", entry("D", t0, time.Hour), t0.Add(time.Minute))
	if _, ok := c.Get("old"); ok {
		t.Error("the expired entry was kept in a full cache")
	}
	if n := c.Len(); n != 3 {
		t.Errorf("%d entries, want 3 (b, c, d)", n)
	}
	// Nothing expired: everything goes, the new entry stays.
	c.Put("e", entry("E", t0, time.Hour), t0.Add(time.Minute))
	if n := c.Len(); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
	if v, ok := c.Fresh("e", t0.Add(time.Minute)); !ok || v != "E" {
		t.Errorf("the new entry: %q, %v", v, ok)
	}
}

func TestKeepDecidesWhatAFullCacheKeeps(t *testing.T) {
	// Keep expired entries fetched within the last hour.
	c := New[string](2, func(e Entry[string], now time.Time) bool { return now.Sub(e.Fetched) <= time.Hour })
	for i := range 2 {
		c.Put(fmt.Sprint(i), entry("v", t0, time.Second), t0)
	}
	c.Put("late", entry("L", t0, time.Second), t0.Add(time.Hour+time.Second))
	if n := c.Len(); n != 1 {
		t.Errorf("%d entries, want 1: both old ones are past the hour", n)
	}
}
