package agents

import (
	"context"
	"fmt"
	"log/slog"
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
// (turn.StreamModel).
type StreamModel = turn.StreamModel

// streamer is the engine's side of a reply shown while the model writes
// it: the turn.Shower its pacing (turn.Stream) shows through. It runs
// beside the model call and touches nothing of the conversation's state:
// it commits from copies taken when it starts, and the turn reads what it
// did once the pacing has stopped.
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

	pace *turn.Stream

	// Set while it is shown; read by the turn after the pacing stopped.
	marked bool   // the marker is committed (or was there already)
	looked bool   // the message of an earlier run was looked for
	ts     string // the streamed message, when known
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
	tick, stopTick := streamTicker(c.deps.StreamTicker, c.opts)
	s.pace = turn.StartStream(ctx, s, c.opts.Mask, tick)
	t.stream = s
	text, err := c.ask(ctx, t, req)
	s.pace.Stop()
	stopTick()
	t.stream = nil
	if s.marked {
		if t.streamed == nil {
			t.streamed = make(map[string]turn.StreamMark)
		}
		t.streamed[s.postID] = turn.StreamMark(s.mark())
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
			resp, err = s.model.Stream(ctx, req, s.pace.OnText)
			return
		}
		resp, err = c.deps.Model.Complete(ctx, req)
	})
	return resp, err
}

// Show posts or updates the streamed message with text (turn.Shower).
// The first post is committed as a marker first; a failure ends the
// showing (the complete reply still goes through the outbox, which looks
// the message up by its post id when its outcome is unknown).
func (s *streamer) Show(ctx context.Context, text string, ending bool) (shown, more bool) {
	c := s.c
	switch {
	case !s.marked:
		if err := s.commit(ctx); err != nil {
			c.log.Warn("streamed reply not shown", slog.String(logPost, s.postID), slog.Any(logError, err))
			return false, false
		}
		s.marked = true
	case s.ts == "" && !s.looked:
		// An earlier run may have posted it without recording its ts.
		s.looked = true
		found, err := c.replies.FindPost(ctx, s.conv.Channel, s.conv.ThreadTS, s.postID)
		if err != nil {
			c.log.Info("streamed reply not shown", slog.String(logPost, s.postID), slog.Any(logError, err))
			return false, false
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
		c.log.Info("streamed reply not updated", slog.String(logPost, s.postID), slog.Any(logError, err))
		// Its outcome is unknown when it was the first: the outbox finds
		// out, and nothing more is shown.
		return false, s.ts != ""
	}
	if posted[0] != s.ts { // the first post, or one made anew for a message gone
		s.ts = posted[0]
		if err := s.commit(ctx); err != nil {
			c.log.Info("streamed message not recorded; it is found by its post id", slog.String(logPost, s.postID), slog.Any(logError, err))
		}
	}
	return true, true
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
