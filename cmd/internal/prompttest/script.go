// Package prompttest runs the prompt tests of a config repository
// (`conclave templates test`): conversations written as .chat scripts,
// played through the real engine and the terminal transport against a
// scripted model, with every request the model receives compared with a
// golden file. No network and no model key are needed, so a pull request
// that edits a prompt shows, as a diff of those files, what each agent
// will be sent.
package prompttest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/conclavehq/conclave/internal/clip"
)

// Kind is what a line of a script does.
type Kind int

// The kinds of line.
const (
	Say    Kind = iota // "> Name: text": a person or human agent speaks
	Reply              // "< agent: reply": the model's reply to the agent's next request
	Expect             // "= agent: text": a post of the agent contains text
	Assert             // "? agent: contains \"text\"": checked on the posts by --live only
)

// Line is one line of a script that does something.
type Line struct {
	N        int // its line number in the file
	Kind     Kind
	Who      string // the person or agent, as written
	Text     string // with each `\n` turned into a newline
	InThread bool   // Say: a reply in the current thread rather than a new one
}

// Step is a person's line and the replies and expectations written after
// it, up to the next person's line: the replies answer the requests that
// line causes, the expectations are checked once the agents settle.
type Step struct {
	Say     Line
	Replies []Line
	Expects []Line
	Asserts []Assertion // checked only when the test runs live
}

// Script is a parsed .chat file.
type Script struct {
	Path  string
	Steps []Step
}

// syntax is what a line may be, for the parse error.
const syntax = `"> Name: text", "> Name in thread: text", "< agent: reply", "= agent: text", "? agent: contains \"text\"", "# comment" or a blank line`

// inThread ends the name of a reply in the current thread.
const inThread = " in thread"

// Parse reads a script. Its error lists every line that does not parse,
// each as path:line: what was expected.
func Parse(path string, r io.Reader) (Script, error) {
	s := Script{Path: path}
	var errs []error
	fail := func(n int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", path, n, fmt.Sprintf(format, args...)))
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		raw := strings.TrimSpace(sc.Text())
		if raw == "" || strings.HasPrefix(raw, "#") {
			continue
		}
		kind, ok := map[byte]Kind{'>': Say, '<': Reply, '=': Expect, '?': Assert}[raw[0]]
		if !ok {
			fail(n, "expected %s; got %q", syntax, clipped(raw))
			continue
		}
		who, text, found := strings.Cut(raw[1:], ":")
		who, text = strings.TrimSpace(who), strings.TrimSpace(text)
		l := Line{N: n, Kind: kind, Who: who, Text: strings.ReplaceAll(text, `\n`, "\n")}
		if kind == Say && strings.HasSuffix(strings.ToLower(who), inThread) {
			l.InThread = true
			l.Who = strings.TrimSpace(who[:len(who)-len(inThread)])
		}
		switch {
		case !found:
			fail(n, "expected a colon after the name, as in %s; got %q", example(kind), clipped(raw))
		case l.Who == "":
			fail(n, "expected a name before the colon, as in %s", example(kind))
		case text == "":
			fail(n, "expected text after the colon, as in %s", example(kind))
		case kind == Say && l.InThread && len(s.Steps) == 0:
			fail(n, "a reply in thread before any message: the first person's line starts the thread (\"> %s: text\")", l.Who)
		case kind == Say:
			s.Steps = append(s.Steps, Step{Say: l})
		case len(s.Steps) == 0:
			fail(n, "%s before the first person's line: it belongs to the person's line above it", map[Kind]string{Reply: "a scripted reply", Expect: "an expected post", Assert: "an assertion"}[kind])
		case kind == Assert:
			a, err := parseAssertion(l)
			if err != nil {
				fail(n, "%v", err)
				continue
			}
			last := &s.Steps[len(s.Steps)-1]
			last.Asserts = append(last.Asserts, a)
		case kind == Reply:
			last := &s.Steps[len(s.Steps)-1]
			last.Replies = append(last.Replies, l)
		default:
			last := &s.Steps[len(s.Steps)-1]
			last.Expects = append(last.Expects, l)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: read: %w", path, err))
	}
	if len(errs) == 0 && len(s.Steps) == 0 {
		errs = append(errs, fmt.Errorf("%s: no person's line (\"> Name: text\"): nothing to run", path))
	}
	return s, errors.Join(errs...)
}

// example is a well-formed line of kind.
func example(k Kind) string {
	switch k {
	case Reply:
		return `"< agent: reply"`
	case Expect:
		return `"= agent: text"`
	case Assert:
		return `"? agent: contains \"text\""`
	}
	return `"> Name: text"`
}

// clipped shortens a text quoted in an error.
func clipped(s string) string { return clip.Runes(s, 60, "…") }
