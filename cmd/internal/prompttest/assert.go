package prompttest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Op is what an assertion line checks of an agent's posts.
type Op string

// The assertions a "?" line may make.
const (
	OpContains    Op = "contains"     // a post contains the text
	OpNotContains Op = "not contains" // no post contains the text
	OpMatches     Op = "matches"      // a post holds a match of the regular expression
	OpJudge       Op = "judge"        // the judge model grades the posts against the rubric
)

// Assertion is a "?" line: a check on the posts an agent made after the
// person's line above it, made by `templates test --live` only (a scripted
// model's replies are the script's own words).
type Assertion struct {
	Line
	Op  Op
	Arg string         // the text, the expression or the rubric
	re  *regexp.Regexp // OpMatches
}

// String is the assertion as written, for messages.
func (a Assertion) String() string {
	if a.Op == OpMatches {
		return fmt.Sprintf("? %s: matches /%s/", a.Who, a.Arg)
	}
	return fmt.Sprintf("? %s: %s %s", a.Who, a.Op, strconv.Quote(a.Arg))
}

// assertionSyntax says what follows the colon of a "?" line.
const assertionSyntax = `contains "text", not contains "text", matches /regular expression/ or judge "rubric"`

// parseAssertion reads the text after the colon of a "?" line.
func parseAssertion(l Line) (Assertion, error) {
	a := Assertion{Line: l}
	rest := strings.TrimSpace(l.Text)
	for _, op := range []Op{OpNotContains, OpContains, OpMatches, OpJudge} {
		if after, ok := strings.CutPrefix(rest, string(op)+" "); ok {
			a.Op, rest = op, strings.TrimSpace(after)
			break
		}
	}
	if a.Op == "" {
		return a, fmt.Errorf("expected %s after the agent's name; got %q", assertionSyntax, clipped(rest))
	}
	if a.Op == OpMatches {
		if len(rest) < 2 || rest[0] != '/' || rest[len(rest)-1] != '/' {
			return a, fmt.Errorf("matches takes a regular expression between slashes, as in matches /C\\d{5}/; got %q", clipped(rest))
		}
		a.Arg = rest[1 : len(rest)-1]
		re, err := regexp.Compile(a.Arg)
		if err != nil {
			return a, fmt.Errorf("matches: %v", err)
		}
		a.re = re
		return a, nil
	}
	arg, err := strconv.Unquote(rest)
	if err != nil || !strings.HasPrefix(rest, `"`) {
		return a, fmt.Errorf("%s takes a quoted text, as in %s \"covered\"; got %q", a.Op, a.Op, clipped(rest))
	}
	if strings.TrimSpace(arg) == "" {
		return a, fmt.Errorf("%s takes a text that is not empty", a.Op)
	}
	a.Arg = arg
	return a, nil
}

// check applies a text assertion (contains, not contains, matches) to the
// agent's posts; it returns "" when it holds, else what went wrong,
// written like a diff: the expectation, then what was posted.
func (a Assertion) check(posts []string) string {
	switch a.Op {
	case OpContains:
		for _, p := range posts {
			if strings.Contains(p, a.Arg) {
				return ""
			}
		}
		return diffLike("a post containing "+strconv.Quote(a.Arg), posts)
	case OpNotContains:
		for _, p := range posts {
			if i := strings.Index(p, a.Arg); i >= 0 {
				return diffLike("no post containing "+strconv.Quote(a.Arg), []string{markAt(p, i, len(a.Arg))})
			}
		}
		return ""
	case OpMatches:
		for _, p := range posts {
			if a.re.MatchString(p) {
				return ""
			}
		}
		return diffLike("a post matching /"+a.Arg+"/", posts)
	}
	return ""
}

// diffLike writes an expectation and what was posted as the two sides of
// a diff.
func diffLike(want string, posts []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    - want: %s\n", want)
	for _, p := range posts {
		fmt.Fprintf(&b, "    + got:  %s\n", strconv.Quote(p))
	}
	return b.String()
}

// markAt brackets the n bytes of p at i, so that the text found shows
// where it is: "… [[found]] …".
func markAt(p string, i, n int) string {
	return p[:i] + "[[" + p[i:i+n] + "]]" + p[i+n:]
}
