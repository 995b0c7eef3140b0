package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/internal/clip"
)

// DirectKind says what was addressed to conclave itself.
type DirectKind int

// The kinds of direct events.
const (
	DirectMessage       DirectKind = iota + 1 // a person wrote to conclave's bot in a DM
	DirectHomeOpened                          // a person opened conclave's App Home tab
	DirectThreadStarted                       // a person opened an assistant thread with conclave
)

// Direct is an event addressed to conclave itself rather than to a
// channel's agents.
type Direct struct {
	Kind     DirectKind
	User     string
	Channel  string // the DM channel (DirectMessage, DirectThreadStarted)
	ThreadTS string // the assistant thread (DirectThreadStarted)
}

// DirectHandler answers direct events. The envelope is acknowledged before
// HandleDirect is called.
type DirectHandler interface {
	HandleDirect(ctx context.Context, d Direct)
}

var _ DirectHandler = (*Commands)(nil)

// Limits of the App Home tab, under Slack's (100 blocks a view, 3,000
// characters a section).
const (
	homeMaxChannels    = 20
	homeSectionRunes   = 2900
	homeChannelPages   = 5
	homeChannelPerPage = 200
)

// helpText is what conclave says of itself in a DM and on its App Home
// tab: what it is, how to start a conversation, the commands.
const helpText = "*conclave* runs a team of AI agents in this workspace's channels: a facilitator, " +
	"experts with their own memory, and clones of people.\n\n" +
	"*Start a conversation* by writing in a channel where conclave's agents are: with a facilitator " +
	"there, any new message starts one; otherwise name an agent by its full ENS name " +
	"(e.g. `alice.protocol6022.eth`: a short name such as `alice` calls no one; `/list-agents` shows each name to copy). The agents answer in the thread, and anyone can write `:end:` " +
	"in the thread to close it. Direct messages to conclave get this help only.\n\n" +
	"*Commands* (type them in a channel; only you see the answer):\n" +
	"• `/list-agents`: the agents of this channel (name — role — ENS)\n" +
	"• `/add-agent <ens-name>` or `/add-agent <collection-address> <token-id> [chain-id]`: add an agent\n" +
	"• `/remove-agent <ens-name>`: remove an agent added with /add-agent\n" +
	"• `/verify-wallet`: link your wallet to your Slack user (a one-time page)\n" +
	"• `/pair-slack-user-to-human-agent <@user> <ens-name>`: pair a person with the human agent they own"

// decodeDirect reads a DM to conclave or an app_home_opened event from an
// events_api payload; ok is false for anything else (including conclave's
// own posts in a DM, other apps' messages and edits).
func decodeDirect(payload []byte, self Identity) (Direct, bool) {
	var outer struct {
		Type  string `json:"type"`
		Event struct {
			wireMessage
			Tab    string          `json:"tab"`
			Thread assistantThread `json:"assistant_thread"`
		} `json:"event"`
	}
	if json.Unmarshal(payload, &outer) != nil || outer.Type != "event_callback" {
		return Direct{}, false
	}
	ev := outer.Event
	switch {
	case ev.Type == "app_home_opened" && ev.User != "" && (ev.Tab == "home" || ev.Tab == ""):
		return Direct{Kind: DirectHomeOpened, User: ev.User}, true
	case ev.Type == "assistant_thread_started" && ev.Thread.ChannelID != "" && ev.Thread.ThreadTS != "":
		return Direct{Kind: DirectThreadStarted, User: ev.Thread.UserID, Channel: ev.Thread.ChannelID, ThreadTS: ev.Thread.ThreadTS}, true
	case ev.Type == "message" && ev.ChannelType == "im" && ev.Subtype == "" && ev.User != "" &&
		ev.BotID == "" && !isOwn(&ev.wireMessage, self):
		return Direct{Kind: DirectMessage, User: ev.User, Channel: ev.Channel}, true
	}
	return Direct{}, false
}

// handleDirect has the command handler answer a direct event, beside the
// envelope loop, as commands are.
func (b *Bot) handleDirect(ctx context.Context, d Direct) {
	h, ok := b.commands.(DirectHandler)
	if !ok {
		return
	}
	b.beside(ctx, func() { h.HandleDirect(ctx, d) })
}

// HandleDirect answers a DM with the help text and publishes the App Home
// tab (the help text and the agents of the user's channels) when it is
// opened.
func (c *Commands) HandleDirect(ctx context.Context, d Direct) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	switch d.Kind {
	case DirectMessage:
		if err := c.web.postNotice(ctx, d.Channel, helpText); err != nil {
			c.log.Warn("help not sent in a direct message", slog.String(logUser, d.User), slog.Any(logError, err))
		}
	case DirectHomeOpened:
		if err := c.web.publishHome(ctx, d.User, c.homeBlocks(ctx, d.User)); err != nil {
			c.log.Warn("App Home not published", slog.String(logUser, d.User), slog.Any(logError, err))
		}
	}
}

// homeBlocks builds the App Home tab of a user: the help text, then each
// of the user's channels that has agents, with its agents.
func (c *Commands) homeBlocks(ctx context.Context, user string) []slack.Block {
	section := func(text string) slack.Block {
		return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, clip.Runes(text, homeSectionRunes, ""), false, false), nil, nil)
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, "conclave", false, false)),
		section(helpText),
		slack.NewDividerBlock(),
		section("*Agents in your channels*"),
	}
	channels, err := c.web.userChannels(ctx, user)
	if err != nil {
		c.log.Warn("list a user's channels for App Home", slog.String(logUser, user), slog.Any(logError, err))
		return append(blocks, section("Could not list your channels right now."))
	}
	shown := 0
	for _, ch := range channels {
		if shown == homeMaxChannels {
			blocks = append(blocks, section(fmt.Sprintf("… and more: only the first %d channels with agents are shown.", homeMaxChannels)))
			break
		}
		list, err := c.deps.Registry.ChannelAgents(ctx, ch.ID)
		if err != nil {
			c.log.Warn("list a channel's agents for App Home", slog.String(logChannel, ch.ID), slog.Any(logError, err))
			continue
		}
		if len(list) == 0 {
			continue
		}
		shown++
		blocks = append(blocks, section("*#"+escapeSlack(ch.Name)+"*\n"+agentLines(list)))
	}
	if shown == 0 {
		blocks = append(blocks, section("None of your channels has agents yet: invite conclave to a channel and add one with `/add-agent`."))
	}
	return blocks
}

// userChannels lists the public and private channels a user is in that
// conclave can see.
func (w *WebAPI) userChannels(ctx context.Context, user string) ([]slack.Channel, error) {
	var all []slack.Channel
	cursor := ""
	for range homeChannelPages {
		var page []slack.Channel
		err := w.call(ctx, "users.conversations", true, func(ctx context.Context) (err error) {
			page, cursor, err = w.api.GetConversationsForUserContext(ctx, &slack.GetConversationsForUserParameters{
				UserID: user, Types: []string{"public_channel", "private_channel"}, ExcludeArchived: true,
				Limit: homeChannelPerPage, Cursor: cursor,
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("bot: channels of %s: %w", user, err)
		}
		all = append(all, page...)
		if cursor == "" {
			break
		}
	}
	return all, nil
}

// publishHome publishes a user's App Home tab.
func (w *WebAPI) publishHome(ctx context.Context, user string, blocks []slack.Block) error {
	err := w.call(ctx, "views.publish", true, func(ctx context.Context) error {
		_, err := w.api.PublishViewContext(ctx, slack.PublishViewContextRequest{
			UserID: user, View: slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: blocks}},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("bot: publish App Home of %s: %w", user, err)
	}
	return nil
}

// agentLines shows a channel's agents one a line, as /list-agents does.
func agentLines(list []agents.ChannelAgent) string {
	lines := make([]string, 0, len(list))
	for _, ca := range list {
		if ca.Err != nil {
			lines = append(lines, escapeSlack(ca.Agent.Name)+" — unknown role — "+code(ca.Agent.EnsDomain)+" (could not be resolved)")
			continue
		}
		lines = append(lines, describe(ca.Agent))
	}
	return strings.Join(lines, "\n")
}
