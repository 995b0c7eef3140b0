// Package bot is conclave's Slack transport. Its WebAPI implements
// agents.Chat: replies posted as the agent, made inert for Slack and split
// to fit, reactions, ephemeral notices and thread history. Its Bot keeps a
// Socket Mode connection open (reconnecting with backoff) and turns
// message events into agents.Event values for the engine, acknowledging
// each envelope only once the engine has recorded it. Its Commands parse
// slash commands and button presses and render what the domain decides.
package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"go.opentelemetry.io/otel/trace"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/internal/backoff"
	"github.com/conclavehq/conclave/internal/serial"
)

// Handler records inbound message events. It is the engine's side of the
// transport.
type Handler interface {
	// Record records ev durably and returns; it must not run a model call.
	// An error (the store cannot be reached) leaves the envelope
	// unacknowledged, so Slack delivers it again. Once the envelope's
	// acknowledgement is written, the Bot calls the ticket's Dispatch (the
	// engine starts turns only then).
	Record(ctx context.Context, ev agents.Event) (agents.Ticket, error)
}

// CommandHandler answers slash commands. The envelope is acknowledged before
// HandleCommand is called, so it may take its time; it answers through
// Bot.ReplyToCommand.
type CommandHandler interface {
	HandleCommand(ctx context.Context, cmd slack.SlashCommand)
}

// Time limits fixed by Slack's 3 s acknowledgement window and by the
// readiness rule; they are not settings.
const (
	// readyGrace is how long Ready keeps reporting ready while the socket
	// reconnects (Slack asks clients to reconnect regularly).
	readyGrace = 30 * time.Second
	// recordWindow is how long after an envelope's arrival the record of
	// its event is tried again while the store does not answer (a restart,
	// a failover): past it the envelope is left unacknowledged for Slack
	// to deliver again, its acknowledgement still inside Slack's 3 s.
	recordWindow = 2 * time.Second
	// handleTimeout is the least time the first Handler.Record call of an
	// event gets when the window is spent before it starts (slow name
	// look-ups, a wait behind the thread's earlier events), so that, with
	// the look-ups, an envelope is acknowledged within Slack's 3 s or not
	// at all.
	handleTimeout = 1500 * time.Millisecond
	// lookupTimeout bounds the user and channel name look-ups made for one
	// text (an event to normalise, a reply to make inert). Names not found
	// in time stay as ids.
	lookupTimeout = time.Second
)

// Options configure the transport (WebAPI and Bot). Tokens are required.
// The settings operators choose (slack.*) have their defaults in one
// place, the configuration (cmd/conclave); here an empty one turns its
// feature off.
type Options struct {
	AppToken        string // xapp-…, for Socket Mode
	BotToken        string // xoxb-…, for the Web API
	APIURL          string // slack.api_url; must end with "/"; empty: Slack's own
	WorkingReaction string // slack.working_reaction: what AddReaction/RemoveReaction use when given no name
	IPFSGateway     string // slack.ipfs_gateway, for ipfs:// avatars; empty: such avatars are left out

	// PingTimeout: with no WebSocket ping from Slack for this long the
	// socket is considered dead and reopened; default 30s.
	PingTimeout time.Duration
	// Timeout bounds every Web API request (slack.timeout); zero: only
	// the caller's context does. A request without an answer by then
	// fails and takes the retry path.
	Timeout time.Duration
	// HandleParallel is how many threads' events may be recorded at once;
	// the events of one thread are always recorded one at a time, in
	// arrival order. Default 1: every event in arrival order. More lets a
	// burst of events across threads be acknowledged without queueing
	// behind one another's store round trips.
	HandleParallel int
	// StreamMethod is how a reply being written is shown
	// (slack.stream_method): StreamAuto (Slack's native streaming, with
	// chat.update as its fallback; the default) or StreamUpdate.
	StreamMethod string
	// Now is the clock of native streams; nil: time.Now.
	Now func() time.Time
	// DirectConversations (set with slack.dm_channel): a person's direct
	// message to conclave is recorded as a message of a conversation, as
	// a channel's are, instead of being answered with the help.
	DirectConversations bool
	// SuggestedPrompts (slack.suggested_prompts, at most 4) are offered
	// when a person opens an assistant thread with conclave.
	SuggestedPrompts []SuggestedPrompt

	HTTPClient *http.Client          // optional
	Registerer prometheus.Registerer // optional: Slack metrics are registered here
	// Tracer, optional, receives a slack.event span per message recorded
	// (OpenTelemetry); the turns it wakes link to it.
	Tracer trace.Tracer
}

func (o *Options) setDefaults() {
	if o.APIURL == "" {
		o.APIURL = slack.APIURL
	}
	if o.IPFSGateway != "" && !strings.HasSuffix(o.IPFSGateway, "/") {
		o.IPFSGateway += "/"
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 30 * time.Second
	}
	if o.HandleParallel <= 0 {
		o.HandleParallel = 1
	}
	if o.StreamMethod == "" {
		o.StreamMethod = StreamAuto
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Identity is who conclave is in the workspace, from auth.test.
type Identity struct {
	TeamID string
	Team   string
	UserID string // conclave's bot user
	BotID  string // conclave's bot id, on every message it posts
}

// Bot is the Socket Mode side of the transport: it keeps the connection
// open (reconnecting with backoff), hands message events to the Handler,
// acknowledging each envelope only once it is recorded, and slash
// commands, direct messages and button presses to the command handler.
// It talks to Slack's Web API through its WebAPI. Create it with New,
// then call Run.
type Bot struct {
	opts     Options
	web      *WebAPI
	handler  Handler
	commands CommandHandler // nil: commands are answered "not available"
	log      *slog.Logger
	socket   *socketmode.Client
	metrics  *metrics
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error // the wait between record attempts
	jitter   func() float64

	mu           sync.Mutex
	connected    bool
	everUp       bool
	disconnected time.Time

	commandWG    sync.WaitGroup
	commandSlots chan struct{}
	handling     *serial.Queues[string] // by channel and thread
	draining     atomic.Bool            // see Drain
}

// New builds the Socket Mode side over web: events go to handler, slash
// commands (and direct events and button presses, when it handles them)
// to commands, which may be nil. It starts nothing: Run connects.
func New(web *WebAPI, handler Handler, commands CommandHandler) *Bot {
	return &Bot{
		opts:     web.opts,
		web:      web,
		handler:  handler,
		commands: commands,
		log:      web.log,
		socket: socketmode.New(web.api,
			socketmode.OptionPingInterval(web.opts.PingTimeout),
			socketmode.OptionLog(slog.NewLogLogger(web.log.Handler(), slog.LevelDebug))),
		metrics:      web.metrics,
		now:          time.Now,
		sleep:        backoff.Sleep,
		jitter:       rand.Float64,
		commandSlots: make(chan struct{}, 4),
		handling:     serial.New[string](web.opts.HandleParallel),
	}
}

// restartingText answers a slash command while conclave shuts down.
const restartingText = "conclave is restarting, try again in a moment"

// Drain prepares the shutdown: the Socket Mode connection stays open (Run
// goes on until its context ends), but message events are no longer
// handed on nor acknowledged, so that Slack delivers them again (to
// another replica, or after the restart), and a slash command is answered
// "conclave is restarting, try again in a moment".
func (b *Bot) Drain() {
	if !b.draining.Swap(true) {
		b.log.Info("draining: events are left to Slack, commands are told to try again")
	}
}

// Run identifies the bot, connects over Socket Mode and handles envelopes
// until ctx ends (then it returns nil) or the tokens are refused.
func (b *Bot) Run(ctx context.Context) error {
	if b.opts.AppToken == "" {
		return errors.New("bot: no app-level token (slack.app_token or SLACK_APP_TOKEN)")
	}
	if _, err := b.web.Identify(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var connErr error
	wg.Go(func() {
		defer cancel()
		connErr = b.connect(ctx)
	})
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case ev := <-b.socket.Events:
			b.dispatch(ctx, ev)
		}
	}
	wg.Wait()
	b.handling.Wait()
	b.commandWG.Wait()
	if connErr != nil && !errors.Is(connErr, context.Canceled) {
		return connErr
	}
	return nil
}

// connect runs the socketmode client, which reconnects by itself after
// drops, disconnect requests and missed pings; when it gives up on an error
// other than refused credentials, it is started again after a backoff.
func (b *Bot) connect(ctx context.Context) error {
	restarts := 0
	for {
		err := b.socket.RunContext(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if IsAuthError(err) {
			b.log.Error("Slack refused the app-level token", slog.Any(logError, err))
			return fmt.Errorf("bot: socket mode: %w", err)
		}
		restarts++
		delay := reconnects.Wait(restarts, rand.Float64(), 0) // #nosec G404 -- backoff jitter, not a secret
		b.log.Warn("socket mode stopped; starting again", slog.Any(logError, err), slog.Duration("in", delay))
		if err := backoff.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// reconnects spaces the restarts of the socketmode client: from 1 s,
// doubling, capped at a minute, with jitter.
var reconnects = backoff.Policy{Base: time.Second, Cap: time.Minute}

// IsAuthError reports whether Slack refused a token.
func IsAuthError(err error) bool {
	switch errorCode(err) {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type":
		return true
	}
	return false
}

func (b *Bot) setConnected(up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.connected && !up {
		b.disconnected = b.now()
		b.metrics.reconnects.Inc()
	}
	b.connected = up
	if up {
		b.everUp = true
	}
}

// Ready reports nil while the Socket Mode connection is up, and for 30 s
// after it went down (Slack asks clients to reconnect regularly); an error
// before the first connection and after the grace.
func (b *Bot) Ready() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.connected:
		return nil
	case !b.everUp:
		return errors.New("bot: not connected to Slack yet")
	case b.now().Sub(b.disconnected) < readyGrace:
		return nil
	default:
		return fmt.Errorf("bot: disconnected from Slack since %s", b.disconnected.UTC().Format(time.RFC3339))
	}
}

// Log attribute keys.
const (
	logError    = "err"
	logEnvelope = "envelope"
	logEventID  = "event_id"
	logChannel  = "channel"
	logMethod   = "method"
)

func (b *Bot) isConnected() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connected
}
