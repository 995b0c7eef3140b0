package prompttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"text/template"
	"unicode"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
)

// Live runs the scripts against a real model endpoint (`templates test
// --live`): the scripted "<" replies and the golden files are left
// aside, and the "?" assertions are checked on what the agents post.
type Live struct {
	// Model is the configured endpoint; the agents and the judge call it.
	Model agents.Model
	// JudgeProfile is the profile that grades judge assertions
	// ([templates] judge_profile); "" is the default profile.
	JudgeProfile string
}

// judgeFile is where a config repository overrides the judge's prompt,
// under its tests folder.
const judgeFile = "judge.tmpl"

// builtinJudge is the judge's prompt when the repository has none. It
// receives .Agent, .Rubric, .Post and .Conversation.
const builtinJudge = `You grade a message that {{.Agent}}, an AI agent in a team chat, posted, against a rubric.

The conversation so far:
{{.Conversation}}

The message to grade:
<<<
{{.Post}}
>>>

The rubric: {{.Rubric}}

Does the message meet the rubric? Judge only the message, against the rubric alone.
Reply with one line: PASS or FAIL, a colon, then the reason in one sentence.`

// JudgeData is what the judge's prompt receives.
type JudgeData struct {
	Agent        string // the agent's name
	Rubric       string // the text of the judge assertion
	Post         string // the agent's posts after the person's line, separated by blank lines
	Conversation string // the conversation as the test played it up to then
}

// judgePrompt loads the judge's prompt: tests/judge.tmpl of dir, else the
// built-in one.
func judgePrompt(dir string) (*template.Template, error) {
	path := filepath.Join(dir, "tests", judgeFile)
	text := builtinJudge
	body, err := os.ReadFile(path) // #nosec G304 -- the judge prompt of the repository being tested
	switch {
	case err == nil:
		text = string(body)
	case errors.Is(err, fs.ErrNotExist):
		path = "the built-in judge prompt"
	default:
		return nil, fmt.Errorf("templates test: %w", err)
	}
	t, err := template.New(path).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("templates test: %w", err)
	}
	return t, nil
}

// verdict is the judge's answer.
type verdict struct {
	pass   bool
	reason string
}

// judge asks the judge model whether posts meet the rubric.
func (l *Live) judge(ctx context.Context, prompt *template.Template, d JudgeData) (verdict, error) {
	var b bytes.Buffer
	if err := prompt.Execute(&b, d); err != nil {
		return verdict{}, fmt.Errorf("judge prompt: %w", err)
	}
	zero := 0.0
	resp, err := l.Model.Complete(ctx, llm.Request{
		Profile: l.JudgeProfile, Temperature: &zero,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: b.String()}},
		Agent:    "judge", Role: "judge", Prompt: "judge",
	})
	if err != nil {
		return verdict{}, fmt.Errorf("judge: %w", err)
	}
	return readVerdict(resp.Content)
}

// readVerdict reads "PASS: reason" or "FAIL: reason", in any case, with
// any punctuation or markdown around the word.
func readVerdict(reply string) (verdict, error) {
	s := strings.TrimLeftFunc(reply, func(r rune) bool { return !unicode.IsLetter(r) })
	word := strings.ToLower(s[:min(4, len(s))])
	if word != "pass" && word != "fail" {
		return verdict{}, fmt.Errorf("the judge's reply starts with neither PASS nor FAIL: %q", clipped(strings.TrimSpace(reply)))
	}
	reason := strings.TrimSpace(strings.TrimLeftFunc(s[4:], func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }))
	return verdict{pass: word == "pass", reason: reason}, nil
}

// checkAsserts checks the assertions of a step on the posts made after
// its person's line, noting each outcome in the transcript; it returns
// what failed.
func (p *play) checkAsserts(ctx context.Context, st boundStep, posts []post) []string {
	var problems []string
	for _, a := range st.Asserts {
		fail := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", p.path, a.N, a, fmt.Sprintf(format, args...)))
			fmt.Fprintf(&p.transcript, "%s → FAIL\n", a)
		}
		agent, ok, err := p.cast.find(a.Who)
		switch {
		case err != nil:
			fail("%v", err)
			continue
		case !ok:
			fail("no agent named %q; the agents are %s", a.Who, p.cast.names())
			continue
		}
		var texts []string
		for _, po := range posts {
			if po.author == agent.Name {
				texts = append(texts, strings.TrimSpace(po.text))
			}
		}
		if len(texts) == 0 {
			fail("%s posted nothing after line %d", agent.Name, st.Say.N)
			continue
		}
		if a.Op != OpJudge {
			if diff := a.check(texts); diff != "" {
				fail("failed\n%s", strings.TrimRight(diff, "\n"))
				continue
			}
			fmt.Fprintf(&p.transcript, "%s → pass\n", a)
			continue
		}
		if p.judgePrompt == nil {
			fail("%v", p.judgeErr)
			continue
		}
		v, err := p.o.Live.judge(ctx, p.judgePrompt, JudgeData{
			Agent: agent.Name, Rubric: a.Arg, Post: strings.Join(texts, "\n\n"), Conversation: p.transcript.String(),
		})
		switch {
		case err != nil:
			fail("%v", err)
		case !v.pass:
			fail("the judge says FAIL: %s\n%s", v.reason, strings.TrimRight(diffLike("a post that meets the rubric", texts), "\n"))
		default:
			fmt.Fprintf(&p.transcript, "%s → pass (%s)\n", a, v.reason)
		}
	}
	return problems
}

// countedModel counts the requests the agents send to the live model.
type countedModel struct {
	agents.Model
	n *atomic.Int64
}

func (m countedModel) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	m.n.Add(1)
	return m.Model.Complete(ctx, r)
}
