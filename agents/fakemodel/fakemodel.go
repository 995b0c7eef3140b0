// Package fakemodel is conclave's built-in deterministic model, behind
// `conclave chat --fake-model`: it answers every request from what the
// request and the agent's identity say, with no network and no key, so a
// newcomer can see a conversation run and a config repository's CI can
// run one without a model endpoint.
//
// What each agent answers:
//
//   - a facilitator: "(fake model) <Name> heard: <the first 80 characters
//     of the latest person's request> :end:", and in conclude
//     "(fake model) summary";
//   - an expert choosing its memory key (context-not-found):
//     {"session": "<the first word of the latest request that matches its
//     session pattern, or empty>", "message": ""}; answering
//     "(fake model) <Name> on <key>";
//   - a clone: "(fake model) <Name> for <the name of its human>".
//
// It reads the agent's name, role and human from the directory (Options.
// Agents), the latest person's request from the history messages (the
// newest one labelled as a person's or a human agent's, see
// agents.SpeakerOf), the expert's key from llm.Request.Session, and the
// expert's pattern from its session_pattern (Options.Patterns).
package fakemodel

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/clip"
	"github.com/conclavehq/conclave/templates"
)

// Prefix starts every answer, so nobody mistakes it for a model's.
const Prefix = "(fake model) "

// ModelName is the model every response names.
const ModelName = "conclave-fake-model"

// quoteRunes is how much of the person's request a facilitator repeats.
const quoteRunes = 80

// DefaultPattern is the session pattern of an expert that has none: a
// word holding a digit, such as C45653 or CLM-123456.
const DefaultPattern = `[\p{L}\p{N}_-]*\p{N}[\p{L}\p{N}_-]*`

// Options configure a Model.
type Options struct {
	// Profiles answers Profile: the configured profiles, so that requests
	// are fitted to the budgets they would have with a real endpoint.
	Profiles agents.Profiles
	// Agents resolves an agent by its ENS name (the engine's directory).
	// An agent it does not know is named by its ENS name's first label.
	Agents func(ctx context.Context, ensName string) (ens.Agent, error)
	// Patterns are the experts' session patterns (RE2, matched against a
	// whole word), by ENS name; an expert without one uses DefaultPattern.
	Patterns map[string]string
}

// Model is the fake model. It implements agents.Model.
type Model struct {
	opts     Options
	patterns map[string]*regexp.Regexp
	fallback *regexp.Regexp
}

var _ agents.Model = (*Model)(nil)

// New returns a Model. A pattern that does not compile is an error naming
// its agent.
func New(opts Options) (*Model, error) {
	m := &Model{opts: opts, patterns: map[string]*regexp.Regexp{}, fallback: wholeWord(DefaultPattern)}
	for name, p := range opts.Patterns {
		if p == "" {
			continue
		}
		if _, err := regexp.Compile(p); err != nil {
			return nil, fmt.Errorf("fakemodel: session pattern of %s: %w", name, err)
		}
		m.patterns[strings.ToLower(name)] = wholeWord(p)
	}
	return m, nil
}

func wholeWord(p string) *regexp.Regexp { return regexp.MustCompile(`^(?:` + p + `)$`) }

// Profile returns the configured profile.
func (m *Model) Profile(name string) (llm.Profile, error) { return m.opts.Profiles.Profile(name) }

// Complete answers r. It fails only when ctx has ended.
func (m *Model) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	content := m.answer(ctx, r)
	prompt := 0
	for _, msg := range r.Messages {
		prompt += len(msg.Content)/4 + 1
	}
	return llm.Response{
		Content: content, FinishReason: llm.FinishStop, Model: ModelName,
		PromptTokens: prompt, CompletionTokens: len(content)/4 + 1, Attempts: 1,
		Sent: m.body(r),
	}, nil
}

// bodyBuilder is what the configured client offers to build a request's
// JSON body without sending it (llm.Client.RequestBody).
type bodyBuilder interface {
	RequestBody(llm.Request) (endpointURL string, body []byte, err error)
}

// body is the JSON body the configured endpoint would have received for
// r, so that traces and `chat --record` show the request as with a real
// model; nil when the profiles cannot build one.
func (m *Model) body(r llm.Request) []byte {
	b, ok := m.opts.Profiles.(bodyBuilder)
	if !ok {
		return nil
	}
	_, body, err := b.RequestBody(r)
	if err != nil {
		return nil
	}
	return body
}

// answer is the content of the response to r.
func (m *Model) answer(ctx context.Context, r llm.Request) string {
	self := m.agent(ctx, r.Agent)
	switch {
	case r.Role == string(ens.RoleFacilitator) && r.Prompt == templates.PromptConclude:
		return Prefix + "summary"
	case r.Role == string(ens.RoleFacilitator):
		heard := clip.Runes(m.latestPersonRequest(ctx, r.Messages), quoteRunes, "")
		return strings.Join(strings.Fields(Prefix+self.Name+" heard: "+heard+" :end:"), " ")
	case r.Role == string(ens.RoleExpert) && r.Prompt == templates.PromptContextNotFound:
		b, _ := json.Marshal(threading{Session: m.keyIn(r.Agent, latestRequest(r.Messages))}) // strings always encode
		return string(b)
	case r.Role == string(ens.RoleExpert):
		return Prefix + self.Name + " on " + r.Session
	case r.Role == string(ens.RoleClone):
		human := "its human"
		if self.CloneOf != "" {
			human = m.agent(ctx, self.CloneOf).Name
		}
		return Prefix + self.Name + " for " + human
	default:
		return Prefix + self.Name
	}
}

// threading is an expert's reply to context-not-found.
type threading struct {
	Session string `json:"session"`
	Message string `json:"message"`
}

// agent resolves name; an agent the directory does not know keeps its
// ENS name's first label as its name.
func (m *Model) agent(ctx context.Context, name string) ens.Agent {
	if m.opts.Agents != nil {
		if a, err := m.opts.Agents(ctx, name); err == nil && a.Name != "" {
			return a
		}
	}
	first, _, _ := strings.Cut(name, ".")
	return ens.Agent{Name: first, EnsDomain: name}
}

// history is the request's history: its messages without the system
// prompt (first) and the phase prompt (last).
func history(msgs []llm.Message) []llm.Message {
	if len(msgs) < 2 {
		return nil
	}
	return msgs[1 : len(msgs)-1]
}

// latestPersonRequest is the newest history message a person or a human
// agent wrote that is more than :end:, without its label; empty when
// there is none.
func (m *Model) latestPersonRequest(ctx context.Context, msgs []llm.Message) string {
	h := history(msgs)
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role != llm.RoleUser {
			continue
		}
		_, ensDomain, text, ok := agents.SpeakerOf(h[i].Content)
		if !ok || !hasWords(strings.ReplaceAll(text, ":end:", "")) {
			continue
		}
		if ensDomain == "" || m.agent(ctx, ensDomain).Role == ens.RoleHuman {
			return text
		}
	}
	return ""
}

// latestRequest is the text of the newest history message, without its
// label: for an expert, the latest message that named it.
func latestRequest(msgs []llm.Message) string {
	h := history(msgs)
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == llm.RoleUser {
			_, _, text, _ := agents.SpeakerOf(h[i].Content)
			return text
		}
	}
	return ""
}

// keyIn is the first word of text, trimmed of punctuation, that the
// expert's pattern matches; empty when none does.
func (m *Model) keyIn(agent, text string) string {
	re := m.patterns[strings.ToLower(agent)]
	if re == nil {
		re = m.fallback
	}
	for _, w := range strings.Fields(text) {
		w = strings.TrimFunc(w, func(r rune) bool { return unicode.IsPunct(r) && r != '-' && r != '_' })
		if w != "" && re.MatchString(w) {
			return w
		}
	}
	return ""
}

func hasWords(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}
