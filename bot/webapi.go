package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/internal/backoff"
)

// RequiredScopes are the bot token scopes conclave uses.
var RequiredScopes = []string{
	"chat:write", "chat:write.customize", "reactions:write",
	"channels:history", "groups:history", "channels:read", "groups:read",
	"users:read", "commands", "im:history", "assistant:write",
}

// WebAPI is the Web API side of the transport: it implements agents.Chat
// through the poster it embeds (replies posted as the agent, made inert
// for Slack and split to fit, reactions, ephemeral notices, thread
// history, channel descriptions), answers slash commands, sends notices,
// offers and the App Home tab, and learns who conclave is (Identify). It
// is complete when NewWebAPI returns; the Socket Mode side (Bot) and the
// command handler are built over it.
type WebAPI struct {
	*client
	*poster
	opts  Options
	names *directory

	mu         sync.Mutex
	self       Identity
	identified bool
}

var _ agents.Chat = (*WebAPI)(nil)

// NewWebAPI builds the Web API side. It calls nothing: Identify (or
// Bot.Run) asks Slack who conclave is.
func NewWebAPI(opts Options, logger *slog.Logger) *WebAPI {
	opts.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With(slog.String("component", "slack"))
	apiOpts := []slack.Option{slack.OptionAPIURL(opts.APIURL), slack.OptionAppLevelToken(opts.AppToken)}
	if opts.HTTPClient != nil {
		apiOpts = append(apiOpts, slack.OptionHTTPClient(opts.HTTPClient))
	}
	c := &client{
		api:     slack.New(opts.BotToken, apiOpts...),
		log:     logger,
		metrics: newMetrics(opts.Registerer),
		timeout: opts.Timeout,
		http:    opts.HTTPClient,
	}
	w := &WebAPI{client: c, opts: opts, names: newDirectory(c)}
	w.poster = newPoster(w)
	return w
}

// client makes Web API calls: each bounded by slack.timeout, rate limits
// waited out, idempotent calls retried. The WebAPI, its poster and the
// name directory share it.
type client struct {
	api     *slack.Client
	log     *slog.Logger
	metrics *metrics
	timeout time.Duration
	http    *http.Client // nil: http.DefaultClient
}

// Identify calls auth.test (once; the answer is kept), learns conclave's
// bot user and bot id, and logs any scope the token lacks. Run calls it;
// wiring may call it earlier to learn the bot user id.
func (w *WebAPI) Identify(ctx context.Context) (Identity, error) {
	w.mu.Lock()
	if w.identified {
		defer w.mu.Unlock()
		return w.self, nil
	}
	w.mu.Unlock()
	if w.opts.BotToken == "" {
		return Identity{}, errors.New("bot: no bot token (slack.bot_token or SLACK_BOT_TOKEN)")
	}
	var res *slack.AuthTestResponse
	err := w.call(ctx, "auth.test", true, func(ctx context.Context) (err error) {
		res, err = w.api.AuthTestContext(ctx)
		return err
	})
	if err != nil {
		return Identity{}, fmt.Errorf("bot: auth.test: %w", err)
	}
	self := Identity{TeamID: res.TeamID, Team: res.Team, UserID: res.UserID, BotID: res.BotID}
	w.checkScopes(res.Header.Get("X-OAuth-Scopes"))
	w.log.Info("slack identity", slog.String("team", self.TeamID), slog.String("bot_user", self.UserID), slog.String("bot_id", self.BotID))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.self, w.identified = self, true
	return self, nil
}

// checkScopes logs the required scopes missing from the X-OAuth-Scopes header.
func (w *WebAPI) checkScopes(header string) {
	if header == "" {
		w.log.Warn("auth.test did not report the token's scopes; cannot check them")
		return
	}
	have := strings.Split(header, ",")
	for i := range have {
		have[i] = strings.TrimSpace(have[i])
	}
	var missing []string
	for _, s := range RequiredScopes {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		w.log.Error("the Slack bot token lacks scopes conclave needs; add them to the app and reinstall it",
			slog.String("missing", strings.Join(missing, ",")))
	}
}

func (w *WebAPI) now() time.Time { return w.opts.Now() }

func (w *WebAPI) identity() Identity {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.self
}

// callRetries spaces the retries of an idempotent Web API call: from 0.5 s,
// doubling, capped at 2 s, with jitter.
var callRetries = backoff.Policy{Base: 500 * time.Millisecond, Cap: 2 * time.Second}

// errTimeout marks a Web API request that got no answer within
// Options.Timeout.
var errTimeout = errors.New("no answer in time (slack.timeout)")

// call runs one Web API request, each attempt bounded by Options.Timeout
// (slack.timeout). A rate limit (HTTP 429) is waited out, as long as its
// Retry-After says (at least a second), for as long as ctx allows: Slack
// did not act on the request, so retrying cannot double it. When
// idempotent, a server error, a network failure or a timeout is retried up
// to three times with backoff; other errors are returned at once.
func (c *client) call(ctx context.Context, method string, idempotent bool, fn func(context.Context) error) error {
	transient := 0
	for {
		err := c.attempt(ctx, fn)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		var wait time.Duration
		if limited, after := rateLimit(err); limited {
			wait = max(after, time.Second)
			c.metrics.rateLimited.WithLabelValues(method).Inc()
			c.log.Info("Slack rate limit; waiting", slog.String(logMethod, method), slog.Duration("for", wait))
		} else if idempotent && transient < 3 && isTransient(err) {
			transient++
			wait = callRetries.Wait(transient, rand.Float64(), 0) // #nosec G404 -- backoff jitter, not a secret
			c.log.Debug("Slack call failed; retrying", slog.String(logMethod, method), slog.Any(logError, err))
		} else {
			c.metrics.apiErrors.WithLabelValues(method).Inc()
			return err
		}
		if serr := backoff.Sleep(ctx, wait); serr != nil {
			c.metrics.apiErrors.WithLabelValues(method).Inc()
			return fmt.Errorf("%w (stopped waiting: %w)", err, serr)
		}
	}
}

// attempt runs fn once within Options.Timeout; a request that timed out
// while ctx is still live fails with errTimeout.
func (c *client) attempt(ctx context.Context, fn func(context.Context) error) error {
	if c.timeout <= 0 {
		return fn(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := fn(actx)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		return fmt.Errorf("%w: %w", errTimeout, err)
	}
	return err
}

// rateLimit reports whether err is Slack's rate limit, and the Retry-After.
func rateLimit(err error) (bool, time.Duration) {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return true, rl.RetryAfter
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code == http.StatusTooManyRequests || errorCode(err) == "ratelimited" {
		return true, 0
	}
	return false, 0
}

// isTransient reports a failure worth retrying: a 5xx, a network error or
// a timeout.
func isTransient(err error) bool {
	if errors.Is(err, errTimeout) {
		return true
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		return sc.Code >= 500
	}
	if errorCode(err) != "" {
		return false
	}
	limited, _ := rateLimit(err)
	return !limited && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func (c *client) httpClient() *http.Client {
	if c.http != nil {
		return c.http
	}
	return http.DefaultClient
}

// ReplyToCommand answers a slash command privately to whoever typed it:
// through its response_url (with unfurling off: a reply may carry a
// one-time link), else with chat.postEphemeral. The text is sent as is
// (mrkdwn); callers escape anything they did not write themselves.
func (w *WebAPI) ReplyToCommand(ctx context.Context, cmd slack.SlashCommand, text string) error {
	if cmd.ResponseURL != "" {
		err := w.postToResponseURL(ctx, cmd.ResponseURL, slack.WebhookMessage{Text: text, ResponseType: slack.ResponseTypeEphemeral})
		if err == nil {
			return nil
		}
		w.log.Warn("command response_url failed; trying chat.postEphemeral", slog.Any(logError, err))
	}
	return w.postEphemeral(ctx, cmd.ChannelID, cmd.UserID, text)
}
