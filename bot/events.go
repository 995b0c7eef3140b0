package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/internal/backoff"
)

// dispatch handles one event of the socketmode client, in arrival order.
// Message envelopes are recorded in order within a thread (handleEnvelope);
// slash commands run beside, after their ack.
func (b *Bot) dispatch(ctx context.Context, ev socketmode.Event) {
	switch ev.Type {
	case socketmode.EventTypeConnecting:
		b.setConnected(false)
		b.log.Debug("connecting to Slack")
	case socketmode.EventTypeConnectionError:
		b.setConnected(false)
		if e, ok := ev.Data.(*slack.ConnectionErrorEvent); ok {
			b.log.Warn("could not connect to Slack", slog.Int("attempt", e.Attempt),
				slog.Duration("retry_in", e.Backoff), slog.Any(logError, e.ErrorObj))
		}
	case socketmode.EventTypeInvalidAuth:
		b.setConnected(false)
		b.log.Error("Slack refused the app-level token")
	case socketmode.EventTypeConnected:
		b.log.Debug("socket open")
	case socketmode.EventTypeHello:
		b.setConnected(true)
		b.log.Info("connected to Slack")
	case socketmode.EventTypeIncomingError:
		if e, ok := ev.Data.(*slack.IncomingEventError); ok {
			b.log.Warn("socket read failed", slog.Any(logError, e.ErrorObj))
		}
	case socketmode.EventTypeErrorWriteFailed:
		if e, ok := ev.Data.(*socketmode.ErrorWriteFailed); ok {
			b.log.Warn("acknowledgement not sent; Slack will deliver the envelope again",
				slog.String(logEnvelope, e.Response.EnvelopeID), slog.Any(logError, e.Cause))
		}
	case socketmode.EventTypeEventsAPI:
		b.metrics.envelopes.WithLabelValues("events_api").Inc()
		if !b.draining.Load() && isOwnPost(ev.Data, b.web.identity()) {
			// Slack echoes every post of conclave's, half the envelopes
			// of a conversation: they are known from the client's parse,
			// without decoding the payload again.
			b.metrics.skipped.WithLabelValues(string(skipOwn)).Inc()
			b.ack(ctx, *ev.Request, nil)
			return
		}
		b.handleEnvelope(ctx, *ev.Request)
	case socketmode.EventTypeSlashCommand:
		b.metrics.envelopes.WithLabelValues("slash_commands").Inc()
		b.handleCommand(ctx, ev)
	case socketmode.EventTypeInteractive:
		b.metrics.envelopes.WithLabelValues("interactive").Inc()
		b.handleInteraction(ctx, ev)
	case socketmode.EventTypeErrorBadMessage:
		b.handleBadMessage(ctx, ev)
	}
}

// handleEnvelope records one events_api envelope: decode, drop what is not
// for conclave, then normalise, Record, ack and dispatch, in arrival order
// within a thread, and with Options.HandleParallel above 1 several threads
// at once (each envelope must be acknowledged within 3 s, and recording
// takes store round trips). A Record error leaves the envelope unacknowledged so
// that Slack delivers it again.
func (b *Bot) handleEnvelope(ctx context.Context, req socketmode.Request) {
	arrived := b.now()
	log := b.log.With(slog.String(logEnvelope, req.EnvelopeID))
	if b.draining.Load() {
		log.Debug("draining: event left unacknowledged for Slack to deliver again")
		return
	}
	if req.RetryAttempt > 0 {
		log = log.With(slog.Int("retry_attempt", req.RetryAttempt), slog.String("retry_reason", req.RetryReason))
	}
	ev, skip, err := decodeMessageIn(req.Payload, b.web.identity(), b.opts.DirectConversations)
	switch {
	case err != nil:
		// It will not decode better next time: acknowledge and drop it.
		b.metrics.skipped.WithLabelValues("undecodable").Inc()
		log.Warn("dropped an event that does not decode", slog.Any(logError, err))
		b.ack(ctx, req, nil)
		return
	case skip == skipDirect || skip == skipNotMessage:
		if d, ok := decodeDirect(req.Payload, b.web.identity()); ok {
			b.ack(ctx, req, nil)
			if d.Kind == DirectThreadStarted {
				b.offerPrompts(ctx, d)
			} else {
				b.handleDirect(ctx, d)
			}
			return
		}
		fallthrough
	case skip != "":
		b.metrics.skipped.WithLabelValues(string(skip)).Inc()
		if skip == skipRateLimited {
			log.Warn("Slack reports that it is dropping events for this app (over 30,000 an hour)")
		} else {
			log.Debug("event ignored", slog.String("reason", string(skip)))
		}
		b.ack(ctx, req, nil)
		return
	}
	thread := ev.ThreadTS
	if thread == "" {
		thread = ev.TS
	}
	// One thread's events are recorded in arrival order, threads at once;
	// when every slot is taken the socket's reader waits, and an event
	// dropped at shutdown stays unacknowledged (Slack delivers it again).
	b.handling.Go(ctx, ev.Channel+"/"+thread, func() { b.record(ctx, req, ev, arrived, log) })
}

// record normalises an event, has the handler record it (trying again
// within recordWindow of its arrival while the store does not answer),
// acknowledges its envelope and only then dispatches the ticket; a Record
// error leaves the envelope unacknowledged. When the store still does not
// answer at the end of the window, the record is tried on until
// lateRecordLimit after the arrival, and the event runs as soon as it
// lands: a store restart costs seconds, not Slack's redelivery, which
// the engine then records once (its event id is known). Tries go on in
// the thread's slot, so the thread's later events, the redelivery among
// them, are still recorded after it.
func (b *Bot) record(ctx context.Context, req socketmode.Request, ev agents.Event, arrived time.Time, log *slog.Logger) {
	b.normalize(ctx, &ev)
	if tr := b.opts.Tracer; tr != nil {
		var span trace.Span
		ctx, span = tr.Start(ctx, "slack.event", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			attribute.String("slack.event_id", ev.ID), attribute.String("slack.channel", ev.Channel),
			attribute.String("slack.ts", ev.TS), attribute.String("slack.thread_ts", ev.ThreadTS)))
		defer span.End()
		ev.Trace = agents.Traceparent(ctx)
	}
	ticket, attempts, err := b.recordUntil(ctx, ev, arrived.Add(recordWindow), 1)
	if err != nil {
		b.metrics.handleErrors.Inc()
		log.Warn("event not recorded; left unacknowledged so that Slack delivers it again",
			slog.String(logEventID, ev.ID), slog.String(logChannel, ev.Channel),
			slog.Int("attempts", attempts), slog.Any(logError, err))
		if b.stopTrying(ctx, err) {
			return
		}
		ticket, attempts, err = b.recordUntil(ctx, ev, arrived.Add(lateRecordLimit), attempts+1)
		if err != nil {
			log.Warn("event still not recorded; its redelivery is left to record it",
				slog.String(logEventID, ev.ID), slog.Int("attempts", attempts), slog.Any(logError, err))
			return
		}
		// Its envelope's window is over: Slack delivers it again whatever
		// is written now, so it is not acknowledged, only run.
		log.Info("event recorded after its acknowledgement window; it runs now, and its redelivery is recorded once",
			slog.String(logEventID, ev.ID), slog.Int("attempts", attempts))
		ticket.Dispatch()
		return
	}
	if attempts > 1 {
		log.Info("event recorded once the store answered again",
			slog.String(logEventID, ev.ID), slog.Int("attempts", attempts))
	}
	b.ack(ctx, req, nil)
	ticket.Dispatch()
}

// recordRetries spaces the record attempts of one event while the store
// does not answer; within recordWindow that makes a handful.
var recordRetries = backoff.Policy{Base: 100 * time.Millisecond, Cap: 400 * time.Millisecond}

// lateRecordLimit is how long after its arrival an event whose record did
// not land within recordWindow is still tried (SPEC §14.6); past it,
// Slack's redelivery is the event's last chance.
const lateRecordLimit = 60 * time.Second

// stopTrying tells whether a failed record must not be tried again: an
// error other than the store not answering, the end of ctx, or a drain
// (the envelope is Slack's to deliver elsewhere).
func (b *Bot) stopTrying(ctx context.Context, err error) bool {
	return !errors.Is(err, agents.ErrStoreUnavailable) || ctx.Err() != nil || b.draining.Load()
}

// recordUntil has the handler record ev, and while the error says the store
// did not answer (agents.ErrStoreUnavailable) tries again, spaced by
// recordRetries, until until. Each attempt may last until then, and no
// longer than recordWindow; the very first one (first == 1) at least
// handleTimeout. Any other error, the end
// of ctx or the start of a drain ends the tries. Attempts are numbered
// from first; it reports the last one made.
func (b *Bot) recordUntil(ctx context.Context, ev agents.Event, until time.Time, first int) (agents.Ticket, int, error) {
	for n := first; ; n++ {
		// A try past the window lasts no longer than the window, so that
		// a drain or a shutdown is seen within as long.
		limit := min(until.Sub(b.now()), recordWindow)
		if n == 1 {
			limit = max(limit, handleTimeout)
		}
		hctx, cancel := context.WithTimeout(ctx, limit)
		ticket, err := b.handler.Record(hctx, ev)
		cancel()
		if err == nil || b.stopTrying(ctx, err) {
			return ticket, n, err
		}
		wait := recordRetries.Wait(n, b.jitter(), 0)
		if !b.now().Add(wait).Before(until) {
			return ticket, n, err
		}
		b.log.Debug("store did not answer; recording the event again", slog.String(logEventID, ev.ID),
			slog.Int("attempt", n), slog.Duration("in", wait), slog.Any(logError, err))
		if serr := b.sleep(ctx, wait); serr != nil {
			return ticket, n, err
		}
	}
}

// handleBadMessage deals with a frame the socketmode client could not parse
// (an inner event type it does not know, say): conclave's own decoder gets a
// chance at events_api envelopes, and anything else with an envelope id is
// acknowledged so that it is not delivered again and again.
func (b *Bot) handleBadMessage(ctx context.Context, ev socketmode.Event) {
	bad, ok := ev.Data.(*socketmode.ErrorBadMessage)
	if !ok {
		return
	}
	var req socketmode.Request
	if err := json.Unmarshal(bad.Message, &req); err != nil || req.EnvelopeID == "" {
		b.log.Warn("unreadable frame from Slack", slog.Any(logError, bad.Cause))
		return
	}
	if req.Type == socketmode.RequestTypeEventsAPI {
		b.metrics.envelopes.WithLabelValues("events_api").Inc()
		b.handleEnvelope(ctx, req)
		return
	}
	b.log.Warn("acknowledged an envelope that does not parse", slog.String(logEnvelope, req.EnvelopeID),
		slog.String("type", req.Type), slog.Any(logError, bad.Cause))
	b.ack(ctx, req, nil)
}

// handleCommand acknowledges a slash command at once, then lets the command
// handler answer it.
func (b *Bot) handleCommand(ctx context.Context, ev socketmode.Event) {
	cmd, ok := ev.Data.(slack.SlashCommand)
	if b.draining.Load() {
		b.ack(ctx, *ev.Request, map[string]any{"response_type": "ephemeral", "text": restartingText})
		return
	}
	h := b.commands
	if !ok || h == nil {
		b.ack(ctx, *ev.Request, map[string]any{
			"response_type": "ephemeral",
			"text":          "conclave cannot answer commands right now.",
		})
		return
	}
	b.ack(ctx, *ev.Request, nil)
	b.beside(ctx, func() { h.HandleCommand(ctx, cmd) })
}

// beside runs fn in one of the command slots, beside the envelope loop.
// The wait for a free slot happens beside the loop too: message envelopes
// must not queue behind slow commands, or their acks would be late.
func (b *Bot) beside(ctx context.Context, fn func()) {
	b.commandWG.Go(func() {
		select {
		case b.commandSlots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-b.commandSlots }()
		fn()
	})
}

// ack queues the acknowledgement of an envelope; it is written on the open
// socket (or the next one), and given up when ctx ends.
func (b *Bot) ack(ctx context.Context, req socketmode.Request, payload any) {
	if err := b.socket.AckCtx(ctx, req.EnvelopeID, payload); err != nil {
		b.log.Warn("acknowledgement not queued", slog.String(logEnvelope, req.EnvelopeID), slog.Any(logError, err))
	}
}

// skipReason says why an event never reaches the handler. The values are
// metric labels.
type skipReason string

const (
	skipNotCallback   skipReason = "not_event_callback"
	skipRateLimited   skipReason = "app_rate_limited"
	skipNotMessage    skipReason = "not_message"
	skipDirect        skipReason = "direct_message"
	skipOwn           skipReason = "own_post"
	skipSubtype       skipReason = "subtype"
	skipUnchanged     skipReason = "unchanged_edit"
	skipHiddenUnknown skipReason = "hidden"
)

// wireMessage is the part of a Slack message event (or of a message inside
// message_changed, message_deleted, conversations.replies) conclave reads.
type wireMessage struct {
	Type            string       `json:"type"`
	Subtype         string       `json:"subtype"`
	Channel         string       `json:"channel"`
	ChannelType     string       `json:"channel_type"`
	User            string       `json:"user"`
	BotID           string       `json:"bot_id"`
	Username        string       `json:"username"`
	BotProfile      *botProfile  `json:"bot_profile"`
	Text            string       `json:"text"`
	TS              string       `json:"ts"`
	ThreadTS        string       `json:"thread_ts"`
	EventTS         string       `json:"event_ts"`
	Team            string       `json:"team"`
	Files           []wireFile   `json:"files"`
	Hidden          bool         `json:"hidden"`
	DeletedTS       string       `json:"deleted_ts"`
	Message         *wireMessage `json:"message"`
	PreviousMessage *wireMessage `json:"previous_message"`
}

type botProfile struct {
	Name string `json:"name"`
}

type wireFile struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Title string `json:"title"`
}

// contentSubtypes are the message subtypes that carry something said in the
// channel; every other subtype (joins, topic changes, pins, …) is noise.
var contentSubtypes = map[string]bool{
	"": true, "thread_broadcast": true, "file_share": true, "me_message": true, "bot_message": true,
}

// decodeMessage turns an events_api payload into an Event with Raw set
// (Text and UserName are filled in by normalize), or says why the event is
// not for the handler. self is conclave's own identity, whose posts are
// skipped.
func decodeMessage(payload []byte, self Identity) (agents.Event, skipReason, error) {
	return decodeMessageIn(payload, self, false)
}

// decodeMessageIn is decodeMessage that, with im, also decodes the
// messages of a person's direct message with conclave (a "D…" channel;
// group DMs stay skipped).
func decodeMessageIn(payload []byte, self Identity, im bool) (agents.Event, skipReason, error) {
	var outer struct {
		Type      string          `json:"type"`
		TeamID    string          `json:"team_id"`
		EventID   string          `json:"event_id"`
		EventTime int64           `json:"event_time"`
		Event     json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(payload, &outer); err != nil {
		return agents.Event{}, "", fmt.Errorf("payload: %w", err)
	}
	switch outer.Type {
	case "event_callback":
	case "app_rate_limited":
		return agents.Event{}, skipRateLimited, nil
	default:
		return agents.Event{}, skipNotCallback, nil
	}
	var m wireMessage
	if err := json.Unmarshal(outer.Event, &m); err != nil {
		return agents.Event{}, "", fmt.Errorf("event %s: %w", outer.EventID, err)
	}
	if m.Type != "message" {
		return agents.Event{}, skipNotMessage, nil
	}
	if m.ChannelType == "im" || m.ChannelType == "mpim" || strings.HasPrefix(m.Channel, "D") {
		if !im || m.ChannelType == "mpim" || !strings.HasPrefix(m.Channel, "D") {
			return agents.Event{}, skipDirect, nil
		}
	}
	ev := agents.Event{ID: outer.EventID, Team: outer.TeamID, Channel: m.Channel, At: agents.TSTime(m.EventTS)}
	if ev.Team == "" {
		ev.Team = m.Team
	}
	var skip skipReason
	switch m.Subtype {
	case "message_changed":
		skip = decodeEdit(&ev, &m, self)
	case "message_deleted":
		ev.Kind = agents.EventDeleted
		ev.TS = m.DeletedTS
		if p := m.PreviousMessage; p != nil {
			ev.ThreadTS, ev.UserID, ev.BotID = p.ThreadTS, p.User, p.BotID
		}
	default:
		skip = fillMessage(&ev, &m, self)
	}
	if skip != "" {
		return agents.Event{}, skip, nil
	}
	if ev.Channel == "" || ev.TS == "" {
		return agents.Event{}, "", fmt.Errorf("event %s: message without channel or ts", outer.EventID)
	}
	if ev.ThreadTS == ev.TS {
		ev.ThreadTS = ""
	}
	if ev.At.IsZero() {
		ev.At = agents.TSTime(ev.TS)
	}
	return ev, "", nil
}

// decodeEdit fills ev from a message_changed event.
func decodeEdit(ev *agents.Event, m *wireMessage, self Identity) skipReason {
	cur := m.Message
	if cur == nil {
		return skipHiddenUnknown
	}
	if p := m.PreviousMessage; p != nil && p.Text == cur.Text && len(p.Files) == len(cur.Files) {
		// Slack also sends message_changed when an unfurl is attached or
		// a reply count changes: nothing was said.
		return skipUnchanged
	}
	if skip := fillMessage(ev, cur, self); skip != "" {
		return skip
	}
	ev.Kind = agents.EventEdited
	return ""
}

// fillMessage fills ev from a message that says something, or says why it
// is skipped.
func fillMessage(ev *agents.Event, m *wireMessage, self Identity) skipReason {
	if !contentSubtypes[m.Subtype] {
		return skipSubtype
	}
	if isOwn(m, self) {
		return skipOwn
	}
	ev.TS, ev.ThreadTS, ev.UserID, ev.BotID, ev.Subtype = m.TS, m.ThreadTS, m.User, m.BotID, m.Subtype
	ev.Raw = withFiles(m.Text, m.Files)
	if m.BotID != "" {
		ev.UserName = botName(m)
	}
	return ""
}

// isOwnPost says whether data, the socketmode client's parse of an
// events_api envelope, is a post of conclave's own in a channel: what
// decodeMessage would skip as skipOwn.
func isOwnPost(data any, self Identity) bool {
	api, ok := data.(slackevents.EventsAPIEvent)
	if !ok || api.Type != slackevents.CallbackEvent {
		return false
	}
	m, ok := api.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || m.Type != "message" || !contentSubtypes[m.SubType] ||
		m.ChannelType == "im" || m.ChannelType == "mpim" || strings.HasPrefix(m.Channel, "D") {
		return false
	}
	return self.BotID != "" && m.BotID == self.BotID || self.UserID != "" && m.User == self.UserID
}

func isOwn(m *wireMessage, self Identity) bool {
	return self.BotID != "" && m.BotID == self.BotID || self.UserID != "" && m.User == self.UserID
}

func botName(m *wireMessage) string {
	switch {
	case m.Username != "":
		return m.Username
	case m.BotProfile != nil && m.BotProfile.Name != "":
		return m.BotProfile.Name
	}
	return m.BotID
}

// withFiles appends "[file: name]" for each file shared with a message.
func withFiles(text string, files []wireFile) string {
	if len(files) == 0 {
		return text
	}
	parts := make([]string, 0, len(files)+1)
	if text != "" {
		parts = append(parts, text)
	}
	for _, f := range files {
		name := f.Name
		if name == "" {
			name = f.Title
		}
		if name == "" {
			name = f.ID
		}
		parts = append(parts, "[file: "+name+"]")
	}
	return strings.Join(parts, "\n")
}

// normalize fills ev.Text and ev.UserName, looking names up within
// lookupTimeout.
func (b *Bot) normalize(ctx context.Context, ev *agents.Event) {
	if ev.Kind == agents.EventDeleted {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	ev.Text = normalizeText(ev.Raw, b.web.names.lookup(ctx))
	if ev.UserName == "" && ev.UserID != "" {
		if name, ok := b.web.names.userName(ctx, ev.UserID); ok {
			ev.UserName = name
		} else {
			ev.UserName = ev.UserID
		}
	}
}

// errorCode is the error code of a Slack ok:false answer, or "".
func errorCode(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return ""
}
