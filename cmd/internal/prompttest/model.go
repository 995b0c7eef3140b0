package prompttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
)

// ErrNoReply is the error a scripted model returns for a request the
// script wrote no reply for.
var ErrNoReply = errors.New("no scripted reply")

// Request is one request the scripted model received.
type Request struct {
	Agent  string // the agent's ENS name (llm.Request.Agent)
	Prompt string // the phase (llm.Request.Prompt)
	Text   string // RenderRequest of it
}

// scripted is the model of a test: it answers each agent's requests with
// the replies the script wrote for it, in order, and keeps every request.
// It implements agents.Model; its profiles are the configuration's.
type scripted struct {
	agents.Profiles
	path string                  // the script, for messages
	name func(ens string) string // an agent's display name, for messages

	mu       sync.Mutex
	replies  map[string][]Line // by agent ENS name, still to give
	after    int               // the line of the person whose line is being answered
	requests []Request
	problems []string
}

var _ agents.Model = (*scripted)(nil)

func newScripted(path string, p agents.Profiles, name func(string) string) *scripted {
	return &scripted{Profiles: p, path: path, name: name, replies: map[string][]Line{}}
}

// expect queues the replies of a step (by agent ENS name), answering the
// requests caused by the person's line at line after.
func (m *scripted) expect(after int, replies map[string][]Line) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.after = after
	for agent, lines := range replies {
		m.replies[agent] = append(m.replies[agent], lines...)
	}
}

// unusedReply is a reply no request asked for.
type unusedReply struct {
	agent string // ENS name
	line  Line
}

// unused returns, and forgets, the replies no request asked for, in the
// order of the script.
func (m *scripted) unused() []unusedReply {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []unusedReply
	for agent, lines := range m.replies {
		for _, l := range lines {
			out = append(out, unusedReply{agent: agent, line: l})
		}
		delete(m.replies, agent)
	}
	slices.SortFunc(out, func(a, b unusedReply) int { return a.line.N - b.line.N })
	return out
}

// Complete answers with the agent's next scripted reply; without one it
// fails (ErrNoReply) and notes the problem, naming the agent and phase.
func (m *scripted) Complete(_ context.Context, r llm.Request) (llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, Request{Agent: r.Agent, Prompt: r.Prompt, Text: RenderRequest(r)})
	queue := m.replies[r.Agent]
	if len(queue) == 0 {
		name := m.name(r.Agent)
		m.problems = append(m.problems, fmt.Sprintf("%s:%d: no scripted reply for %s's %s request (request %d, from %s): script it with \"< %s: …\" after line %d",
			m.path, m.after, name, r.Prompt, len(m.requests), r.Agent, strings.ToLower(name), m.after))
		return llm.Response{}, fmt.Errorf("templates test: %s, %s: %w", r.Agent, r.Prompt, ErrNoReply)
	}
	m.replies[r.Agent] = queue[1:]
	return llm.Response{Content: queue[0].Text, FinishReason: llm.FinishStop, Model: "scripted"}, nil
}

// received returns the requests so far.
func (m *scripted) received() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// takeProblems returns, and forgets, the requests that had no reply.
func (m *scripted) takeProblems() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.problems
	m.problems = nil
	return out
}
