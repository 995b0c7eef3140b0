package agents

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/memory"
)

// Streaming replies (slack.stream): a plain-text reply is posted as soon
// as its first sentence is written, then updated while the model writes,
// at most once per Options.StreamInterval; the complete reply then goes
// through the outbox like any other, its first part updating the message
// already shown. JSON replies (threading) are never streamed.
//
// Exactly once: before the first post the conversation commits, beside
// the state as it was before the turn, a marker naming the post id
// (convState.Streamed), then the message's ts once posted. The message
// carries the post id in its metadata from the start. A holder that dies
// mid-stream leaves the turn to be run again (nothing of it was
// committed); the run again has the same post id, finds the marker and
// updates that message instead of posting another.

// StreamModel is a Model that can show a reply while it is written
// (llm.Client). A Model without it is never streamed.
type StreamModel interface {
	// Stream is Complete, calling onText with the reply's content so far
	// each time it grows (see llm.Client.Stream).
	Stream(ctx context.Context, r llm.Request, onText func(content string)) (llm.Response, error)
}

// streamer shows one turn's reply while the model writes it. Its loop
// runs beside the model call and touches nothing of the conversation's
// state: it commits from copies taken when it starts, and the turn reads
// what it did once it has stopped.
type streamer struct {
	c       runner
	model   StreamModel
	postID  string
	agent   string
	prompt  string
	reply   Reply // who posts, where, with which post id
	mention bool  // the text so far may mention paired users
	base    []byte
	conv    memory.Conversation
	lock    memory.Lock

	mu   sync.Mutex
	text string // the model's text so far (its current attempt and round)
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	// Set by the loop; read by the turn after stop.
	marked bool   // the marker is committed (or was there already)
	looked bool   // the message of an earlier run was looked for
	ts     string // the streamed message, when known
	gaveUp bool   // a post or commit failed: nothing more is shown
	shown  string
}

// askStreamed is ask, with the reply shown while it is written when
// streaming is on and the model can stream. mention: the reply may call
// agents, so its paired users are mentioned as in the final post.
func (c runner) askStreamed(ctx context.Context, t *turnRun, req llm.Request, mention bool) (string, error) {
	sm, ok := c.deps.Model.(StreamModel)
	if !c.opts.Stream || !ok || req.JSON {
		return c.ask(ctx, t, req)
	}
	s := c.newStreamer(t, sm, mention)
	t.stream = s
	s.wg.Go(func() { s.loop(ctx) })
	text, err := c.ask(ctx, t, req)
	close(s.stop)
	s.wg.Wait()
	t.stream = nil
	if s.marked {
		if t.streamed == nil {
			t.streamed = make(map[string]streamMark)
		}
		t.streamed[s.postID] = s.mark()
	}
	return text, err
}

// committer commits a conversation under its lock: a streamed reply's
// marker (Conversations.Commit).
type committer interface {
	Commit(ctx context.Context, l memory.Lock, c memory.Commit) (pending bool, err error)
}

func (c runner) newStreamer(t *turnRun, sm StreamModel, mention bool) *streamer {
	s := &streamer{
		c: c, model: sm, postID: t.id, agent: t.agent.EnsDomain, prompt: t.report.Phase, mention: mention,
		base: c.conv.State, conv: *c.conv, lock: c.lock,
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	s.reply = Reply{
		Channel: c.conv.Channel, ThreadTS: c.conv.ThreadTS, Username: t.agent.Name, IconURL: t.agent.Avatar,
		TurnID: t.id, Partial: true, Recipient: c.lastPerson(),
	}
	if m, ok := c.st.Streamed(t.id); ok {
		// An earlier run of this turn streamed (or tried to): its message
		// is the one to show this run in.
		s.marked, s.ts = true, m.TS
	}
	return s
}

// lastPerson is the Slack user who wrote last in the thread: whom a
// reply streamed natively in a channel is streamed to.
func (c runner) lastPerson() string {
	msgs := *c.msgs
	for i := len(msgs) - 1; i >= 0; i-- {
		if isPersonKind(msgs[i].Kind) && msgs[i].UserID != "" {
			return msgs[i].UserID
		}
	}
	return ""
}

// complete's model call: streamed when the turn streams.
func (c runner) callModel(ctx context.Context, t *turnRun, req llm.Request) (resp llm.Response, err error) {
	c.cpu.off(func() {
		if s := t.stream; s != nil {
			resp, err = s.model.Stream(ctx, req, s.onText)
			return
		}
		resp, err = c.deps.Model.Complete(ctx, req)
	})
	return resp, err
}

// onText takes the model's text so far and wakes the loop.
func (s *streamer) onText(text string) {
	s.mu.Lock()
	s.text = text
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// latest is the text so far, as written and as shown.
func (s *streamer) latest() (raw, shown string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text, shownText(s.c.opts.Mask.String(s.text))
}

// loop posts the first sentence at once, then updates the message on the
// interval's ticks when the text changed: a tick allows one update, the
// next change uses it.
func (s *streamer) loop(ctx context.Context) {
	tick, stopTick := streamTicker(s.c.deps.StreamTicker, s.c.opts)
	defer stopTick()
	started, due := false, false
	for {
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-tick:
			due = true
		}
		if s.gaveUp {
			continue
		}
		raw, text := s.latest()
		// A reply asking for the conclusion calls nobody: no mentions.
		ending := turn.HasEnd(raw)
		switch {
		case !started:
			if firstSentence(raw) && turn.HasWords(text) {
				started = true
				due = false
				s.show(ctx, text, ending)
			}
		case due && text != s.shown && turn.HasWords(text):
			due = false
			s.show(ctx, text, ending)
		}
	}
}

// show posts or updates the streamed message with text. The first post
// is committed as a marker first; a failure ends the showing (the
// complete reply still goes through the outbox, which looks the message
// up by its post id when its outcome is unknown).
func (s *streamer) show(ctx context.Context, text string, ending bool) {
	c := s.c
	switch {
	case !s.marked:
		if err := s.commit(ctx); err != nil {
			s.gaveUp = true
			c.log.Warn("streamed reply not shown", slog.String(logPost, s.postID), slog.Any(logError, err))
			return
		}
		s.marked = true
	case s.ts == "" && !s.looked:
		// An earlier run may have posted it without recording its ts.
		s.looked = true
		found, err := c.replies.FindPost(ctx, s.conv.Channel, s.conv.ThreadTS, s.postID)
		if err != nil {
			s.gaveUp = true
			c.log.Info("streamed reply not shown", slog.String(logPost, s.postID), slog.Any(logError, err))
			return
		}
		if len(found) > 0 {
			s.ts = found[0]
		}
	}
	r := s.reply
	r.Text = text
	r.Update = s.ts
	if s.mention && !ending {
		r.Mention = c.mentionUsers(ctx, text, s.agent)
	}
	pctx, cancel := context.WithTimeout(ctx, c.opts.PostTimeout)
	posted, err := c.replies.PostReply(pctx, r)
	cancel()
	if err != nil || len(posted) == 0 {
		if s.ts == "" {
			s.gaveUp = true // its outcome is unknown: the outbox finds out
		}
		c.log.Info("streamed reply not updated", slog.String(logPost, s.postID), slog.Any(logError, err))
		return
	}
	s.shown = text
	if posted[0] != s.ts { // the first post, or one made anew for a message gone
		s.ts = posted[0]
		if err := s.commit(ctx); err != nil {
			c.log.Info("streamed message not recorded; it is found by its post id", slog.String(logPost, s.postID), slog.Any(logError, err))
		}
	}
}

// commit records the marker (with the message's ts when known) over the
// state last committed: a holder that dies now leaves the turn to be run
// again, and the run again finds the message. The conversation stays due
// once the lock lapses.
func (s *streamer) commit(ctx context.Context) error {
	c := s.c
	state, pending, err := conversation.WithStreamMark(s.base, s.postID, s.mark())
	if err != nil {
		return err
	}
	conv := s.conv
	conv.State = state
	_, err = c.marks.Commit(ctx, s.lock, memory.Commit{
		Conversation: conv,
		Deadline:     c.now().Add(c.opts.LockTTL),
		PendingPosts: pending,
	})
	if err != nil {
		return fmt.Errorf("agents: record streamed post %s: %w", s.postID, err)
	}
	return nil
}

func (s *streamer) mark() streamMark {
	return streamMark{TS: s.ts, Agent: s.agent, Prompt: s.prompt}
}

// streamTicker ticks once per stream interval (Deps.StreamTicker in
// tests).
func streamTicker(ticker func(d time.Duration) (<-chan time.Time, func()), opts *Options) (<-chan time.Time, func()) {
	d := opts.StreamInterval
	if ticker != nil {
		return ticker(d)
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// findStreamed looks up the streamed message of p by its post id when its
// ts is not known (its first post's outcome was unknown).
func (o *outbox) findStreamed(ctx context.Context, p *pendingPost) error {
	if !p.Streaming() || p.StreamTS != "" {
		return nil
	}
	found, err := o.chat.FindPost(ctx, o.channel, o.thread, p.PostID)
	if err != nil {
		return fmt.Errorf("look for streamed post %s: %w", p.PostID, err)
	}
	if len(found) > 0 {
		p.StreamTS = found[0]
	}
	if err := o.locks.CheckLock(ctx, o.lock); err != nil {
		return fmt.Errorf("agents: post %s: %w", p.PostID, err)
	}
	return nil
}

// sentenceEnd is the end of a sentence followed by a blank, or a line
// break.
var sentenceEnd = regexp.MustCompile(`[.!?…。！？][)"'”’\]]*\s|\n`)

// firstSentence reports whether the text as written holds a whole first
// sentence: the moment a streamed reply is first posted.
func firstSentence(text string) bool {
	return sentenceEnd.MatchString(text)
}

// shownText is what is shown of a reply being written: :end: removed (a
// token still being written too), an open code fence closed.
func shownText(s string) string {
	s, _ = turn.StripEnd(s)
	for i := len(turn.EndToken) - 1; i > 0; i-- {
		if strings.HasSuffix(s, turn.EndToken[:i]) {
			s = s[:len(s)-i]
			break
		}
	}
	s = strings.TrimSpace(s)
	if strings.Count(s, "```")%2 == 1 {
		s += "\n```"
	}
	return s
}
