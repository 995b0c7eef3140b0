package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/conclavehq/conclave/agents/conversation"
	"github.com/conclavehq/conclave/agents/turn"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/backoff"
	"github.com/conclavehq/conclave/memory"
)

// postBackoff is the wait between attempts of a failed post: from 1 s,
// doubling, capped at 60 s, with jitter; Slack's Retry-After wins.
var postBackoff = backoff.Policy{Base: time.Second, Cap: time.Minute}

// outbox holds a conversation's pending posts and makes them exactly once,
// in order: a post is recorded as pending in a commit (which also proves
// the lock is held) before its first attempt; an attempt whose outcome is
// unknown is followed by a look-up of the parts already posted; a post
// that keeps failing is retried with backoff, holding back those after
// it, until its retry window is over.
type outbox struct {
	book    conversation.Book // the posts, in the order they go out
	fresh   map[string]bool
	chat    replyPoster
	locks   LockChecker
	lock    memory.Lock
	channel string
	thread  string
	opts    *Options
	clock   postClock
	log     *slog.Logger
	who     *roster // the agents posts go out as
}

// postClock is the time the outbox works in and the jitter of its
// retries' backoff (the engine's Deps.Now and Deps.Jitter).
type postClock interface {
	now() time.Time
	jitter() float64
}

// flushed is what a flush did that the step carries on with: the posts
// made (or given up with parts posted), in order, each to be recorded as
// a message of the thread and routed, and how many were given up.
type flushed struct {
	made      []pendingPost // Posted[0] is the message's ts
	abandoned int
}

// newOutbox is the outbox of a loaded conversation.
func (c *convo) newOutbox() *outbox {
	return &outbox{
		book:    c.m.Book(),
		chat:    c.chat,
		locks:   c.e.locks,
		lock:    c.lock,
		channel: c.conv.Channel,
		thread:  c.conv.ThreadTS,
		opts:    &c.e.opts,
		clock:   c.e,
		log:     c.log,
		who:     &c.roster,
	}
}

// prepare makes an agent's reply a post: :end: stripped, the paired
// users of the human agents it calls, its feedback buttons. An empty
// reply makes no post.
func (s turnStep) prepare(ctx context.Context, a ens.Agent, postID, text string, p pendingPost) (pendingPost, bool) {
	c := s.c
	text, _ = turn.StripEnd(text)
	if strings.TrimSpace(text) == "" {
		return p, false
	}
	p.PostID, p.Agent, p.Text = postID, a.EnsDomain, text
	if st := c.m.Read(); !p.Conclusion && !st.Concluding() && st.Status() == statusOpen {
		// Only a post that may call agents mentions the paired users of
		// the human agents it names.
		p.Mention = c.mentionUsers(ctx, text, a.EnsDomain)
	}
	p.Feedback = s.feedbackFor(a, p)
	return p, true
}

// add records p as pending, behind the posts already waiting. The step
// commits it before its first attempt (which also proves the lock is
// still held): whatever happens next, the post is either found in the
// thread by its id or made.
func (o *outbox) add(p pendingPost) {
	o.book.AddPost(p)
	if o.fresh == nil {
		o.fresh = make(map[string]bool)
	}
	o.fresh[p.PostID] = true
}

// flush makes the due posts of the outbox, in order: a post that fails
// stays first, due again after its backoff, and holds back those after it.
// It returns the posts made, for the step to record and route (also when
// it fails); it fails only when the conversation cannot go on.
func (o *outbox) flush(ctx context.Context) (flushed, error) {
	var f flushed
	for {
		p, ok := o.book.FirstPost()
		if !ok {
			return f, nil
		}
		now := o.clock.now()
		if p.Next.After(now) {
			return f, nil
		}
		if p.First.IsZero() {
			p.First = now
		}
		err := o.attempt(ctx, &p)
		o.book.Attempted(p)
		switch {
		case err == nil:
			done := o.book.PopPost()
			if !done.Notice {
				f.made = append(f.made, done)
			}
			continue
		case ctx.Err() != nil:
			return f, ctx.Err() // the post stays pending as committed
		case errors.Is(err, memory.ErrLockLost):
			return f, err // the next holder carries on
		}
		p.Attempts++
		p.LastError = turn.FirstLine(err.Error())
		o.book.Attempted(p)
		var pe *PostError
		permanent := errors.As(err, &pe) && pe.Permanent
		if permanent || !now.Before(p.First.Add(o.opts.PostRetryWindow)) {
			f.abandoned++
			if p, ok := o.abandon(permanent); ok {
				f.made = append(f.made, p)
			}
			continue
		}
		var after time.Duration
		if pe != nil {
			after = pe.RetryAfter
		}
		wait := postBackoff.Wait(p.Attempts, o.clock.jitter(), after)
		p.Next = o.clock.now().Add(wait)
		o.book.Attempted(p)
		o.log.Warn("post failed; it stays pending", slog.String(logTurn, p.TurnOf()), slog.String(logPost, p.PostID),
			slog.Int("attempts", p.Attempts), slog.Int("parts_posted", len(p.Posted)),
			slog.Duration("retry_in", wait), slog.Any(logError, err))
		return f, nil
	}
}

// attempt tries to make p once, within Options.PostTimeout. A post not
// fresh from this step may have been made by an earlier attempt whose
// outcome is unknown: its parts are looked up in the thread first, and
// only the missing ones posted.
func (o *outbox) attempt(ctx context.Context, p *pendingPost) error {
	ctx, cancel := context.WithTimeout(ctx, o.opts.PostTimeout)
	defer cancel()
	fresh := o.fresh[p.PostID]
	delete(o.fresh, p.PostID)
	if err := o.findStreamed(ctx, p); err != nil {
		return err
	}
	if !fresh && !p.Streaming() {
		found, err := o.chat.FindPost(ctx, o.channel, o.thread, p.PostID)
		if err != nil {
			return fmt.Errorf("look for post %s: %w", p.PostID, err)
		}
		if len(found) > len(p.Posted) {
			p.Posted = found
		}
		// Looking took time: a holder that lost the lock meanwhile must
		// leave the post to the one that has it.
		if err := o.locks.CheckLock(ctx, o.lock); err != nil {
			return fmt.Errorf("agents: post %s: %w", p.PostID, err)
		}
	}
	posted, err := o.chat.PostReply(ctx, o.reply(o.who.Agents[p.Agent], p))
	if len(posted) > len(p.Posted) {
		p.Posted = posted
	}
	if err == nil && len(p.Posted) == 0 {
		err = &PostError{Err: errors.New("the transport posted nothing"), Permanent: true}
	}
	return err
}

// abandon gives up the first post of the outbox: an ERROR names it. A
// reply of which some parts were posted is returned, to be recorded as it
// was meant.
func (o *outbox) abandon(permanent bool) (pendingPost, bool) {
	p := o.book.PopPost()
	why := "retry window over"
	if permanent {
		why = "permanent error"
	}
	o.log.Error("post abandoned: "+why, slog.String(logTurn, p.TurnOf()), slog.String(logPost, p.PostID),
		slog.String(logAgent, p.Agent), slog.Int("attempts", p.Attempts), slog.Int("parts_posted", len(p.Posted)),
		slog.Time("first_attempt", p.First), slog.String(logError, p.LastError))
	return p, len(p.Posted) > 0 && !p.Notice
}

// reply is the transport's form of p, posted as agent a.
func (o *outbox) reply(a ens.Agent, p *pendingPost) Reply {
	return Reply{
		Channel:  o.channel,
		ThreadTS: o.thread,
		Text:     p.Text,
		Username: a.Name,
		IconURL:  a.Avatar,
		TurnID:   p.PostID,
		Mention:  p.Mention,
		Posted:   p.Posted,
		Update:   p.UpdateOf(),
		Notice:   p.Notice,
		Feedback: p.Feedback,
	}
}

// deliver carries out a post in the step's one order: it is committed as
// pending, the due posts are made, then each one made is fed back as a
// message of the thread (posted).
func (c *convo) deliver(ctx context.Context, p pendingPost) error {
	c.out.add(p)
	if _, err := c.commit(ctx, commitHold); err != nil {
		return err
	}
	c.sendNotices(ctx)
	return c.flush(ctx)
}

// flush makes the outbox's due posts and feeds back what was made, also
// when it fails: what was posted is in the thread.
func (c *convo) flush(ctx context.Context) error {
	// The identities the posts go out as are gathered first: the outbox
	// resolves nothing mid-post.
	for i := range c.m.Read().Pending() {
		c.agent(ctx, c.m.Read().Post(i).Agent)
	}
	f, err := c.out.flush(ctx)
	for range f.abandoned {
		if c.e.deps.OnPostAbandoned != nil {
			c.e.deps.OnPostAbandoned()
		}
	}
	for i := range f.made {
		c.posted(ctx, &f.made[i])
	}
	return err
}

// posted records a posted reply as a message of the thread and routes it
// (a conclusion as content only).
func (c *convo) posted(ctx context.Context, p *pendingPost) {
	ts := p.Posted[0]
	a, _ := c.agent(ctx, p.Agent)
	m := memory.Message{
		TS:     ts,
		Agent:  p.Agent,
		Kind:   kindAgent,
		Raw:    p.Text,
		Text:   p.Text,
		Name:   a.Name,
		TurnID: p.PostID,
		Meta:   p.Meta,
		At:     c.e.now(),
	}
	c.addMessage(m)
	c.appendVisible(ctx, a, m)
	if p.EndReply {
		c.m.Book().EndPosted(ts)
	}
	c.routeOne(ctx, m, !p.Conclusion)
}
