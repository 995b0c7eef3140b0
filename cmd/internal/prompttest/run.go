package prompttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/bot/terminal"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/testlog"
)

// ErrNoTests is returned by Run when the directory holds no tests/*.chat.
var ErrNoTests = errors.New("no tests")

// Ports are what a test's engine is built around: the chat it posts to,
// the model it calls, which conversations it owns, and where its log goes.
type Ports struct {
	Chat  agents.Chat
	Model agents.Model
	Owns  func(conversationID string) bool
	Log   io.Writer // warnings and errors, shown when the test fails
}

// Wiring is the engine of one test, over a store of its own.
type Wiring struct {
	Engine *agents.Engine
	// Pair pairs a user id with a human agent, so that the user's
	// messages are the agent's.
	Pair  func(ctx context.Context, userID, agentENS string) error
	Close func() // nil: nothing to close
}

// Options configure Run.
type Options struct {
	// Dir is the templates directory: its tests/*.chat are run, and each
	// test's golden files are in tests/<name>.golden.
	Dir     string
	Channel string      // the channel the conversations are held in
	Agents  []ens.Agent // the agents a script may name (ENS name, display name or first label)
	// Profiles are the model profiles the scripted model offers.
	Profiles agents.Profiles
	// Start builds a test's engine: the configured agents and prompts,
	// an in-process store of its own, the ports given.
	Start func(Ports) (Wiring, error)
	Now   func() time.Time // the terminal's clock; nil: time.Now
	// Update writes the golden files (and removes those no request
	// matches) instead of comparing.
	Update bool
	// Verbose prints every test's conversation, not only a failed one's.
	Verbose bool
	Out     io.Writer
	// StepTimeout bounds the wait for the agents to settle after a
	// person's line; default one minute.
	StepTimeout time.Duration
	// Live, when set, plays the scripts against a real model: no
	// scripted replies, no golden files, the "?" assertions checked.
	Live *Live
}

// Summary counts the tests run.
type Summary struct{ Passed, Failed int }

// Run runs every tests/*.chat of Options.Dir, in name order, prints what
// each did and ends with "N passed, M failed". It returns an error only
// when there is nothing to run.
func Run(ctx context.Context, o Options) (Summary, error) {
	if o.StepTimeout <= 0 {
		o.StepTimeout = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	tests, err := openTests(o.Dir)
	if err != nil {
		return Summary{}, err
	}
	defer tests.Close()
	names, err := fs.Glob(tests.FS(), "*.chat")
	if err != nil || len(names) == 0 {
		return Summary{}, fmt.Errorf("templates test: %w: %s holds no tests/*.chat", ErrNoTests, o.Dir)
	}
	slices.Sort(names)
	var sum Summary
	for _, name := range names {
		r := runOne(ctx, o, tests, name)
		r.print(o.Out, o.Update, o.Verbose)
		if r.ok() {
			sum.Passed++
		} else {
			sum.Failed++
		}
	}
	fmt.Fprintf(o.Out, "%d passed, %d failed\n", sum.Passed, sum.Failed)
	return sum, nil
}

// result is one test's outcome.
type result struct {
	name       string
	requests   int
	problems   []string // what failed, in order
	transcript string
	log        string
}

func (r result) ok() bool { return len(r.problems) == 0 }

func (r result) print(w io.Writer, update, verbose bool) {
	status, note := "PASS", ""
	if !r.ok() {
		status = "FAIL"
	}
	if update && r.ok() {
		note = ", golden files written"
	}
	fmt.Fprintf(w, "%s %s (%d request(s)%s)\n", status, r.name, r.requests, note)
	for _, p := range r.problems {
		fmt.Fprintln(w, strings.TrimRight(p, "\n"))
	}
	if verbose || !r.ok() && r.transcript != "" {
		fmt.Fprintf(w, "conversation:\n%s", indent(r.transcript))
	}
	if !r.ok() && r.log != "" {
		fmt.Fprintf(w, "log:\n%s", indent(r.log))
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// openTests opens the tests/ directory of dir as a root, itself through
// the root of dir: every script and golden file is read and written
// through it, so a link out of tests/ is never followed.
func openTests(dir string) (*os.Root, error) {
	repo, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("templates test: %w: %s holds no tests/*.chat: %w", ErrNoTests, dir, err)
	}
	defer repo.Close()
	tests, err := repo.OpenRoot("tests")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("templates test: %w: %s holds no tests/*.chat", ErrNoTests, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("templates test: %w: %s holds no tests/*.chat: %w", ErrNoTests, dir, err)
	}
	return tests, nil
}

// runOne runs the script tests/<file>.
func runOne(ctx context.Context, o Options, tests *os.Root, file string) result {
	name := strings.TrimSuffix(file, ".chat")
	path := filepath.Join(o.Dir, "tests", file)
	res := result{name: name}
	f, err := tests.Open(file)
	if err != nil {
		res.problems = append(res.problems, err.Error())
		return res
	}
	script, err := Parse(path, f)
	_ = f.Close()
	if err != nil {
		res.problems = append(res.problems, err.Error())
		return res
	}
	c := cast(o.Agents)
	steps, err := c.bind(script)
	if err != nil {
		res.problems = append(res.problems, err.Error())
		return res
	}
	p := newPlay(o, script.Path, c)
	res.problems = p.run(ctx, steps)
	requests := p.model.received()
	res.problems = append(res.problems, p.model.takeProblems()...)
	res.requests = len(requests) + int(p.liveRequests.Load())
	res.transcript, res.log = p.transcript.String(), p.log.String()
	goldenDir := name + ".golden"
	files := goldenFiles(requests)
	switch {
	case o.Live != nil: // a real model's requests differ from run to run
	case o.Update && res.ok():
		if err := writeGolden(tests, goldenDir, files); err != nil {
			res.problems = append(res.problems, err.Error())
		}
	case o.Update:
		res.problems = append(res.problems, "(golden files not written: the script failed)")
	default:
		res.problems = append(res.problems, compareGolden(tests, goldenDir, filepath.Join(o.Dir, "tests", goldenDir), path, files)...)
	}
	return res
}

// boundStep is a step whose names are resolved to agents.
type boundStep struct {
	Step
	person  string // the display name the person's line is said as
	human   string // the human agent speaking, if one does
	replies map[string][]Line
	expects []expectation
}

type expectation struct {
	Line
	agent ens.Agent
}

// cast is the agents a script may name.
type cast []ens.Agent

// find returns the agent a name means: its ENS name, display name or
// first label, case-insensitively.
func (c cast) find(name string) (ens.Agent, bool, error) {
	var found []ens.Agent
	for _, a := range c {
		first, _, _ := strings.Cut(a.EnsDomain, ".")
		if strings.EqualFold(name, a.EnsDomain) || strings.EqualFold(name, a.Name) || strings.EqualFold(name, first) {
			found = append(found, a)
		}
	}
	switch len(found) {
	case 0:
		return ens.Agent{}, false, nil
	case 1:
		return found[0], true, nil
	}
	return ens.Agent{}, false, fmt.Errorf("%q names %s and %s: write the full ENS name", name, found[0].EnsDomain, found[1].EnsDomain)
}

// display is an agent's name as posts and messages show it.
func (c cast) display(ensName string) string {
	for _, a := range c {
		if strings.EqualFold(a.EnsDomain, ensName) && a.Name != "" {
			return a.Name
		}
	}
	first, _, _ := strings.Cut(ensName, ".")
	return first
}

func (c cast) names() string {
	var out []string
	for _, a := range c {
		out = append(out, fmt.Sprintf("%s (%s, %s)", a.Name, a.EnsDomain, a.Role))
	}
	if len(out) == 0 {
		return "none are configured"
	}
	return strings.Join(out, ", ")
}

// bind resolves the names of a script: a person's line is a person's
// unless it names a human agent; replies and expectations name agents
// that have a model.
func (c cast) bind(s Script) ([]boundStep, error) {
	var errs []error
	fail := func(l Line, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", s.Path, l.N, fmt.Sprintf(format, args...)))
	}
	steps := make([]boundStep, 0, len(s.Steps))
	for _, st := range s.Steps {
		b := boundStep{Step: st, person: st.Say.Who, replies: map[string][]Line{}}
		a, ok, err := c.find(st.Say.Who)
		switch {
		case err != nil:
			fail(st.Say, "%v", err)
		case ok && a.Role == ens.RoleHuman:
			b.person, b.human = a.Name, a.EnsDomain
		case ok:
			fail(st.Say, "%s is an agent (%s), not a person: script its model reply with \"< %s: reply\"", a.Name, a.Role, st.Say.Who)
		}
		for _, l := range append(slices.Clone(st.Replies), st.Expects...) {
			a, ok, err := c.find(l.Who)
			switch {
			case err != nil:
				fail(l, "%v", err)
			case !ok:
				fail(l, "no agent named %q; the agents are %s", l.Who, c.names())
			case a.Role == ens.RoleHuman:
				fail(l, "%s is a human agent: it calls no model and posts nothing itself; it speaks with \"> %s in thread: text\"", a.Name, a.Name)
			case l.Kind == Reply:
				b.replies[a.EnsDomain] = append(b.replies[a.EnsDomain], l)
			default:
				b.expects = append(b.expects, expectation{Line: l, agent: a})
			}
		}
		steps = append(steps, b)
	}
	return steps, errors.Join(errs...)
}

// play is one run of a script through the engine.
type play struct {
	o          Options
	path       string
	cast       cast
	model      *scripted
	term       *terminal.Terminal
	chat       *postLog
	transcript testlog.Buffer // written by the engine's goroutines and the script
	log        testlog.Buffer
	// judgePrompt grades judge assertions when the play is live; judgeErr
	// says why there is none.
	judgePrompt  *template.Template
	judgeErr     error
	liveRequests atomic.Int64 // the agents' requests to the live model
}

func newPlay(o Options, path string, c cast) *play {
	p := &play{o: o, path: path, cast: c}
	p.model = newScripted(path, o.Profiles, c.display)
	p.term = terminal.New(terminal.Options{
		Channel: o.Channel, Out: &p.transcript, Status: &p.transcript, Wait: true,
		Poll: 5 * time.Millisecond, Now: o.Now,
		Names: func(_ context.Context, name string) string { return c.display(name) },
	})
	p.chat = &postLog{Terminal: p.term}
	if o.Live != nil {
		p.judgePrompt, p.judgeErr = judgePrompt(o.Dir)
	}
	return p
}

// run plays the steps and returns what failed; it stops at a step whose
// agents do not settle.
func (p *play) run(ctx context.Context, steps []boundStep) (problems []string) {
	var model agents.Model = p.model
	if p.o.Live != nil {
		model = countedModel{Model: p.o.Live.Model, n: &p.liveRequests}
	}
	w, err := p.o.Start(Ports{Chat: p.chat, Model: model, Owns: p.term.Owns, Log: &p.log})
	if err != nil {
		return []string{err.Error()}
	}
	if w.Close != nil {
		defer w.Close()
	}
	for _, st := range steps {
		if st.human == "" {
			continue
		}
		if err := w.Pair(ctx, terminal.UserID(st.person), st.human); err != nil {
			return []string{fmt.Sprintf("pair %s with %s: %v", st.person, st.human, err)}
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Engine.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			problems = append(problems, "engine: "+err.Error())
		}
	}()
	eng := scriptEngine{w.Engine}
	for _, st := range steps {
		if p.o.Live == nil {
			p.model.expect(st.Say.N, st.replies)
		}
		mark := p.chat.count()
		thread := ""
		if st.Say.InThread {
			thread = " in thread"
		}
		fmt.Fprintf(&p.transcript, "> %s%s: %s\n", st.person, thread, st.Say.Text)
		stepCtx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
		err := p.term.Say(stepCtx, eng, st.person, st.Say.Text, !st.Say.InThread)
		timedOut := stepCtx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			return append(problems, fmt.Sprintf("%s:%d: %v", p.path, st.Say.N, err))
		}
		if timedOut {
			return append(problems, fmt.Sprintf("%s:%d: the agents had not settled %s after this line", p.path, st.Say.N, p.o.StepTimeout))
		}
		if p.o.Live != nil {
			problems = append(problems, p.checkAsserts(ctx, st, p.chat.since(mark))...)
			continue
		}
		problems = append(problems, p.model.takeProblems()...)
		for _, u := range p.model.unused() {
			l, name := u.line, p.cast.display(u.agent)
			problems = append(problems, fmt.Sprintf("%s:%d: a reply is scripted for %s, but %s sent no request for it after line %d",
				p.path, l.N, name, name, st.Say.N))
		}
		posts := p.chat.since(mark)
		for _, e := range st.expects {
			if !containsPost(posts, e.agent.Name, e.Text) {
				problems = append(problems, fmt.Sprintf("%s:%d: no post by %s after line %d contains %q; %s",
					p.path, e.N, e.agent.Name, st.Say.N, e.Text, postsBy(posts, e.agent.Name)))
			}
		}
	}
	return problems
}

// scriptEngine lets the terminal wait for the agents without waiting for
// human agents' answers: the script speaks for them.
type scriptEngine struct{ *agents.Engine }

func (s scriptEngine) Settled(ctx context.Context, team, channel, threadTS string) (bool, error) {
	return s.SettledButCalls(ctx, team, channel, threadTS)
}

// post is one post an agent made.
type post struct{ author, text string }

// postLog is the terminal's chat, keeping the posts for the expectations.
type postLog struct {
	*terminal.Terminal
	mu    sync.Mutex
	posts []post
}

func (l *postLog) PostReply(ctx context.Context, r agents.Reply) ([]string, error) {
	ts, err := l.Terminal.PostReply(ctx, r)
	if err == nil && len(r.Posted) == 0 {
		l.mu.Lock()
		l.posts = append(l.posts, post{author: r.Username, text: r.Text})
		l.mu.Unlock()
	}
	return ts, err
}

func (l *postLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.posts)
}

func (l *postLog) since(mark int) []post {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.posts[mark:])
}

func containsPost(posts []post, author, text string) bool {
	return slices.ContainsFunc(posts, func(p post) bool { return p.author == author && strings.Contains(p.text, text) })
}

// postsBy says what an agent posted, for an unmet expectation.
func postsBy(posts []post, author string) string {
	var quoted []string
	for _, p := range posts {
		if p.author == author {
			quoted = append(quoted, fmt.Sprintf("%q", clipped(strings.TrimSpace(p.text))))
		}
	}
	if len(quoted) == 0 {
		return author + " posted nothing then"
	}
	return author + " posted " + strings.Join(quoted, ", ")
}
