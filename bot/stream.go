package bot

import (
	"context"

	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
)

// cannotUpdate are the chat.update errors after which the reply is posted
// anew rather than lost: the message was deleted, or may no longer be
// edited.
var cannotUpdate = map[string]bool{"message_not_found": true, "cant_update_message": true, "edit_window_closed": true}

// sendPart makes part i of a reply: the first part of a streamed reply
// updates the message already shown (chat.update: content, blocks and
// metadata only — the thread, name and icon stay as posted); any other
// part, or a streamed message that is gone (deleted meanwhile), is posted
// with common and content.
func (po *poster) sendPart(ctx context.Context, r agents.Reply, i int, common, content []slack.MsgOption) (string, error) {
	if i == 0 && r.Update != "" {
		update := append(content[:len(content):len(content)], slack.MsgOptionLinkNames(false))
		// Updating with the same content twice changes nothing: it is
		// safe to retry.
		err := po.call(ctx, "chat.update", true, func(ctx context.Context) error {
			_, _, _, err := po.api.UpdateMessageContext(ctx, r.Channel, r.Update, update...)
			return err
		})
		if !cannotUpdate[errorCode(err)] {
			return r.Update, err
		}
		po.log.Warn("a streamed message cannot be updated; posting the reply anew", "code", errorCode(err))
	}
	opts := append(common[:len(common):len(common)], content...)
	var ts string
	err := po.call(ctx, "chat.postMessage", false, func(ctx context.Context) (err error) {
		_, ts, err = po.api.PostMessageContext(ctx, r.Channel, opts...)
		return err
	})
	return ts, err
}
