package bot

import (
	"context"
	"log/slog"

	"github.com/slack-go/slack"
)

// SuggestedPrompt is one of the prompts offered in a new assistant thread
// (slack.suggested_prompts): the title shown, the message sent when
// chosen.
type SuggestedPrompt struct {
	Title   string
	Message string
}

// MaxSuggestedPrompts is Slack's limit on the prompts of a thread.
const MaxSuggestedPrompts = 4

// assistantThread is the assistant_thread of an assistant_thread_started
// event.
type assistantThread struct {
	UserID    string `json:"user_id"`
	ChannelID string `json:"channel_id"`
	ThreadTS  string `json:"thread_ts"`
}

// offerPrompts sets the suggested prompts (Options.SuggestedPrompts) of
// an assistant thread a person just opened, beside the envelope loop. A
// failure is logged: the thread works without them.
func (b *Bot) offerPrompts(ctx context.Context, d Direct) {
	if len(b.opts.SuggestedPrompts) == 0 {
		return
	}
	b.beside(ctx, func() {
		ctx, cancel := context.WithTimeout(ctx, commandTimeout)
		defer cancel()
		if err := b.web.setSuggestedPrompts(ctx, d.Channel, d.ThreadTS, b.opts.SuggestedPrompts); err != nil {
			b.log.Warn("suggested prompts not set", slog.String(logChannel, d.Channel),
				slog.String(logUser, d.User), slog.Any(logError, err))
		}
	})
}

// setSuggestedPrompts offers prompts in an assistant thread
// (assistant.threads.setSuggestedPrompts; setting them twice is harmless).
func (w *WebAPI) setSuggestedPrompts(ctx context.Context, channel, thread string, prompts []SuggestedPrompt) error {
	params := slack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: channel, ThreadTS: thread}
	for _, p := range prompts {
		params.Prompts = append(params.Prompts, slack.AssistantThreadsPrompt{Title: p.Title, Message: p.Message})
	}
	return w.call(ctx, "assistant.threads.setSuggestedPrompts", true, func(ctx context.Context) error {
		return w.api.SetAssistantThreadsSuggestedPromptsContext(ctx, params)
	})
}
