package memory

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// decodedBudget bounds what a Redis store keeps of decoded messages, in
// the bytes of their stored form (the decoded copy costs about as much
// again).
const decodedBudget = 16 << 20

// decoded keeps the messages a Redis store's loads decoded, per
// conversation and by their stored JSON, so that loading a thread decodes
// only the messages stored or changed since its last load; a thread's
// load is most of a turn's decoding otherwise. It holds two generations
// of conversations: one not loaded during a whole generation is dropped,
// and a generation ends when its conversations' stored messages pass half
// the budget.
type decoded struct {
	mu       sync.Mutex
	cur, old map[string]*decodedConv
	curBytes int
	budget   int
}

// decodedConv is one conversation's decoded messages.
type decodedConv struct {
	mu    sync.Mutex
	byRaw map[string]*decodedMsg
	gen   uint32        // loads made, to find the messages the last one did not see
	order []*decodedMsg // scratch: a load's messages, sorted

	bytes int // stored bytes of byRaw's messages; guarded by decoded.mu
}

type decodedMsg struct {
	m    Message
	seen uint32 // the gen of the last load that had it
}

func newDecoded(budget int) *decoded {
	return &decoded{cur: make(map[string]*decodedConv), old: make(map[string]*decodedConv), budget: budget}
}

// conv returns id's entry, made current.
func (d *decoded) conv(id string) *decodedConv {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.cur[id]
	if ok {
		return c
	}
	if c, ok = d.old[id]; ok {
		delete(d.old, id)
	} else {
		c = &decodedConv{byRaw: make(map[string]*decodedMsg)}
	}
	if d.curBytes >= d.budget/2 {
		d.old, d.cur, d.curBytes = d.cur, make(map[string]*decodedConv), 0
	}
	d.cur[id] = c
	d.curBytes += c.bytes
	return c
}

// grew accounts n more stored bytes kept for conversation id (c), in
// the current generation's total if c is still in it.
func (d *decoded) grew(id string, c *decodedConv, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.bytes += n
	if d.cur[id] == c {
		d.curBytes += n
	}
}

// messages decodes the stored messages of conversation id, reusing what
// an earlier load of it decoded, oldest first.
func (d *decoded) messages(id string, stored []string) ([]Message, error) {
	c := d.conv(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	added := 0 // stored bytes kept, less those dropped
	defer func() {
		clear(c.order) // keeps no dropped message alive
		c.order = c.order[:0]
		if added != 0 {
			d.grew(id, c, added)
		}
	}()
	distinct := 0
	for _, body := range stored {
		e, ok := c.byRaw[body]
		if !ok {
			e = &decodedMsg{}
			if err := json.Unmarshal([]byte(body), &e.m); err != nil {
				return nil, fmt.Errorf("decode message: %w", err)
			}
			c.byRaw[body] = e
			added += len(body)
		}
		if e.seen != c.gen {
			e.seen = c.gen
			distinct++
		}
		c.order = append(c.order, e)
	}
	// Edited and deleted messages leave entries behind; drop them.
	if len(c.byRaw) > distinct {
		for body, e := range c.byRaw {
			if e.seen != c.gen {
				delete(c.byRaw, body)
				added -= len(body)
			}
		}
	}
	// Sorted as pointers: a Message is too large to move around.
	slices.SortFunc(c.order, func(a, b *decodedMsg) int { return compareTS(a.m.TS, b.m.TS) })
	// Room for the messages a turn adds, which the engine appends.
	out := make([]Message, 0, len(stored)+4)
	for _, e := range c.order {
		out = append(out, cloneMessage(e.m))
	}
	return out, nil
}
