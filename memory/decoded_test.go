package memory

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// storedThread is n stored messages, as a thread's load returns them.
func storedThread(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		m := Message{TS: fmt.Sprintf("1700000000.%06d", i+1), UserID: "U1", Kind: "person", Raw: strings.Repeat("word ", 40),
			Text: strings.Repeat("word ", 40), Name: "Ann", Meta: map[string]string{"i": fmt.Sprint(i)}, At: time.Unix(1700000000, 0).UTC()}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func decodeAll(t *testing.T, stored []string) []Message {
	t.Helper()
	out := make([]Message, len(stored))
	for i, s := range stored {
		if err := json.Unmarshal([]byte(s), &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	sortMessages(out)
	return out
}

func equalMessages(t *testing.T, got, want []Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range got {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if string(g) != string(w) {
			t.Fatalf("message %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

func TestDecodedReusesAndFollowsChanges(t *testing.T) {
	d := newDecoded(decodedBudget)
	stored := storedThread(t, 6)
	// Out of order, as HVALS may return them.
	stored[1], stored[4] = stored[4], stored[1]
	got, err := d.messages("c1", stored)
	if err != nil {
		t.Fatal(err)
	}
	equalMessages(t, got, decodeAll(t, stored))
	if cap(got) < len(got)+1 {
		t.Errorf("cap %d leaves no room for the turn's messages", cap(got))
	}

	// A caller changing what it got changes nothing kept.
	got[0].Text, got[0].Meta["i"] = "changed", "changed"

	// One message edited, one deleted, one added.
	edited := storedThread(t, 7)
	edited[2] = strings.Replace(edited[2], `"name":"Ann"`, `"name":"Bob"`, 1)
	edited = append(edited[:5], edited[6])
	got, err = d.messages("c1", edited)
	if err != nil {
		t.Fatal(err)
	}
	equalMessages(t, got, decodeAll(t, edited))
	c := d.conv("c1")
	if len(c.byRaw) != len(edited) {
		t.Errorf("%d messages kept for a thread of %d", len(c.byRaw), len(edited))
	}
	bytes := 0
	for _, s := range edited {
		bytes += len(s)
	}
	if c.bytes != bytes {
		t.Errorf("accounted %d bytes, the thread has %d", c.bytes, bytes)
	}
}

func TestDecodedBadMessage(t *testing.T) {
	d := newDecoded(decodedBudget)
	stored := append(storedThread(t, 2), `{"ts":`)
	if _, err := d.messages("c1", stored); err == nil || !strings.Contains(err.Error(), "decode message") {
		t.Fatalf("err = %v, want a decode error", err)
	}
	// The good ones are kept, the bad one is not.
	got, err := d.messages("c1", stored[:2])
	if err != nil {
		t.Fatal(err)
	}
	equalMessages(t, got, decodeAll(t, stored[:2]))
}

// A load that fails still accounts what it kept, so that later loads
// dropping those messages leave the count right.
func TestDecodedAccountsAFailedLoad(t *testing.T) {
	d := newDecoded(decodedBudget)
	good := storedThread(t, 2)
	if _, err := d.messages("c1", []string{good[0], `{"ts":`, good[1]}); err == nil {
		t.Fatal("a bad message decoded")
	}
	for _, thread := range [][]string{{good[0]}, {good[1]}} {
		if _, err := d.messages("c1", thread); err != nil {
			t.Fatal(err)
		}
		c := d.conv("c1")
		if c.bytes != len(thread[0]) || d.curBytes != len(thread[0]) {
			t.Fatalf("after loading %d bytes: conversation %d, generation %d", len(thread[0]), c.bytes, d.curBytes)
		}
		if len(c.order) != 0 {
			t.Fatalf("the scratch slice keeps %d messages", len(c.order))
		}
	}
}

func TestDecodedStaysWithinItsBudget(t *testing.T) {
	stored := storedThread(t, 10)
	size := 0
	for _, s := range stored {
		size += len(s)
	}
	// Room for about four conversations per generation.
	d := newDecoded(8 * size)
	for i := range 100 {
		if _, err := d.messages(fmt.Sprint("c", i), stored); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(d.cur) + len(d.old); n > 10 {
		t.Errorf("%d conversations kept, want at most 10", n)
	}
	if d.curBytes > 5*size {
		t.Errorf("current generation holds %d bytes, over half the budget (%d) by more than a conversation", d.curBytes, 4*size)
	}
	// A conversation of the old generation is taken over, not decoded
	// again.
	var oldID string
	for id := range d.old {
		oldID = id
	}
	kept := d.old[oldID].byRaw[stored[0]]
	if _, err := d.messages(oldID, stored); err != nil {
		t.Fatal(err)
	}
	if d.cur[oldID] == nil || d.cur[oldID].byRaw[stored[0]] != kept {
		t.Errorf("conversation %s of the old generation was not taken over", oldID)
	}
}

func TestDecodedConcurrentLoads(t *testing.T) {
	stored := storedThread(t, 20)
	// Room for about two conversations per generation: loads of one
	// conversation meet its moves between generations.
	d := newDecoded(4 * len(stored[0]) * 20)
	want := decodeAll(t, stored)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				got, err := d.messages(fmt.Sprint("c", (i+j)%5), stored[:10+j%10])
				if err != nil {
					errs <- err
					return
				}
				if len(got) != 10+j%10 || got[len(got)-1].TS != want[len(got)-1].TS {
					errs <- fmt.Errorf("load %d/%d: %d messages ending %s", i, j, len(got), got[len(got)-1].TS)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkDecodeThread is a turn's load of a 30-message thread with two
// new messages since the last load, against decoding it whole. The
// messages come out of order, as a hash's values do.
func BenchmarkDecodeThread(b *testing.B) {
	stored := storedThread(b, 32)
	for i := 0; i+1 < 30; i += 3 {
		stored[i], stored[29-i] = stored[29-i], stored[i]
	}
	b.Run("reused", func(b *testing.B) {
		d := newDecoded(decodedBudget)
		if _, err := d.messages("c1", stored[:30]); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			// Alternate so that each load finds two changed.
			n := 30 + 2*(i%2)
			if _, err := d.messages("c1", stored[:n]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// A fresh cache each time: nothing to reuse.
			if _, err := newDecoded(decodedBudget).messages("c1", stored[:32]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
