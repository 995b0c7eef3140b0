package bot

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/internal/clip"
)

// Status shows who is working in a thread while a conversation has
// turns running (slack.status): assistant.threads.setStatus with "is
// thinking…" and a loading message per running turn ("Elen is
// thinking…", "Asking Claudine…"). Slack drops a status after two
// minutes, or when the app posts in the thread; Status sets it again
// every statusRefresh while turns run, and clears it when the last one
// ends (a turn may end without a reply). An error from the method turns
// the status off for that channel, logged once.
//
// The engine tells it of turns (agents.Working) without waiting: Run
// makes the calls. A turn's status reaches Slack before the turn's post:
// a reply posted in a thread through the WebAPI first waits for the
// status changes asked in that thread before it (await), for at most
// statusWait, so that a slow or stalled setStatus delays a post by that
// much at worst and never loses it.
type Status struct {
	web    *WebAPI
	log    *slog.Logger
	ticker func(time.Duration) (<-chan time.Time, func())
	// wait bounds how long a post waits for its thread's status
	// (statusWait; tests shorten it).
	wait time.Duration

	mu      sync.Mutex
	threads map[string]*threadWork // by channel/thread
	off     map[string]bool        // channels where the method failed
	wake    chan struct{}
	asked   uint64        // changes asked for so far, in all threads
	settled chan struct{} // closed and replaced when changes are made
	stopped bool          // Run has returned: nothing more is made
}

var _ agents.Working = (*Status)(nil)

const (
	// statusRefresh: a status shown this long is set again (Slack
	// drops it after two minutes).
	statusRefresh = 90 * time.Second
	// statusCheck is how often Run looks for statuses due.
	statusCheck = 15 * time.Second
	// statusThinking is the status itself; the loading messages say who.
	statusThinking = "is thinking…"
	// statusWait bounds how long a reply waits for the status changes
	// of its thread asked before it (a setStatus slow, rate limited or
	// behind another thread's): about one ordinary Slack call.
	statusWait = 2 * time.Second
)

// threadWork is what a thread shows.
type threadWork struct {
	channel, thread string
	turns           []agents.Work // running, oldest first
	shown           []string      // the loading messages set; nil: none
	setAt           time.Time
	// asked numbers the thread's latest change (Status.asked); made, the
	// latest one Slack has seen (or that needed no call).
	asked, made uint64
}

// NewStatus builds the thread status over web, whose replies then wait
// for their thread's status (see Status). ticker, optional (tests), makes
// Run's checks; nil: a time.Ticker.
func NewStatus(web *WebAPI, ticker func(time.Duration) (<-chan time.Time, func())) *Status {
	if ticker == nil {
		ticker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	s := &Status{
		web: web, log: web.log, ticker: ticker, wait: statusWait,
		threads: make(map[string]*threadWork), off: make(map[string]bool), wake: make(chan struct{}, 1),
		settled: make(chan struct{}),
	}
	web.status.Store(s)
	return s
}

// TurnStarted shows w's turn in its thread.
func (s *Status) TurnStarted(w agents.Work) {
	s.change(w, func(tw *threadWork) { tw.turns = append(tw.turns, w) })
}

// TurnEnded stops showing w's turn.
func (s *Status) TurnEnded(w agents.Work) {
	s.change(w, func(tw *threadWork) {
		tw.turns = slices.DeleteFunc(tw.turns, func(x agents.Work) bool { return x.TurnID == w.TurnID })
	})
}

func (s *Status) change(w agents.Work, f func(*threadWork)) {
	if w.Channel == "" || w.ThreadTS == "" {
		return
	}
	s.mu.Lock()
	if s.off[w.Channel] {
		s.mu.Unlock()
		return
	}
	key := streamKey(w.Channel, w.ThreadTS)
	tw := s.threads[key]
	if tw == nil {
		// Every change of the thread before it was made.
		tw = &threadWork{channel: w.Channel, thread: w.ThreadTS, made: s.asked}
		s.threads[key] = tw
	}
	f(tw)
	s.asked++
	tw.asked = s.asked
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run sets, refreshes and clears statuses until ctx ends.
func (s *Status) Run(ctx context.Context) error {
	tick, stop := s.ticker(statusCheck)
	defer stop()
	defer func() {
		s.mu.Lock()
		s.stopped = true
		s.notifyLocked()
		s.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-tick:
		}
		s.sync(ctx)
	}
}

// statusCall is one setStatus to make.
type statusCall struct {
	key      string
	channel  string
	thread   string
	username string
	loading  []string // nil: clear
	asked    uint64   // the thread's latest change it makes
}

// sync makes the calls that bring each thread's status up to date, in
// channel and thread order.
func (s *Status) sync(ctx context.Context) {
	now := s.web.now()
	var calls []statusCall
	s.mu.Lock()
	keys := make([]string, 0, len(s.threads))
	for k := range s.threads {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		tw := s.threads[k]
		want := loadingMessages(tw.turns)
		switch {
		case len(want) == 0 && tw.shown == nil:
			delete(s.threads, k)
		case len(want) == 0:
			calls = append(calls, statusCall{key: k, channel: tw.channel, thread: tw.thread, asked: tw.asked})
		case !slices.Equal(want, tw.shown) || now.Sub(tw.setAt) >= statusRefresh:
			calls = append(calls, statusCall{key: k, channel: tw.channel, thread: tw.thread,
				username: tw.turns[len(tw.turns)-1].Agent, loading: want, asked: tw.asked})
		default:
			tw.made = tw.asked // Slack shows it already
		}
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, c := range calls {
		err := s.set(ctx, c)
		s.mu.Lock()
		switch {
		case err != nil && ctx.Err() == nil:
			if !s.off[c.channel] {
				s.off[c.channel] = true
				s.log.Warn("Slack refused a thread status; no status in this channel from now on",
					slog.String(logChannel, c.channel), slog.Any(logError, err))
			}
			for k, tw := range s.threads {
				if tw.channel == c.channel {
					delete(s.threads, k)
				}
			}
		case err == nil:
			if tw := s.threads[c.key]; tw != nil {
				tw.shown, tw.setAt, tw.made = c.loading, now, max(tw.made, c.asked)
				if c.loading == nil && len(tw.turns) == 0 {
					delete(s.threads, c.key)
				}
			}
		}
		s.notifyLocked()
		s.mu.Unlock()
	}
}

// notifyLocked wakes the posts waiting for their thread's status (await);
// s.mu must be held.
func (s *Status) notifyLocked() {
	close(s.settled)
	s.settled = make(chan struct{})
}

// await waits until the status changes asked in a thread so far have
// reached Slack (or been given up: the channel's status is off, Run has
// returned), for at most s.wait and while ctx lasts. A thread with
// nothing asked does not wait.
func (s *Status) await(ctx context.Context, channel, thread string) {
	key := streamKey(channel, thread)
	s.mu.Lock()
	tw := s.threads[key]
	if tw == nil || tw.made >= tw.asked {
		s.mu.Unlock()
		return
	}
	target := tw.asked
	s.mu.Unlock()
	timer := time.NewTimer(s.wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		tw := s.threads[key]
		done := tw == nil || tw.made >= target || s.off[channel] || s.stopped
		settled := s.settled
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-settled:
		case <-ctx.Done():
			return
		case <-timer.C:
			s.log.Debug("posting before the thread status reached Slack",
				slog.String(logChannel, channel), slog.Duration("waited", s.wait))
			return
		}
	}
}

func (s *Status) set(ctx context.Context, c statusCall) error {
	params := slack.AssistantThreadsSetStatusParameters{ChannelID: c.channel, ThreadTS: c.thread}
	if c.loading != nil {
		params.Status, params.LoadingMessages = statusThinking, c.loading
		params.Username = agentName(c.username)
	}
	return s.web.call(ctx, "assistant.threads.setStatus", true, func(ctx context.Context) error {
		return s.web.api.SetAssistantThreadsStatusContext(ctx, params)
	})
}

// maxLoadingMessages is Slack's limit on a status's loading messages.
const maxLoadingMessages = 10

// loadingMessages says who works in a thread: "Elen is thinking…" for
// the facilitator, "Asking Claudine…" for an agent asked; each once, at
// most maxLoadingMessages. slack-go sends them joined by commas, so a
// comma in a name is left out.
func loadingMessages(turns []agents.Work) []string {
	var out []string
	for _, w := range turns {
		name := strings.ReplaceAll(agentName(w.Agent), ",", "")
		if name == "" {
			continue
		}
		msg := "Asking " + name + "…"
		if w.Facilitator {
			msg = name + " is thinking…"
		}
		if !slices.Contains(out, msg) && len(out) < maxLoadingMessages {
			out = append(out, msg)
		}
	}
	return out
}

// agentName is an agent's name as a post's username shows it.
func agentName(name string) string {
	return clip.Runes(strings.TrimSpace(name), usernameLimit, "")
}
