package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/slack-go/slack"
	"golang.org/x/sync/errgroup"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot"
	"github.com/conclavehq/conclave/internal/backoff"
)

// slackSide is the Slack transport and the engine behind it: the contexts
// they run under, and what the shutdown needs of them. It is started in
// the background (startSlack), so what it holds is guarded by mu.
type slackSide struct {
	runCtx, engineCtx, slackCtx context.Context
	cancelRun                   context.CancelFunc
	// engineDone is closed once the engine has stopped, or at once when
	// no engine is started.
	engineDone chan struct{}

	mu       sync.Mutex
	stopping bool          // shutdown began: start nothing more
	lastErr  error         // the last failed attempt to reach Slack
	bot      *bot.Bot      // set once started
	drain    func()        // set once started
	wallet   *startingPage // the wallet page, served once Slack is reached
	// status shows in threads who is working; nil with slack.status off.
	// Set by buildSlack before the transport runs.
	status *bot.Status
}

// stop begins the shutdown: nothing more is started, and a started Slack
// transport drains.
func (s *slackSide) stop() {
	s.mu.Lock()
	s.stopping = true
	drain := s.drain
	s.mu.Unlock()
	if drain != nil {
		drain()
	}
}

// ready is /readyz's Slack check: connecting until Slack is reached (with
// what the last attempt met), then the transport's own readiness.
func (s *slackSide) ready(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bot != nil {
		return s.bot.Ready()
	}
	if s.lastErr != nil {
		return shownReason{fmt.Sprintf("connecting (%s)", slackTrouble(s.lastErr)), s.lastErr}
	}
	return shownReason{"connecting", errors.New("slack: not reached yet")}
}

// failed records an attempt to reach Slack that failed.
func (s *slackSide) failed(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
}

// prepareSlack registers Slack's readiness check before the listeners
// serve, and returns the wallet page's handler (nil without Slack) and
// whether Slack is to be reached. Without tokens, nothing is started and
// readiness says why.
func (p *instance) prepareSlack(s *slackSide) (http.Handler, bool) {
	if p.cfg.Slack.AppToken == "" || p.cfg.Slack.BotToken == "" {
		close(s.engineDone)
		p.log.Error("Slack tokens are not set: not connecting to Slack; set SLACK_APP_TOKEN (xapp-…) and SLACK_BOT_TOKEN (xoxb-…), see README")
		p.checks = append(p.checks, readinessCheck{"slack", "not configured", func(context.Context) error { return errors.New("no tokens") }})
		p.up()
		return nil, false
	}
	s.wallet = &startingPage{}
	p.checks = append(p.checks, readinessCheck{"slack", "not connected", s.ready})
	return s.wallet, true
}

// startSlack reaches Slack and runs the transport and the engine until
// shutdown, each complete when built: the Web API side first (the engine
// posts through it, and it learns conclave's identity), then the engine,
// the commands over both, and the Socket Mode side over all three. While
// Slack cannot be reached it retries; a token Slack refuses is an error
// that ends the run.
func (p *instance) startSlack(s *slackSide) error {
	b, err := p.buildSlack(s)
	if b == nil {
		close(s.engineDone)
		return err
	}
	g, ctx := errgroup.WithContext(s.slackCtx)
	if s.status != nil {
		g.Go(part(ctx, p.log, "slack status", s.status.Run))
	}
	g.Go(part(ctx, p.log, "slack", b.Run))
	return g.Wait()
}

// buildSlack builds and starts the engine and returns the transport to
// run; nil when shutdown came first or on an error.
func (p *instance) buildSlack(s *slackSide) (*bot.Bot, error) {
	web := bot.NewWebAPI(bot.Options{
		AppToken:        p.cfg.Slack.AppToken,
		BotToken:        p.cfg.Slack.BotToken,
		APIURL:          p.cfg.Slack.APIURL,
		WorkingReaction: p.cfg.Slack.WorkingReaction,
		IPFSGateway:     p.cfg.Slack.IPFSGateway,
		HTTPClient:      p.web,
		Timeout:         p.cfg.Slack.Timeout.Duration,
		HandleParallel:  16,
		StreamMethod:    p.cfg.Slack.StreamMethod,
		Registerer:      p.reg,
		Tracer:          p.tracer,

		DirectConversations: p.cfg.Slack.DMChannel != "",
		SuggestedPrompts:    p.cfg.Slack.suggestedPrompts(),
	}, p.log)
	id, err := identify(s.runCtx, web, p.log, s.failed)
	if err != nil {
		if s.runCtx.Err() != nil {
			return nil, nil // shutdown while Slack could not be reached
		}
		return nil, err
	}
	var working agents.Working
	if p.cfg.Slack.Status {
		s.status = bot.NewStatus(web, nil)
		working = s.status
	}
	eng := agents.New(engineOptions(p.cfg, id.UserID), onStore(p.store, agents.Deps{
		Chat:     web,
		Model:    p.model,
		Prompts:  func() agents.Prompts { return p.lib.Current() },
		Resolver: p.directory,
		Tools:    p.toolbox,
		Logger:   p.log,
		OnTurn:   p.metrics.observeTurn,
		Working:  working,
		Spending: p.store,
		OnBudget: p.metrics.observeBudget,

		OnPostAbandoned: p.metrics.observePostAbandoned,
		Traces:          p.store,
		OnFeedback:      p.metrics.observeFeedback,
		Tracer:          p.tracer,
		CaptureContent:  p.cfg.OTel.CaptureContent,
	}))
	commands, page, err := wireCommands(p.cfg, web, eng, p.store, p.directory, p.log)
	if err != nil {
		return nil, err
	}
	b := bot.New(web, eng, commands)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, nil
	}
	s.bot, s.drain = b, b.Drain
	s.wallet.set(page)
	go func() {
		defer close(s.engineDone)
		if err := eng.Run(s.engineCtx); err != nil {
			p.log.Error("engine stopped", slog.Any(logErr, err))
			s.cancelRun()
		}
	}()
	p.upMu.Lock()
	p.summary.slackTeam = teamName(id.Team, id.TeamID)
	p.upMu.Unlock()
	p.up()
	return b, nil
}

// identify learns conclave's own Slack identity, retrying while Slack
// cannot be reached (each failure told to failed); a token Slack refuses
// is a configuration error.
func identify(ctx context.Context, web *bot.WebAPI, log *slog.Logger, failed func(error)) (bot.Identity, error) {
	for n := 1; ; n++ {
		id, err := web.Identify(ctx)
		if err == nil {
			return id, nil
		}
		var slackErr slack.SlackErrorResponse
		if errors.As(err, &slackErr) || bot.IsAuthError(err) {
			return bot.Identity{}, fmt.Errorf("slack: the bot token was refused: %w", err)
		}
		failed(err)
		wait := identifyRetries.Wait(n, 1, 0)
		log.Warn("cannot reach Slack; retrying", slog.Any(logErr, err), slog.Duration("in", wait))
		if err := backoff.Sleep(ctx, wait); err != nil {
			return bot.Identity{}, err
		}
	}
}

// identifyRetries spaces the attempts to learn conclave's identity while
// Slack cannot be reached: from 1 s, doubling, capped at 30 s (no jitter:
// one process, one call).
var identifyRetries = backoff.Policy{Base: time.Second, Cap: 30 * time.Second}

// slackTrouble names what an attempt to reach Slack met, in words /readyz
// may show: a class of failure, never an address or Slack's own text.
func slackTrouble(err error) string {
	var sc slack.StatusCodeError
	var dns *net.DNSError
	var nerr net.Error
	switch {
	case errors.As(err, &sc):
		return fmt.Sprintf("HTTP %d", sc.Code)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		return "name not resolved"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return "timed out"
	default:
		return "unreachable"
	}
}

// shownReason is a readiness failure whose text /readyz shows in place of
// the check's fixed reason; err is what is logged.
type shownReason struct {
	text string
	err  error
}

func (r shownReason) Error() string { return r.text + ": " + r.err.Error() }
func (r shownReason) Unwrap() error { return r.err }

// startingPage serves the wallet page once Slack is reached (the page
// verifies through it), and 503 until then.
type startingPage struct{ page atomic.Pointer[http.Handler] }

func (h *startingPage) set(page http.Handler) { h.page.Store(&page) }

func (h *startingPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	page := h.page.Load()
	if page == nil || *page == nil {
		http.Error(w, "conclave is starting; try again in a moment", http.StatusServiceUnavailable)
		return
	}
	(*page).ServeHTTP(w, r)
}
