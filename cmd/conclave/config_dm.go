package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/conclavehq/conclave/bot"
)

// SuggestedPromptConfig is one of [slack] suggested_prompts: a title shown
// in a new direct-message thread and the message sent when it is chosen.
type SuggestedPromptConfig struct {
	Title   string `toml:"title"`
	Message string `toml:"message"`
}

// validateDirect checks slack.dm_channel (a [[channels]] entry, whose
// agents hold direct messages) and slack.suggested_prompts (at most
// bot.MaxSuggestedPrompts, each with a title and a message, and only with
// dm_channel: without it a DM gets the help, which no prompt can ask for).
func (c *Config) validateDirect(p *problems) {
	s := &c.Slack
	s.DMChannel = strings.TrimSpace(s.DMChannel)
	if s.DMChannel != "" && !slices.ContainsFunc(c.Channels, func(ch ChannelConfig) bool { return ch.ID == s.DMChannel }) {
		p.bad("slack.dm_channel", "%q is not the id of a [[channels]] entry; direct messages talk with the agents of a configured channel", s.DMChannel)
	}
	if len(s.SuggestedPrompts) > bot.MaxSuggestedPrompts {
		p.bad("slack.suggested_prompts", "%d prompts; Slack shows at most %d", len(s.SuggestedPrompts), bot.MaxSuggestedPrompts)
	}
	if len(s.SuggestedPrompts) > 0 && s.DMChannel == "" {
		p.bad("slack.suggested_prompts", "set without slack.dm_channel; they are offered in direct messages, which only get the help without it")
	}
	for i, sp := range s.SuggestedPrompts {
		key := fmt.Sprintf("slack.suggested_prompts[%d]", i)
		if strings.TrimSpace(sp.Title) == "" {
			p.bad(key+".title", "must not be empty")
		}
		if strings.TrimSpace(sp.Message) == "" {
			p.bad(key+".message", "must not be empty")
		}
	}
}

// suggestedPrompts are the prompts of [slack] as the transport takes them.
func (s SlackConfig) suggestedPrompts() []bot.SuggestedPrompt {
	var out []bot.SuggestedPrompt
	for _, sp := range s.SuggestedPrompts {
		out = append(out, bot.SuggestedPrompt{Title: sp.Title, Message: sp.Message})
	}
	return out
}
