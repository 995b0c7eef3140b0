package turn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/clip"
	"github.com/conclavehq/conclave/templates"
)

// DefaultMaxInputTokens is the input budget when neither the prompt's
// settings, the profile nor the configuration set one.
const DefaultMaxInputTokens = 16000

// TruncatedMark ends a text cut to the message-size cap.
const TruncatedMark = " … [truncated]"

// Prompts is the prompt set a turn renders with (a templates.Set): one set
// serves a whole turn, so a reload never mixes versions within a turn.
type Prompts interface {
	// Render renders prompt for the agent named agentENS with role.
	// Errors name the template file and line, or the field and member.
	Render(agentENS, role, prompt string, data templates.Data) (string, error)
	// Settings returns the merged settings of the prompt (zero when none).
	// Errors name the broken settings file.
	Settings(agentENS, role, prompt string) (templates.Settings, error)
}

// Profiles tells the configured model profiles apart.
type Profiles interface {
	// Profile returns the named profile ("" is the default [llm] profile),
	// or an error wrapping llm.ErrUnknownProfile.
	Profile(name string) (llm.Profile, error)
}

// Model is the model client a turn calls.
type Model interface {
	Profiles
	// Complete runs one completion, retries included. Errors are final.
	Complete(ctx context.Context, r llm.Request) (llm.Response, error)
}

// Toolbox is the MCP tools agents may use (package agents/tools).
type Toolbox interface {
	// Tools returns the tools a selection names — "server" for every tool
	// of a server, "server/tool" for one — as function tools named
	// "<server>__<tool>", from the servers reachable now. Names it does
	// not know give nothing (it logs them).
	Tools(selection []string) []llm.Tool
	// Call runs the tool Tools named name with JSON arguments, bounded by
	// its server's timeout, and returns the result's text. The error is a
	// short reason fit for the model: the tool reported an error, the
	// call timed out or failed, the server is down, the tool is unknown.
	Call(ctx context.Context, name, arguments string) (string, error)
}

// HistoryMessage is one message of a prompt's history.
type HistoryMessage struct {
	Role string // llm.RoleUser, llm.RoleAssistant or llm.RoleSystem
	// Author, when set, is written before the content as "<Author>: "
	// (SpeakerLabel); the message-size cap applies to Content alone.
	Author  string
	Content string
	// Mark, when set, is written first: "(earlier, 2025-03-03) " on an
	// entry of the agent's memory (earlierMark).
	Mark string
	// Answer marks an agent's message, or a history note, of the current
	// exchange: the budget cuts it only after every other history message
	// and the tail (SPEC §14.2).
	Answer bool
}

// Text is the message as sent: its mark, its author, then its content
// capped at max runes.
func (h HistoryMessage) Text(max int) string {
	if h.Author == "" {
		return h.Mark + clip.Runes(h.Content, max, TruncatedMark)
	}
	return h.Mark + h.Author + ": " + clip.Runes(h.Content, max, TruncatedMark)
}

// TurnPrompt is what one model request of a turn is built from.
type TurnPrompt struct {
	Agent  ens.Agent
	Prompt string // the phase prompt: default, conclude, context-not-found, context-found
	Data   templates.Data
	// History is what the agent sees, oldest first: entries of its memory
	// session from other conversations, then this thread's messages. It is
	// cut oldest first to fit the input budget, its answers of the current
	// exchange (Answer) last.
	History []HistoryMessage
	// Tail follows the history (in conclude: the previous phase prompt and
	// the reply that held :end:); it is cut after the history's other
	// messages and before its answers of the current exchange, as the
	// prompt it holds quotes what the history already has.
	Tail []HistoryMessage
	// AgentProfile is the llm_profile the agent's configuration names.
	AgentProfile string
	// MaxInputTokens is the budget when neither the prompt's settings nor
	// the profile set one (DefaultMaxInputTokens when zero).
	MaxInputTokens int
	// BudgetOverride, when set, is the input budget whatever the prompt's
	// settings and the profile say: a retry after the endpoint refused a
	// request as longer than the model's context window.
	BudgetOverride int
	// MaxMessageChars caps each history message's content, in runes (no
	// cap when zero).
	MaxMessageChars int
}

// BuildInfo says how a request was fitted.
type BuildInfo struct {
	Budget     int      // the input budget, in estimated tokens
	Tokens     int      // the estimated tokens of the request
	Dropped    int      // history messages cut to fit
	OverBudget bool     // the system and phase prompts alone exceed the budget
	Warnings   []string // profile fall-backs, an over-budget prompt
	// Tools is the prompt settings' tool selection; nil when they set
	// none (the agent's configuration then decides).
	Tools *[]string
}

// BuildRequest renders the system and phase prompts of p and fits the
// history into the input budget: exactly the request a turn sends. The
// messages are the system prompt, the history kept, the tail kept, then the
// phase prompt as the final user message.
func BuildRequest(prompts Prompts, profiles Profiles, p TurnPrompt) (llm.Request, BuildInfo, error) {
	var info BuildInfo
	role := string(p.Agent.Role)
	settings, err := prompts.Settings(p.Agent.EnsDomain, role, p.Prompt)
	if err != nil {
		return llm.Request{}, info, err
	}
	system, err := prompts.Render(p.Agent.EnsDomain, role, templates.PromptSystem, p.Data)
	if err != nil {
		return llm.Request{}, info, err
	}
	phase, err := prompts.Render(p.Agent.EnsDomain, role, p.Prompt, p.Data)
	if err != nil {
		return llm.Request{}, info, err
	}
	profileName, profile, warn, err := chooseProfile(profiles, settings.LLMProfile, p.AgentProfile, p.Agent)
	if warn != "" {
		info.Warnings = append(info.Warnings, warn)
	}
	if err != nil {
		return llm.Request{}, info, err
	}
	info.Tools = settings.Tools
	info.Budget = firstPositive(p.BudgetOverride, settings.MaxInputTokens, profile.MaxInputTokens, p.MaxInputTokens)
	if info.Budget == 0 {
		info.Budget = DefaultMaxInputTokens
	}

	history := p.History
	if settings.IncludeHistory != nil && !*settings.IncludeHistory {
		history = nil
	}
	candidates := make([]candidate, 0, len(history)+len(p.Tail))
	for _, h := range history {
		rank := rankOther
		if h.Answer {
			rank = rankAnswer
		}
		candidates = append(candidates, candidate{llm.Message{Role: h.Role, Content: h.Text(p.MaxMessageChars)}, rank})
	}
	for _, h := range p.Tail {
		candidates = append(candidates, candidate{llm.Message{Role: h.Role, Content: h.Text(p.MaxMessageChars)}, rankTail})
	}
	kept := fitHistory(candidates, system, phase, p.Prompt, &info)
	info.Dropped = len(candidates) - len(kept)

	msgs := make([]llm.Message, 0, len(kept)+2)
	msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: system})
	msgs = append(msgs, kept...)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: phase})

	jsonMode := p.Prompt == templates.PromptContextNotFound
	if settings.JSON != nil {
		jsonMode = *settings.JSON
	}
	return llm.Request{
		Profile:     profileName,
		Model:       settings.Model,
		Temperature: settings.Temperature,
		MaxTokens:   settings.MaxTokens,
		JSON:        jsonMode,
		Messages:    msgs,
		Agent:       p.Agent.EnsDomain,
		Role:        role,
		Prompt:      p.Prompt,
		Session:     p.Data.MemorySessionId,
	}, info, nil
}

// A candidate is a history or tail message with the rank that says when
// the budget cuts it.
type candidate struct {
	msg  llm.Message
	rank int
}

// The ranks of candidates, the first cut first.
const (
	rankOther  = iota // history that is not an answer of the current exchange
	rankTail          // conclude's previous prompt and :end: reply
	rankAnswer        // agents' messages and notes of the current exchange
)

// fitHistory keeps, beside the system and phase prompts, the candidates
// that fit the input budget (info.Budget), in their order: the answers of
// the current exchange first, then the tail, then the rest of the
// history, each rank filled newest first until a message does not fit, so
// that within a rank the oldest go first. None when the prompts alone
// exceed the budget, which info records with a warning. It sets
// info.Tokens to the estimate of the prompts and the candidates kept: the
// request's.
func fitHistory(candidates []candidate, system, phase, prompt string, info *BuildInfo) []llm.Message {
	fixed := EstimateTokens(system) + EstimateTokens(phase)
	info.Tokens = fixed
	if fixed > info.Budget {
		info.OverBudget = true
		info.Warnings = append(info.Warnings, fmt.Sprintf("the system and %s prompts alone (about %d tokens) exceed the input budget of %d; sent without history", prompt, fixed, info.Budget))
		return nil
	}
	used := fixed
	keep := make([]bool, len(candidates))
	for rank := rankAnswer; rank >= rankOther; rank-- {
		for i := len(candidates) - 1; i >= 0; i-- {
			if candidates[i].rank != rank {
				continue
			}
			t := EstimateTokens(candidates[i].msg.Content)
			if used+t > info.Budget {
				break
			}
			used += t
			keep[i] = true
		}
	}
	info.Tokens = used
	out := make([]llm.Message, 0, len(candidates))
	for i, c := range candidates {
		if keep[i] {
			out = append(out, c.msg)
		}
	}
	return out
}

// EstimateTokens is the budget's token estimate of one message:
// ceil(runes / 4) + 4.
func EstimateTokens(s string) int {
	return (utf8.RuneCountInString(s)+3)/4 + 4
}

// chooseProfile applies the profile precedence: the prompt's settings, the
// agent's configuration, the NFT's llm_profile attribute, then the default.
// It returns the profile's name ("" for the default) and the profile. An
// unknown profile named by settings or configuration is an error; one named
// by an attribute falls back to the default with a warning.
func chooseProfile(profiles Profiles, fromSettings, fromConfig string, a ens.Agent) (name string, profile llm.Profile, warning string, err error) {
	for _, named := range []struct{ name, where string }{
		{fromSettings, "the prompt settings"},
		{fromConfig, "the agent configuration"},
	} {
		if named.name == "" {
			continue
		}
		p, err := profiles.Profile(named.name)
		if err != nil {
			return "", llm.Profile{}, "", fmt.Errorf("llm profile %q named by %s of %s: %w", named.name, named.where, a.EnsDomain, err)
		}
		return named.name, p, "", nil
	}
	if attr := strings.TrimSpace(a.Attribute("llm_profile")); attr != "" {
		p, err := profiles.Profile(attr)
		if err == nil {
			return attr, p, "", nil
		}
		if !errors.Is(err, llm.ErrUnknownProfile) {
			return "", llm.Profile{}, "", err
		}
		warning = fmt.Sprintf("llm_profile %q of %s is not configured; using the default profile", attr, a.EnsDomain)
	}
	profile, err = profiles.Profile("")
	return "", profile, warning, err
}

func firstPositive(vs ...int) int {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}

// SpeakerLabel is how a message's author is written in another agent's
// history: "<Name> (<EnsDomain or "person">)".
func SpeakerLabel(name, ensDomain string) string {
	if ensDomain == "" {
		ensDomain = personLabel
	}
	return name + " (" + ensDomain + ")"
}

// SessionEntry is one entry of an agent's memory session, as a turn's
// history shows it: from another conversation (with its author), or
// hydrated (its role and text).
type SessionEntry struct {
	Role    string // llm.RoleUser, llm.RoleAssistant or llm.RoleSystem
	Author  string // the speaker's label, on an entry from a conversation
	Content string
	At      time.Time // when it was stored; zero when unknown
}

// SessionHistory turns memory session entries (from other conversations,
// or hydrated) into history messages, each marked as earlier with the date
// it was stored: entries from a conversation carry their author; hydrated
// ones keep their role and text.
func SessionHistory(entries []SessionEntry) []HistoryMessage {
	return AppendSessionHistory(make([]HistoryMessage, 0, len(entries)), entries)
}

// AppendSessionHistory appends SessionHistory(entries) to out, so that a
// caller sizing out for what follows the entries copies them once.
func AppendSessionHistory(out []HistoryMessage, entries []SessionEntry) []HistoryMessage {
	for _, e := range entries {
		role := e.Role
		switch role {
		case llm.RoleUser, llm.RoleAssistant, llm.RoleSystem:
		default:
			role = llm.RoleUser
		}
		h := HistoryMessage{Role: role, Content: e.Content, Mark: earlierMark(e.At)}
		if role == llm.RoleUser {
			h.Author = e.Author
		}
		out = append(out, h)
	}
	return out
}

// earlierMark is what starts a memory entry in a history: "(earlier,
// YYYY-MM-DD) ", the UTC date the entry was stored, so that the model tells
// past conversations from this thread; "(earlier) " for an entry stored
// without a time (by a version that did not always stamp one).
func earlierMark(at time.Time) string {
	if at.IsZero() {
		return "(earlier) "
	}
	return "(earlier, " + at.UTC().Format(time.DateOnly) + ") "
}
