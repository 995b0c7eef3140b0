package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/internal/clip"
)

// Slack's limits, with room to spare.
const (
	// blockLimit bounds one markdown block, in bytes (so at most as many
	// characters); Slack allows 12,000 characters of markdown per message.
	blockLimit = 10000
	// fallbackLimit bounds the plain-text fallback of a message; longer
	// plain text has been refused with msg_too_long around 4,000.
	fallbackLimit = 3000
	// usernameLimit is Slack's limit on a custom username.
	usernameLimit = 80
	// turnEventType names the message metadata that carries a turn id.
	turnEventType = "conclave_turn"
)

// ErrEmptyReply is returned by PostReply for a reply with nothing to post.
var ErrEmptyReply = errors.New("bot: empty reply")

// poster is the engine's side of Slack (agents.Chat): it posts replies as
// the agent — made inert, split to fit, streamed natively when it can be —
// finds posts again by their id, sets reactions, shows ephemeral notices
// and reads thread history and channel descriptions. The WebAPI owns one
// and embeds it, so that its methods are the WebAPI's.
type poster struct {
	*client
	names   *directory
	streams *streams
	// status, set by NewStatus, shows who works in threads; a reply
	// waits for its thread's (Status.await).
	status atomic.Pointer[Status]
	// identity is who conclave is, once Identify asked (WebAPI.identity).
	identity func() Identity
	now      func() time.Time

	streamMethod    string // Options.StreamMethod
	ipfsGateway     string // Options.IPFSGateway
	workingReaction string // Options.WorkingReaction
}

var _ agents.Chat = (*poster)(nil)

// newPoster builds the poster of w, sharing its client and directory.
func newPoster(w *WebAPI) *poster {
	return &poster{
		client: w.client, names: w.names, streams: newStreams(), identity: w.identity, now: w.now,
		streamMethod: w.opts.StreamMethod, ipfsGateway: w.opts.IPFSGateway, workingReaction: w.opts.WorkingReaction,
	}
}

// PostReply posts r in its thread as the agent: the text made inert (see
// inert), the users in r.Mention named first, split into as many messages
// (parts) as needed, each with a markdown block, a plain-text fallback,
// unfurling off and message metadata carrying the post id (r.TurnID) and
// the part's index. The parts in r.Posted are not posted again. Rate
// limits are waited out for as long as ctx allows. With a thread status
// (NewStatus), the post first waits, a little at most, for the status
// changes of its thread asked before it (Status.await), so that a turn's
// status comes before its post. It returns the ts of
// every part posted, r.Posted's first; when a part fails, those before it
// and the error, a *agents.PostError saying whether trying again may help.
func (po *poster) PostReply(ctx context.Context, r agents.Reply) ([]string, error) {
	if r.Channel == "" {
		return nil, &agents.PostError{Err: errors.New("bot: post reply: no channel"), Permanent: true}
	}
	mentions := po.mentions(r.Mention)
	parts := po.replyParts(ctx, r)
	if len(parts) == 0 && len(mentions) == 0 {
		return nil, &agents.PostError{Err: ErrEmptyReply, Permanent: true}
	}
	if len(parts) == 0 {
		parts = []string{""}
	}
	if st := po.status.Load(); st != nil && r.ThreadTS != "" {
		st.await(ctx, r.Channel, r.ThreadTS)
	}
	common := po.commonOptions(r)
	posted := slices.Clone(r.Posted)
	for i := len(posted); i < len(parts); i++ {
		p := replyPart{i: i, n: len(parts), text: parts[i]}
		if i == 0 {
			p.mentions = mentions
		}
		ts, err := po.postPart(ctx, r, p, common)
		if err != nil {
			return posted, postError(r, p, err)
		}
		posted = append(posted, ts)
	}
	return posted, nil
}

// mentions are the users a reply names first, as Slack mentions; anything
// not a user id is left out, logged.
func (po *poster) mentions(users []string) []string {
	var out []string
	for _, u := range users {
		if IsUserID(u) {
			out = append(out, "<@"+u+">")
		} else {
			po.log.Warn("not a Slack user id; not mentioned", slog.String("user", u))
		}
	}
	return out
}

// replyParts is a reply's text made inert and split to fit a markdown
// block each; a reply being streamed shows its first part only.
func (po *poster) replyParts(ctx context.Context, r agents.Reply) []string {
	parts := splitText(po.inertMarkdown(ctx, strings.TrimSpace(r.Text)), blockLimit)
	if r.Partial && len(parts) > 1 {
		parts = parts[:1]
	}
	return parts
}

// commonOptions are what every part of a reply is posted with: unfurling
// and link names off, the thread, the agent's name and icon.
func (po *poster) commonOptions(r agents.Reply) []slack.MsgOption {
	common := []slack.MsgOption{
		slack.MsgOptionDisableLinkUnfurl(),
		slack.MsgOptionDisableMediaUnfurl(),
		slack.MsgOptionLinkNames(false),
	}
	if r.ThreadTS != "" {
		common = append(common, slack.MsgOptionTS(r.ThreadTS))
	}
	if name := clip.Runes(strings.TrimSpace(r.Username), usernameLimit, ""); name != "" {
		common = append(common, slack.MsgOptionUsername(name))
	}
	if icon := po.avatarURL(r.IconURL); icon != "" {
		common = append(common, slack.MsgOptionIconURL(icon))
	}
	return common
}

// replyPart is one message of a reply: its index i among n, its markdown
// made inert, and the mentions that open it (the first part's only).
type replyPart struct {
	i, n     int
	text     string
	mentions []string
}

// postPart makes one part of r: the first natively streamed when it can
// be, any other posted, or updated (sendPart). It returns the part's ts.
func (po *poster) postPart(ctx context.Context, r agents.Reply, p replyPart, common []slack.MsgOption) (string, error) {
	blocks, fallback := po.partBlocks(r, p)
	content := []slack.MsgOption{slack.MsgOptionText(fallback, false), slack.MsgOptionBlocks(blocks...)}
	meta := partMetadata(r, p)
	if meta != nil {
		content = append(content, slack.MsgOptionMetadata(*meta))
	}
	if p.i == 0 {
		ts, done, err := po.streamFirst(ctx, streamArgs{
			reply: r, text: p.text, mentions: len(p.mentions) > 0, metadata: meta, common: common,
			extra: slices.DeleteFunc(slices.Clone(blocks), func(b slack.Block) bool { return b.BlockType() != slack.MBTContextActions }),
		})
		if done {
			return ts, err
		}
	}
	ts, err := po.sendPart(ctx, r, p.i, common, content)
	if p.i == 0 && err == nil {
		po.trackFallback(r, ts)
	}
	return ts, err
}

// partBlocks are a part's blocks — its mentions, its markdown, and under
// the last part of a complete reply the feedback buttons — and its
// plain-text fallback.
func (po *poster) partBlocks(r agents.Reply, p replyPart) ([]slack.Block, string) {
	var blocks []slack.Block
	fallback := fallbackText(escapeLeftovers(p.text))
	if len(p.mentions) > 0 {
		who := strings.Join(p.mentions, " ")
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, who, false, true), nil, nil))
		fallback = strings.TrimSpace(who + " " + fallback)
	}
	if p.text != "" {
		blocks = append(blocks, slack.NewMarkdownBlock("", p.text))
	}
	if p.i == p.n-1 && !r.Partial {
		blocks = append(blocks, po.feedbackBlock(r.Feedback)...)
	}
	return blocks, fallback
}

// partMetadata is the message metadata of a part, carrying the post id
// (r.TurnID) and the part's index; nil without a post id.
func partMetadata(r agents.Reply, p replyPart) *slack.SlackMetadata {
	if r.TurnID == "" {
		return nil
	}
	return &slack.SlackMetadata{
		EventType: turnEventType,
		EventPayload: map[string]any{
			"turn_id": r.TurnID, "part": p.i + 1, "parts": p.n,
			"post_id": fmt.Sprintf("%s/%d", r.TurnID, p.i+1),
		},
	}
}

// postError is the failure of part p of r, saying whether trying again
// may help and when.
func postError(r agents.Reply, p replyPart, err error) *agents.PostError {
	_, after := rateLimit(err)
	return &agents.PostError{
		Err:        fmt.Errorf("bot: post reply in %s (part %d of %d): %w", r.Channel, p.i+1, p.n, err),
		Permanent:  permanentPostErrors[errorCode(err)],
		RetryAfter: after,
	}
}

// actionFeedback is the action id of a post's 👍/👎 buttons; their
// block id is the turn's feedback reference (agents.FeedbackRef).
const actionFeedback = "conclave_feedback"

// feedbackBlock is the context_actions block with 👍/👎 buttons that rate
// the turn ref names; none without a reference, or with one too long
// for a block id (255 characters).
func (po *poster) feedbackBlock(ref string) []slack.Block {
	if ref == "" {
		return nil
	}
	if len(ref) > 255 {
		po.log.Warn("feedback reference too long for a block id; no buttons", slog.Int("length", len(ref)))
		return nil
	}
	button := func(emoji, label, value string) *slack.FeedbackButton {
		return slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, emoji, true, false), value).WithAccessibilityLabel(label)
	}
	return []slack.Block{slack.NewContextActionsBlock(ref, slack.NewFeedbackButtonsBlockElement(actionFeedback,
		button("👍", "Good answer", agents.FeedbackPositive), button("👎", "Bad answer", agents.FeedbackNegative)))}
}

// permanentPostErrors are the chat.postMessage errors that trying again
// cannot fix: the channel, the token or the message itself is the problem.
// Any other failure (HTTP 5xx, 429, a timeout, a dropped connection, any
// other ok:false) may pass.
var permanentPostErrors = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true,
	"msg_too_long": true, "msg_blocks_too_long": true, "no_text": true,
	"invalid_blocks": true, "invalid_metadata_format": true, "invalid_metadata_schema": true,
	"restricted_action": true, "restricted_action_read_only_channel": true,
	"restricted_action_thread_only_channel": true, "restricted_action_non_threadable_channel": true,
	"cannot_reply_to_message": true, "invalid_auth": true, "not_authed": true,
	"account_inactive": true, "token_revoked": true, "token_expired": true,
	"no_permission": true, "missing_scope": true, "ekm_access_denied": true,
	"team_access_not_granted": true, "invalid_arguments": true,
}

// fallbackText is the plain-text fallback of one part: the part itself, or
// its beginning and " …".
func fallbackText(part string) string {
	if len(part) <= fallbackLimit {
		return part
	}
	return splitText(part, fallbackLimit)[0] + " …"
}

// avatarURL makes an agent's avatar usable as icon_url: ipfs:// through the
// gateway, http(s) as it is; anything else (an NFT reference such as
// eip155:1/erc721:…) is dropped.
func (po *poster) avatarURL(u string) string {
	u = strings.TrimSpace(u)
	if rest, ok := strings.CutPrefix(u, "ipfs://"); ok {
		rest = strings.TrimPrefix(rest, "ipfs/")
		if rest == "" || po.ipfsGateway == "" {
			return ""
		}
		return po.ipfsGateway + rest
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return u
	}
	return ""
}

// inert makes model text safe to post: user mentions written as names
// (nameUsers, looked up within lookupTimeout), Markdown links
// spelled out (spellOutLinks), then &, < and > escaped (escapeSlack), in
// that order, so that nothing a name brings in escapes the later steps.
func (po *poster) inert(ctx context.Context, text string) string {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	return escapeSlack(spellOutLinks(nameUsers(text, po.names.lookup(ctx))))
}

// inertMarkdown is inert for a markdown block: code keeps its characters
// (escapeMarkdown).
func (po *poster) inertMarkdown(ctx context.Context, text string) string {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	return escapeMarkdown(spellOutLinks(nameUsers(text, po.names.lookup(ctx))))
}

// PostEphemeral shows text to one user in a channel. The text is made
// inert like a reply.
func (po *poster) PostEphemeral(ctx context.Context, channel, user, text string) error {
	return po.postEphemeral(ctx, channel, user, fallbackText(po.inert(ctx, text)))
}

// postEphemeral posts mrkdwn text as it is.
func (po *poster) postEphemeral(ctx context.Context, channel, user, text string) error {
	err := po.call(ctx, "chat.postEphemeral", false, func(ctx context.Context) error {
		_, err := po.api.PostEphemeralContext(ctx, channel, user,
			slack.MsgOptionText(text, false), slack.MsgOptionLinkNames(false))
		return err
	})
	if err != nil {
		return fmt.Errorf("bot: ephemeral message in %s: %w", channel, err)
	}
	return nil
}

// AddReaction adds an emoji (default: Options.WorkingReaction) to a
// message; one already there is not an error.
func (po *poster) AddReaction(ctx context.Context, channel, ts, name string) error {
	name = po.reactionName(name)
	err := po.call(ctx, "reactions.add", true, func(ctx context.Context) error {
		return po.api.AddReactionContext(ctx, name, slack.NewRefToMessage(channel, ts))
	})
	if err != nil && errorCode(err) != "already_reacted" {
		return fmt.Errorf("bot: add reaction %s to %s/%s: %w", name, channel, ts, err)
	}
	return nil
}

// RemoveReaction removes conclave's emoji (default:
// Options.WorkingReaction) from a message; one not there is not an error.
func (po *poster) RemoveReaction(ctx context.Context, channel, ts, name string) error {
	name = po.reactionName(name)
	err := po.call(ctx, "reactions.remove", true, func(ctx context.Context) error {
		return po.api.RemoveReactionContext(ctx, name, slack.NewRefToMessage(channel, ts))
	})
	if err != nil && errorCode(err) != "no_reaction" {
		return fmt.Errorf("bot: remove reaction %s from %s/%s: %w", name, channel, ts, err)
	}
	return nil
}

func (po *poster) reactionName(name string) string {
	name = strings.Trim(strings.TrimSpace(name), ":")
	if name == "" {
		return po.workingReaction
	}
	return name
}

// FindPost looks through a thread for the parts of a post conclave made
// with postID in its metadata, and returns their ts in part order, up to
// the first part missing (the earliest message of a part, should one
// have been posted twice). A thread that no longer exists holds none.
func (po *poster) FindPost(ctx context.Context, channel, threadTS, postID string) ([]string, error) {
	self := po.identity()
	found := make(map[int]string)
	err := po.replies(ctx, channel, threadTS, true, func(m slack.Message) bool {
		md := m.Metadata
		if md.EventType != turnEventType || md.EventPayload["turn_id"] != postID {
			return true
		}
		if self.BotID != "" && m.BotID != self.BotID {
			return true
		}
		part := 1 // posts of older versions carried no index: one part
		if n, ok := md.EventPayload["part"].(float64); ok {
			part = int(n)
		}
		if _, seen := found[part]; !seen {
			found[part] = m.Timestamp
		}
		return true
	})
	if errorCode(err) == "thread_not_found" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bot: look for post %s in %s/%s: %w", postID, channel, threadTS, err)
	}
	var posted []string
	for i := 1; found[i] != ""; i++ {
		posted = append(posted, found[i])
	}
	return posted, nil
}

// ThreadHistory returns the last limit messages of a thread (all when limit
// ≤ 0), oldest first, as events with normalised text. Noise (joins, topic
// changes) is left out; conclave's own posts are kept, with UserID set to
// its bot user and UserName to the agent they were posted as.
func (po *poster) ThreadHistory(ctx context.Context, channel, threadTS string, limit int) ([]agents.Event, error) {
	self := po.identity()
	var msgs []wireMessage
	err := po.replies(ctx, channel, threadTS, false, func(m slack.Message) bool {
		if !contentSubtypes[m.SubType] || m.Timestamp == "" {
			return true
		}
		msgs = append(msgs, wireFromMessage(m))
		if limit > 0 && len(msgs) > 2*limit {
			msgs = append(msgs[:0], msgs[len(msgs)-limit:]...)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("bot: history of %s/%s: %w", channel, threadTS, err)
	}
	out := make([]agents.Event, 0, len(msgs))
	lookup := po.names.lookup(ctx)
	for i := range msgs {
		m := &msgs[i]
		ev := agents.Event{
			Channel: channel, TS: m.TS, ThreadTS: m.ThreadTS, UserID: m.User, BotID: m.BotID,
			Subtype: m.Subtype, Raw: withFiles(m.Text, m.Files), At: agents.TSTime(m.TS), Team: self.TeamID,
		}
		if ev.ThreadTS == ev.TS {
			ev.ThreadTS = ""
		}
		switch {
		case isOwn(m, self):
			if ev.UserID == "" {
				ev.UserID = self.UserID
			}
			ev.UserName = botName(m)
		case m.BotID != "":
			ev.UserName = botName(m)
		case m.User != "":
			ev.UserName = m.User
			if name, ok := po.names.userName(ctx, m.User); ok {
				ev.UserName = name
			}
		}
		ev.Text = normalizeText(ev.Raw, lookup)
		out = append(out, ev)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

func wireFromMessage(m slack.Message) wireMessage {
	w := wireMessage{
		Type: m.Type, Subtype: m.SubType, User: m.User, BotID: m.BotID, Username: m.Username,
		Text: m.Text, TS: m.Timestamp, ThreadTS: m.ThreadTimestamp,
	}
	if m.BotProfile != nil {
		w.BotProfile = &botProfile{Name: m.BotProfile.Name}
	}
	for _, f := range m.Files {
		w.Files = append(w.Files, wireFile{ID: f.ID, Name: f.Name, Title: f.Title})
	}
	return w
}

// replies pages through conversations.replies, calling fn for each message
// in order until it returns false.
func (po *poster) replies(ctx context.Context, channel, threadTS string, metadata bool, fn func(slack.Message) bool) error {
	params := &slack.GetConversationRepliesParameters{
		ChannelID: channel, Timestamp: threadTS, Limit: 200, IncludeAllMetadata: metadata,
	}
	for {
		var msgs []slack.Message
		var more bool
		var next string
		err := po.call(ctx, "conversations.replies", true, func(ctx context.Context) (err error) {
			msgs, more, next, err = po.api.GetConversationRepliesContext(ctx, params)
			return err
		})
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if !fn(m) {
				return nil
			}
		}
		if !more || next == "" {
			return nil
		}
		params.Cursor = next
	}
}

// ChannelDescription returns a channel's purpose, normalised; it is cached
// for at most five minutes.
func (po *poster) ChannelDescription(ctx context.Context, channel string) (string, error) {
	info, err := po.names.channelInfo(ctx, channel)
	if err != nil {
		return "", fmt.Errorf("bot: channel %s: %w", channel, err)
	}
	return normalizeText(info.purpose, po.names.lookup(ctx)), nil
}
