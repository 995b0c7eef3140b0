package bot

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
)

// Native streaming (slack.stream_method = "auto"): a reply being written
// is shown through chat.startStream, chat.appendStream and
// chat.stopStream rather than chat.postMessage and repeated chat.update
// (Tier 3, shared by every thread that streams at once). The engine does
// not know: it posts partial replies and updates them as before, and the
// poster turns the first partial post into a stream, later ones into
// appends of what was added, and the final update into the stop, which
// carries the feedback buttons and the post id. A stream Slack ends or
// refuses, one older than streamMaxAge, or text that no longer extends
// what was streamed falls back to chat.update of the same message with
// the full text (the stream stopped first: an open stream cannot be
// edited).
//
// Exactly once holds as before: the stream's message is the post's
// first part, whose ts the engine records, and the stop gives it the
// post id in its metadata. One gap remains, documented in
// docs/decisions.md: chat.startStream carries no metadata, so a stream
// whose start was accepted but whose answer was lost cannot be found by
// its post id.

// Stream methods (Options.StreamMethod).
const (
	StreamAuto   = "auto"   // native streaming, falling back to chat.update
	StreamUpdate = "update" // chat.postMessage, then chat.update
)

const (
	// streamMaxAge: a stream this old is stopped and its message updated
	// instead (Slack ends streams after about five minutes).
	streamMaxAge = 4 * time.Minute
	// streamChunk and streamEvery: text is appended once this much of it
	// waits, or this long after the last append.
	streamChunk = 256
	streamEvery = time.Second
)

// rememberedRefusals are the chat.startStream errors kept for the
// process: refused for the channel type, or everywhere (a workspace
// without the method, a token without the scope).
var rememberedRefusals = map[string]bool{
	"channel_type_not_supported": true, "unknown_method": true, "missing_scope": true,
	"not_allowed_token_type": true,
}

// streams are the native streams this process has open, and the
// refusals it remembers.
type streams struct {
	mu      sync.Mutex
	live    map[string]*liveStream // by channel/ts
	refused map[string]string      // channel type, or "*", → the error
}

// liveStream is one message being streamed.
type liveStream struct {
	sent     string // the markdown Slack holds
	started  time.Time
	appended time.Time
	fallback bool // shown with chat.update from now on
}

func newStreams() *streams {
	return &streams{live: make(map[string]*liveStream), refused: make(map[string]string)}
}

func streamKey(channel, ts string) string { return channel + "/" + ts }

// streamChannelType is a channel's type as chat.startStream refuses it.
func streamChannelType(channel string) string {
	switch {
	case strings.HasPrefix(channel, "D"):
		return "im"
	case strings.HasPrefix(channel, "G"):
		return "group"
	default:
		return "channel"
	}
}

func (s *streams) get(channel, ts string) *liveStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[streamKey(channel, ts)]
}

func (s *streams) put(channel, ts string, l *liveStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[streamKey(channel, ts)] = l
}

func (s *streams) drop(channel, ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, streamKey(channel, ts))
}

// prune forgets streams older than twice streamMaxAge: their final
// update never came (the turn was given up), and Slack has ended them.
func (s *streams) prune(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, l := range s.live {
		if now.Sub(l.started) > 2*streamMaxAge {
			delete(s.live, k)
		}
	}
}

// refusal is the remembered refusal of streaming in channel, or "".
func (s *streams) refusal(channel string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.refused["*"]; code != "" {
		return code
	}
	return s.refused[streamChannelType(channel)]
}

func (s *streams) refuse(channel, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := "*"
	if code == "channel_type_not_supported" {
		key = streamChannelType(channel)
	}
	s.refused[key] = code
}

// streamBoundary ends a sentence (followed by a blank, or last) or a
// line.
var streamBoundary = regexp.MustCompile(`[.!?…。！？][)"'”’\]]*(?:\s|$)|\n`)

// settled is the part of a reply being written that later text will not
// change: up to its last sentence or line end (the text is trimmed: a
// sentence that ends it is taken as ended). What follows may still be
// rewritten as it is being shown (a code fence closed for the moment, a
// link not yet spelled out).
func settled(text string) string {
	ends := streamBoundary.FindAllStringIndex(text, -1)
	if len(ends) == 0 {
		return ""
	}
	return text[:ends[len(ends)-1][1]]
}

// streamArgs are what the first part of a post needs to be streamed.
type streamArgs struct {
	reply    agents.Reply
	text     string        // the part's markdown, made inert
	mentions bool          // the part opens with mentions (a block a stream cannot show)
	extra    []slack.Block // the blocks under the text (feedback buttons)
	metadata *slack.SlackMetadata
	common   []slack.MsgOption // thread, name, icon
}

// streamFirst shows the first part of a post natively when it can. done
// reports that it did (ts is then the message); otherwise the caller
// posts or updates the part as usual.
func (po *poster) streamFirst(ctx context.Context, a streamArgs) (ts string, done bool, err error) {
	if po.streamMethod != StreamAuto {
		return "", false, nil
	}
	r := a.reply
	now := po.now()
	switch {
	case r.Partial && r.Update == "":
		return po.startStream(ctx, a, now)
	case r.Update == "":
		return "", false, nil
	}
	l := po.streams.get(r.Channel, r.Update)
	if l == nil {
		// A message this process did not start (a run of the turn
		// before a restart did): stop it, should it be a stream still
		// open, and update it from now on.
		po.stopStream(ctx, r.Channel, r.Update)
		if r.Partial {
			po.streams.put(r.Channel, r.Update, &liveStream{started: now, appended: now, fallback: true})
		}
		return "", false, nil
	}
	if !r.Partial {
		defer po.streams.drop(r.Channel, r.Update)
	}
	if l.fallback {
		return "", false, nil
	}
	reason := ""
	switch {
	case now.Sub(l.started) >= streamMaxAge:
		reason = "the stream is too old"
	case r.Partial:
		return po.appendStream(ctx, a, l, now)
	case a.mentions:
		reason = "the reply mentions users"
	case !strings.HasPrefix(a.text, l.sent):
		reason = "the final text does not extend the streamed one"
	default:
		return po.finishStream(ctx, a, l)
	}
	po.fallBack(ctx, r, l, reason, nil)
	return "", false, nil
}

// startStream starts the stream of a partial reply, or says why not: a
// refusal remembered or just met, no one to stream to in a channel.
func (po *poster) startStream(ctx context.Context, a streamArgs, now time.Time) (string, bool, error) {
	r := a.reply
	po.streams.prune(now)
	if po.streams.refusal(r.Channel) != "" {
		return "", false, nil
	}
	opts := append(a.common[:len(a.common):len(a.common)], slack.MsgOptionMarkdownText(settled(a.text)))
	if streamChannelType(r.Channel) != "im" {
		team := po.identity().TeamID
		if r.Recipient == "" || team == "" {
			return "", false, nil // Slack needs both outside a DM
		}
		opts = append(opts, slack.MsgOptionRecipientUserID(r.Recipient), slack.MsgOptionRecipientTeamID(team))
	}
	var ts string
	err := po.call(ctx, "chat.startStream", false, func(ctx context.Context) (err error) {
		_, ts, err = po.api.StartStreamContext(ctx, r.Channel, opts...)
		return err
	})
	code := errorCode(err)
	switch {
	case err == nil:
		po.streams.put(r.Channel, ts, &liveStream{sent: settled(a.text), started: now, appended: now})
		return ts, true, nil
	case code == "":
		// No answer: Slack may have started it. The engine looks for
		// the post by its id; see the type's comment.
		return "", true, err
	case rememberedRefusals[code]:
		po.streams.refuse(r.Channel, code)
		po.log.Warn("Slack refuses native streaming; replies are updated instead",
			slog.String(logChannel, r.Channel), slog.String("code", code))
	default:
		po.log.Info("a stream could not start; the reply is posted and updated instead",
			slog.String(logChannel, r.Channel), slog.String("code", code))
	}
	return "", false, nil
}

// appendStream appends what was settled since the last append, once
// enough waits or enough time passed.
func (po *poster) appendStream(ctx context.Context, a streamArgs, l *liveStream, now time.Time) (string, bool, error) {
	r := a.reply
	text := settled(a.text)
	if !strings.HasPrefix(text, l.sent) {
		po.fallBack(ctx, r, l, "the text does not extend the streamed one", nil)
		return "", false, nil
	}
	add := text[len(l.sent):]
	if add == "" || len([]rune(add)) < streamChunk && now.Sub(l.appended) < streamEvery {
		return r.Update, true, nil
	}
	err := po.call(ctx, "chat.appendStream", false, func(ctx context.Context) error {
		_, _, err := po.api.AppendStreamContext(ctx, r.Channel, r.Update, slack.MsgOptionMarkdownText(add))
		return err
	})
	if err != nil {
		po.fallBack(ctx, r, l, "chat.appendStream failed", err)
		return "", false, nil
	}
	l.sent, l.appended = text, now
	return r.Update, true, nil
}

// finishStream stops the stream with the rest of the text, the blocks
// under it and the post's metadata.
func (po *poster) finishStream(ctx context.Context, a streamArgs, l *liveStream) (string, bool, error) {
	r := a.reply
	opts := []slack.MsgOption{}
	if rest := a.text[len(l.sent):]; rest != "" {
		opts = append(opts, slack.MsgOptionMarkdownText(rest))
	}
	if len(a.extra) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(a.extra...))
	}
	if a.metadata != nil {
		opts = append(opts, slack.MsgOptionMetadata(*a.metadata))
	}
	err := po.call(ctx, "chat.stopStream", false, func(ctx context.Context) error {
		_, _, err := po.api.StopStreamContext(ctx, r.Channel, r.Update, opts...)
		return err
	})
	if err != nil {
		po.fallBack(ctx, r, l, "chat.stopStream failed", err)
		return "", false, nil
	}
	return r.Update, true, nil
}

// fallBack turns a stream into a message updated with chat.update: the
// stream is stopped (an open stream cannot be edited), and every later
// post of the reply updates it.
func (po *poster) fallBack(ctx context.Context, r agents.Reply, l *liveStream, why string, err error) {
	l.fallback = true
	po.log.Info("native stream given up; the message is updated instead", slog.String(logChannel, r.Channel),
		slog.String("ts", r.Update), slog.String("why", why), slog.String("code", errorCode(err)))
	po.stopStream(ctx, r.Channel, r.Update)
}

// stopStream stops a stream that may still be open; one already ended
// (or never a stream) is not an error.
func (po *poster) stopStream(ctx context.Context, channel, ts string) {
	err := po.call(ctx, "chat.stopStream", false, func(ctx context.Context) error {
		_, _, err := po.api.StopStreamContext(ctx, channel, ts)
		return err
	})
	if err != nil && errorCode(err) != "message_not_in_streaming_state" {
		po.log.Info("stopping a stream failed", slog.String(logChannel, channel), slog.String("ts", ts), slog.Any(logError, err))
	}
}

// trackFallback remembers a partial reply posted with chat.postMessage
// (its stream refused or impossible) so that its updates are not taken
// for a stream started before a restart.
func (po *poster) trackFallback(r agents.Reply, ts string) {
	if po.streamMethod == StreamAuto && r.Partial && r.Update == "" && ts != "" {
		now := po.now()
		po.streams.put(r.Channel, ts, &liveStream{started: now, appended: now, fallback: true})
	}
}
