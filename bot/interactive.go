package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/conclavehq/conclave/agents/pairing"
	"github.com/conclavehq/conclave/ens"
)

// InteractionHandler answers interactive payloads (Block Kit button
// presses). A CommandHandler that also implements it gets them; the
// envelope is acknowledged before HandleInteraction is called.
type InteractionHandler interface {
	HandleInteraction(ctx context.Context, cb slack.InteractionCallback)
}

// Action ids of the pairing offer's buttons; their value is the offer id.
const (
	actionPairingAccept  = "pairing_accept"
	actionPairingDecline = "pairing_decline"
)

// handleInteraction acknowledges an interactive envelope at once (Slack
// wants it within 3 s), then lets the handler answer it beside the loop,
// like a slash command.
func (b *Bot) handleInteraction(ctx context.Context, ev socketmode.Event) {
	b.ack(ctx, *ev.Request, nil)
	cb, ok := ev.Data.(slack.InteractionCallback)
	h, handles := b.commands.(InteractionHandler)
	if !ok || !handles {
		return
	}
	b.commandWG.Go(func() {
		select {
		case b.commandSlots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-b.commandSlots }()
		h.HandleInteraction(ctx, cb)
	})
}

// postToResponseURL posts a message to a command's or an action's
// response_url, with unfurling off. The URL lets whoever holds it answer as
// conclave: it is kept out of errors and logs.
func (w *WebAPI) postToResponseURL(ctx context.Context, responseURL string, msg slack.WebhookMessage) error {
	return w.call(ctx, "response_url", false, func(ctx context.Context) error {
		off := false
		msg.UnfurlLinks, msg.UnfurlMedia = &off, &off
		err := slack.PostWebhookCustomHTTPContext(ctx, responseURL, w.httpClient(), &msg)
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = fmt.Errorf("post to the response_url: %w", ue.Err)
		}
		return err
	})
}

// sendPairingOffer sends the offered user a direct message with Accept and
// Decline buttons.
func (w *WebAPI) sendPairingOffer(ctx context.Context, o pairing.Offer, a ens.Agent) error {
	text := "<@" + o.OfferedBy + "> offers to pair you with the human agent " + describe(a) +
		". If you accept, your messages count as the agent's in conclave's conversations" +
		" (and any pairing you or the agent have now is replaced). The offer stands until " +
		o.Expires.UTC().Format(time.RFC1123) + "."
	blocks := []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil),
		slack.NewActionBlock("pairing_offer",
			slack.NewButtonBlockElement(actionPairingAccept, o.ID,
				slack.NewTextBlockObject(slack.PlainTextType, "Accept", false, false)).WithStyle(slack.StylePrimary),
			slack.NewButtonBlockElement(actionPairingDecline, o.ID,
				slack.NewTextBlockObject(slack.PlainTextType, "Decline", false, false)).WithStyle(slack.StyleDanger),
		),
	}
	err := w.call(ctx, "chat.postMessage", false, func(ctx context.Context) error {
		_, _, err := w.api.PostMessageContext(ctx, o.User,
			slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...), slack.MsgOptionLinkNames(false),
			slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
		return err
	})
	if err != nil {
		return fmt.Errorf("bot: pairing offer to %s: %w", o.User, err)
	}
	return nil
}

// HandleInteraction answers the buttons of a pairing offer; other
// interactions are ignored.
func (c *Commands) HandleInteraction(ctx context.Context, cb slack.InteractionCallback) {
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	act := cb.ActionCallback.BlockActions[0]
	var reply string
	replace := true
	switch act.ActionID {
	case actionPairingAccept:
		reply, replace = c.acceptOffer(ctx, cb, act.Value)
	case actionPairingDecline:
		reply, replace = c.declineOffer(ctx, cb, act.Value)
	case actionFeedback:
		c.feedback(ctx, cb, act)
		return
	default:
		return
	}
	if cb.ResponseURL == "" {
		return
	}
	if err := c.web.postToResponseURL(ctx, cb.ResponseURL, slack.WebhookMessage{Text: reply, ReplaceOriginal: replace}); err != nil {
		c.log.Warn("answer to a button not delivered", slog.String(logUser, cb.User.ID), slog.Any(logError, err))
	}
}

// offerFailure renders an offer that could not be answered; replace says
// whether the offer's message is to be replaced (it is, unless the press
// came from someone else).
func (c *Commands) offerFailure(cb slack.InteractionCallback, o pairing.Offer, err error) (string, bool) {
	switch {
	case errors.Is(err, pairing.ErrOfferGone):
		return "This offer has expired or was already answered; nothing changed.", true
	case errors.Is(err, pairing.ErrNotOffered):
		c.log.Warn("command refused", slog.String("command", "pairing offer"), slog.String(logUser, cb.User.ID),
			slog.String("reason", "not the offered user"))
		return "This offer is not for you; nothing changed.", false
	case errors.Is(err, pairing.ErrNotOwner), errors.Is(err, pairing.ErrNoWallet):
		return "<@" + o.OfferedBy + "> no longer owns " + code(o.Agent) + ", so the offer no longer stands; nothing changed.", true
	case errors.Is(err, pairing.ErrOwnerUnknown):
		c.log.Warn("owner look-up failed", slog.String(logAgent, o.Agent), slog.Any(logError, err))
		return "Could not read who owns " + code(o.Agent) + " right now: " + lookupReason(err) + ". Try again in a moment.", false
	}
	c.log.Error("pairing offer not answered", slog.String(logUser, cb.User.ID), slog.Any(logError, err))
	return "Could not answer the offer right now; try again in a moment.", false
}

func (c *Commands) acceptOffer(ctx context.Context, cb slack.InteractionCallback, id string) (string, bool) {
	o, rep, err := c.deps.Pairing.Accept(ctx, id, cb.User.ID)
	if err != nil {
		return c.offerFailure(cb, o, err)
	}
	a, err := c.deps.Identities.Resolve(ctx, o.Agent)
	if err != nil {
		a = ens.Agent{Name: o.Agent, EnsDomain: o.Agent, Role: ens.RoleHuman}
	}
	c.auditOffer(ctx, o, auditPaired, slog.String("accepted_by", cb.User.ID),
		slog.String("replaced_agent", rep.Agent), slog.String("replaced_user", rep.User))
	c.tellLoser(ctx, rep.User, a)
	if o.Channel != "" { // "" when the offer was made in a direct message
		c.announce(ctx, o.Channel, "<@"+o.OfferedBy+"> paired <@"+o.User+"> with the human agent "+describe(a)+" (accepted by <@"+o.User+">).")
	}
	reply := "You accepted: you are now paired with " + describe(a) + "; your messages count as the agent's."
	if rep.Agent != "" {
		reply += "\nYour pairing with " + code(rep.Agent) + " is replaced."
	}
	return reply, true
}

func (c *Commands) declineOffer(ctx context.Context, cb slack.InteractionCallback, id string) (string, bool) {
	o, err := c.deps.Pairing.Decline(ctx, id, cb.User.ID)
	if err != nil {
		return c.offerFailure(cb, o, err)
	}
	c.auditOffer(ctx, o, auditDecline, slog.String("declined_by", cb.User.ID))
	if err := c.web.postNotice(ctx, o.OfferedBy, "<@"+o.User+"> declined your offer to pair them with "+code(o.Agent)+"; nothing changed."); err != nil {
		c.log.Warn("decline not told", slog.String(logUser, o.OfferedBy), slog.Any(logError, err))
	}
	return "You declined the offer to pair with " + code(o.Agent) + "; nothing changed.", true
}

// auditOffer logs an answer to an offer as an audit record: who made it,
// for whom, where, and when it was answered.
func (c *Commands) auditOffer(ctx context.Context, o pairing.Offer, action string, attrs ...slog.Attr) {
	base := []slog.Attr{
		slog.String(logAction, action), slog.String(logUser, o.OfferedBy), slog.String("team", o.Team),
		slog.String(logChannel, o.Channel), slog.String(logAgent, o.Agent), slog.String("paired_user", o.User),
		slog.String("offer", o.ID), slog.Time("at", time.Now()),
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "audit", append(base, attrs...)...)
}

// feedbackThanks answers a press of a post's 👍/👎 buttons, to the person
// alone.
const feedbackThanks = "Thanks for your feedback: it helps improve these answers."

// feedback records a press of a post's 👍/👎 buttons and thanks the person
// ephemerally.
func (c *Commands) feedback(ctx context.Context, cb slack.InteractionCallback, act *slack.BlockAction) {
	if c.deps.Feedback == nil {
		return
	}
	if err := c.deps.Feedback.RecordFeedback(ctx, act.BlockID, cb.User.ID, act.Value); err != nil {
		c.log.Warn("feedback not recorded", slog.String(logUser, cb.User.ID), slog.Any(logError, err))
		return
	}
	channel := cmp.Or(cb.Channel.ID, cb.Container.ChannelID)
	if err := c.web.PostEphemeral(ctx, channel, cb.User.ID, feedbackThanks); err != nil {
		c.log.Warn("feedback thanks not delivered", slog.String(logUser, cb.User.ID), slog.Any(logError, err))
	}
}
