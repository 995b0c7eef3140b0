package conversation

import (
	"strings"
	"time"
)

// Book is the bookkeeping of a conversation besides its transitions:
// notices given once, streamed messages, the facilitator's recent replies,
// sessions bound, and the outbox's pending posts. Like the machine's, its
// methods only change the state; the engine carries out the rest.
func (m *Machine) Book() Book { return Book{st: m.st} }

// Book writes the bookkeeping part of a machine's state (Machine.Book).
type Book struct{ st *State }

// Notice marks key as notified in this conversation; false when it was
// already: what is notified once is notified no more.
func (b Book) Notice(key string) bool {
	if b.st.Noticed[key] {
		return false
	}
	b.st.Noticed[key] = true
	return true
}

// Streamed records the message streamed for a turn not yet over (id: its
// post id).
func (b Book) Streamed(id string, sm StreamMark) {
	if b.st.Streamed == nil {
		b.st.Streamed = make(map[string]StreamMark)
	}
	b.st.Streamed[id] = sm
}

// Remember adds a facilitator reply posted to the recent ones (two at
// most, newest first): a reply equal to one of them stalls the
// conversation.
func (b Book) Remember(reply string) {
	if strings.TrimSpace(reply) == "" {
		return
	}
	b.st.Recent = append([]string{reply}, b.st.Recent[:min(len(b.st.Recent), 1)]...)
}

// Bind records the memory session an expert bound.
func (b Book) Bind(expert, key string) { b.st.Bindings[expert] = key }

// Group freezes the clone/human session id at its first use.
func (b Book) Group(id string) { b.st.Group = id }

// EndPosted records the ts of what was posted of a facilitator reply that
// held :end:, for the conclusion waiting.
func (b Book) EndPosted(ts string) {
	if b.st.Conclude != nil {
		b.st.Conclude.EndTS = ts
	}
}

// AddPost records p as pending, behind the posts already waiting; a
// message streamed for it (or, for a ⚠️ notice, for its turn's reply) is
// the one its first part updates.
func (b Book) AddPost(p PendingPost) {
	key := p.PostID
	if p.Notice {
		key = p.TurnOf()
	}
	if sm, ok := b.st.Streamed[key]; ok {
		delete(b.st.Streamed, key)
		p.Stream, p.StreamTS = true, sm.TS
	}
	b.st.Outbox = append(b.st.Outbox, p)
}

// FirstPost is the post that goes out next, if any.
func (b Book) FirstPost() (PendingPost, bool) {
	if len(b.st.Outbox) == 0 {
		return PendingPost{}, false
	}
	return b.st.Outbox[0], true
}

// Attempted records what an attempt of the first post learnt (the parts
// posted, a streamed message's ts, when it was first tried).
func (b Book) Attempted(p PendingPost) {
	if len(b.st.Outbox) > 0 && b.st.Outbox[0].PostID == p.PostID {
		b.st.Outbox[0] = p
	}
}

// Failed records a failed attempt of the first post: it stays first, due
// again at next.
func (b Book) Failed(why string, next time.Time) {
	if len(b.st.Outbox) == 0 {
		return
	}
	p := &b.st.Outbox[0]
	p.Attempts++
	p.LastError = why
	p.Next = next
}

// PopPost takes the first post off the outbox: made, or given up.
func (b Book) PopPost() PendingPost {
	p := b.st.Outbox[0]
	b.st.Outbox = b.st.Outbox[1:]
	return p
}

// TurnOf is the turn that made the post (older states only knew the post
// id).
func (p PendingPost) TurnOf() string {
	if p.Turn != "" {
		return p.Turn
	}
	return p.PostID
}

// Streaming reports whether p's first part is a streamed message not yet
// known to hold its final text.
func (p PendingPost) Streaming() bool { return p.Stream && len(p.Posted) == 0 }

// UpdateOf is the message a post's first part updates, if any.
func (p PendingPost) UpdateOf() string {
	if p.Streaming() {
		return p.StreamTS
	}
	return ""
}
