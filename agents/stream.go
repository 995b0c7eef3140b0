package agents

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/conclavehq/conclave/agents/conversation"
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
// it commits from copies taken when it starts, and the step reads what it
// did once the turn returned.
type streamer struct {
	c       *convo
	postID  string
	agent   string
	prompt  string
	reply   Reply // who posts, where, with which post id
	mention bool  // the text so far may mention paired users
	base    []byte
	conv    memory.Conversation
	lock    memory.Lock

	// Set while it is shown; read by the step after the turn.
	marked bool   // the marker is committed (or was there already)
	looked bool   // the message of an earlier run was looked for
	ts     string // the streamed message, when known
}

// shower is what turn t's reply to prompt is shown through while it is
// written (turn.Input.Show): nil when replies are not streamed. mention:
// the reply may call agents, so its paired users are mentioned as in the
// final post.
func (s turnStep) shower(t *turn.Turn, prompt string, mention bool) *streamer {
	c := s.c
	if !c.e.opts.Stream {
		return nil
	}
	sh := &streamer{
		c: c, postID: t.ID, agent: t.Agent.EnsDomain, prompt: prompt, mention: mention,
		base: c.conv.State, conv: c.conv, lock: c.lock,
	}
	sh.reply = Reply{
		Channel: c.conv.Channel, ThreadTS: c.conv.ThreadTS, Username: t.Agent.Name, IconURL: t.Agent.Avatar,
		TurnID: t.ID, Partial: true, Recipient: lastPerson(c.msgs),
	}
	if m, ok := c.m.Read().Streamed(t.ID); ok {
		// An earlier run of this turn streamed (or tried to): its message
		// is the one to show this run in.
		sh.marked, sh.ts = true, m.TS
	}
	return sh
}

// showing is s as a turn's input holds it: no Shower when s is nil.
func showing(s *streamer) turn.Shower {
	if s == nil {
		return nil
	}
	return s
}

// shown feeds what s did into the machine: the marker of the message the
// reply was streamed in, when one was committed.
func (s turnStep) shown(sh *streamer) {
	if sh != nil && sh.marked {
		s.c.m.Book().Streamed(sh.postID, sh.mark())
	}
}

// lastPerson is the Slack user who wrote last in the thread: whom a
// reply streamed natively in a channel is streamed to.
func lastPerson(msgs []memory.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if isPersonKind(msgs[i].Kind) && msgs[i].UserID != "" {
			return msgs[i].UserID
		}
	}
	return ""
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
		found, err := c.e.deps.Chat.FindPost(ctx, s.conv.Channel, s.conv.ThreadTS, s.postID)
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
	pctx, cancel := context.WithTimeout(ctx, c.e.opts.PostTimeout)
	posted, err := c.e.deps.Chat.PostReply(pctx, r)
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
	_, err = c.e.convs.Commit(ctx, s.lock, memory.Commit{
		Conversation: conv,
		Deadline:     c.e.now().Add(c.e.opts.LockTTL),
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
