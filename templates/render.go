package templates

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode"
	"unicode/utf8"
)

// Error is a problem in one template or settings file: "file:line: message".
// Render and Settings return one (or several, joined) so the failed turn
// names the file to fix.
type Error struct {
	File    string // the file's path; built-in prompts are named "builtin:<role>/<prompt>.tmpl"
	Line    int    // 1-based; 0 when the problem has no line
	Message string
	err     error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	}
	return e.File + ": " + e.Message
}

// errUnknownFile marks files outside the layout: check fails on them, a
// running conclave ignores them.
var errUnknownFile = errors.New("not a place of the layout")

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.err }

// isControl reports whether r is removed from template text: Unicode Cc,
// Zl and Zp.
func isControl(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Zl, unicode.Zp)
}

// collapseControls replaces each run of control characters in s with one
// space, keeping every other byte as it is (invalid UTF-8 included).
func collapseControls(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	inRun := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if isControl(r) {
			if !inRun {
				b.WriteByte(' ')
			}
			inRun = true
		} else {
			b.WriteString(s[i : i+size])
			inRun = false
		}
		i += size
	}
	return b.String()
}

// removeControls applies the control-character rule to a parsed tree: the
// text between actions and the string literals inside them. Rewriting
// after the parse keeps node positions on the source lines, so errors
// name the line an author sees.
func removeControls(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			removeControls(c)
		}
	case *parse.TextNode:
		n.Text = []byte(collapseControls(string(n.Text)))
	case *parse.ActionNode:
		removeControlsPipe(n.Pipe)
	case *parse.IfNode:
		removeControlsBranch(&n.BranchNode)
	case *parse.RangeNode:
		removeControlsBranch(&n.BranchNode)
	case *parse.WithNode:
		removeControlsBranch(&n.BranchNode)
	case *parse.TemplateNode:
		removeControlsPipe(n.Pipe)
	case *parse.PipeNode:
		removeControlsPipe(n)
	case *parse.ChainNode:
		removeControls(n.Node)
	case *parse.StringNode:
		if strings.IndexFunc(n.Quoted, isControl) < 0 {
			return
		}
		quoted := collapseControls(n.Quoted)
		if s, err := strconv.Unquote(quoted); err == nil {
			n.Quoted, n.Text = quoted, s
		}
	}
}

func removeControlsBranch(b *parse.BranchNode) {
	removeControlsPipe(b.Pipe)
	removeControls(b.List)
	removeControls(b.ElseList)
}

func removeControlsPipe(p *parse.PipeNode) {
	if p == nil {
		return
	}
	for _, c := range p.Cmds {
		for _, arg := range c.Args {
			removeControls(arg)
		}
	}
}

// blankActionControls turns the control characters between the words of
// actions into spaces, which the parser takes as white space: the rule
// removes control characters before parsing, wherever they are. Line
// breaks stay, so lines keep their numbers; the text between actions, and
// string literals and comments inside them, are left to removeControls.
func blankActionControls(text string) string {
	if strings.IndexFunc(text, isBlankedInAction) < 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for i := 0; i < len(text); {
		start := strings.Index(text[i:], "{{")
		if start < 0 {
			b.WriteString(text[i:])
			break
		}
		b.WriteString(text[i : i+start+2])
		i += start + 2
		i = blankAction(&b, text, i)
	}
	return b.String()
}

// blankAction copies the action starting at text[i], after its "{{", up to
// and including its "}}", and returns where the copy stopped.
func blankAction(b *strings.Builder, text string, i int) int {
	if rest := strings.TrimPrefix(text[i:], "- "); strings.HasPrefix(rest, "/*") {
		end := strings.Index(text[i:], "*/")
		if end < 0 {
			b.WriteString(text[i:])
			return len(text)
		}
		b.WriteString(text[i : i+end+2])
		i += end + 2
	}
	for i < len(text) {
		if strings.HasPrefix(text[i:], "}}") {
			b.WriteString("}}")
			return i + 2
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '"' || r == '`' || r == '\'':
			end := literalEnd(text, i, byte(r))
			b.WriteString(text[i:end])
			i = end
			continue
		case isBlankedInAction(r):
			b.WriteByte(' ')
		default:
			b.WriteString(text[i : i+size])
		}
		i += size
	}
	return i
}

// literalEnd returns the index just past the string or character literal
// opening at text[i] with quote; a literal left open ends at the line's
// end (the parser reports it).
func literalEnd(text string, i int, quote byte) int {
	for j := i + 1; j < len(text); j++ {
		switch c := text[j]; {
		case c == quote:
			return j + 1
		case c == '\\' && quote != '`':
			j++
		case c == '\n' && quote != '`':
			return j
		}
	}
	return len(text)
}

// isBlankedInAction reports whether r is a control character the parser
// would refuse inside an action (it takes tabs and line breaks as spaces).
func isBlankedInAction(r rune) bool {
	return isControl(r) && r != '\t' && r != '\n' && r != '\r'
}

// parseFile parses one template file under the rendering rules. The
// returned template holds the file's body under name and its {{define}}
// blocks.
func parseFile(name, text string, funcs template.FuncMap) (*template.Template, error) {
	t, err := template.New(name).Funcs(funcs).Parse(blankActionControls(text))
	if err != nil {
		return nil, parseError(name, err)
	}
	for _, d := range t.Templates() {
		removeControls(d.Tree.Root)
		foldAttributeNames(d.Tree.Root)
	}
	return t, nil
}

var (
	parseErrorRE = regexp.MustCompile(`(?s)^template: (.*?):(\d+): (.*)$`)
	execErrorRE  = regexp.MustCompile(`(?s)^template: (.*?):(\d+):\d+: executing ".*?" at <(.*?)>: (.*)$`)
)

// parseError turns a text/template parse error into "file:line: message".
func parseError(name string, err error) *Error {
	m := parseErrorRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{File: name, Message: strings.TrimPrefix(err.Error(), "template: "), err: err}
	}
	line, _ := strconv.Atoi(m[2])
	return &Error{File: m[1], Line: line, Message: m[3], err: err}
}

// execError turns a text/template execution error into "file:line: at
// <action>: message", where file is the file holding the failing action
// (a partial's, when it failed there).
func execError(name string, err error) *Error {
	var ee template.ExecError
	if !errors.As(err, &ee) {
		return &Error{File: name, Message: err.Error(), err: err}
	}
	m := execErrorRE.FindStringSubmatch(ee.Err.Error())
	if m == nil {
		return &Error{File: name, Message: strings.TrimPrefix(ee.Err.Error(), "template: "), err: err}
	}
	line, _ := strconv.Atoi(m[2])
	msg := m[4]
	var agentOnly *agentOnlyError
	if errors.As(err, &agentOnly) {
		msg = agentOnly.Error()
	}
	var req *requiredError
	if errors.As(err, &req) {
		// The author wrote the whole message.
		return &Error{File: m[1], Line: line, Message: req.what, err: err}
	}
	return &Error{File: m[1], Line: line, Message: fmt.Sprintf("at <%s>: %s", m[3], msg), err: err}
}

// ErrEmptyPrompt is what a render that gave nothing but white space
// wraps.
var ErrEmptyPrompt = errors.New("the prompt renders to nothing but white space")

// maxOutput caps what a prompt may render to: far more than any model
// input, small enough that a runaway loop fails its turn instead of
// filling memory.
const maxOutput = 1 << 20

// errOutputTooLarge stops a render that passes maxOutput.
var errOutputTooLarge = errors.New("output too large")

// output collects a render, up to maxOutput bytes.
type output struct{ strings.Builder }

func (o *output) Write(p []byte) (int, error) {
	if o.Len()+len(p) > maxOutput {
		return 0, errOutputTooLarge
	}
	return o.Builder.Write(p)
}

// execute renders t on d, on the fast views first and, when that fails,
// on the full views, whose result stands (see view.go). sizeHint is the
// expected length of the output. The result has no leading or trailing
// white space; one that is nothing but white space is an error naming the
// file.
func execute(t *template.Template, sizeHint int, d *Data) (string, error) {
	var b output
	b.Grow(sizeHint)
	err := t.Execute(&b, d.fastView())
	if err != nil && !errors.Is(err, errOutputTooLarge) {
		b.Reset()
		b.Grow(sizeHint)
		err = t.Execute(&b, d.templateView())
	}
	switch {
	case errors.Is(err, errOutputTooLarge):
		return "", &Error{File: t.Name(), Message: fmt.Sprintf("the prompt renders to more than %d bytes", maxOutput), err: err}
	case err != nil:
		return "", execError(t.Name(), err)
	}
	out := strings.TrimSpace(b.String())
	if out == "" {
		return "", &Error{File: t.Name(), Message: ErrEmptyPrompt.Error(), err: ErrEmptyPrompt}
	}
	return out, nil
}

// RepoFile is the file's path in the config repository
// ("agents/<ens>/system.tmpl", "expert/system.tmpl"), what a ⚠️ notice
// shows so that everyone in the channel does not learn where the
// repository sits on the host: the shortest tail of File that is a place
// of the layout; when none is, File itself if relative, else its last
// element. Built-in files keep their builtin: name.
func (e *Error) RepoFile() string {
	if strings.HasPrefix(e.File, builtinPrefix) {
		return e.File
	}
	parts := strings.Split(filepath.ToSlash(e.File), "/")
	for n := 2; n <= maxDepth && n <= len(parts); n++ {
		tail := strings.Join(parts[len(parts)-n:], "/")
		if k := classify(tail).kind; k != kindUnknown && k != kindIgnored {
			return tail
		}
	}
	if !filepath.IsAbs(e.File) {
		return e.File
	}
	return parts[len(parts)-1]
}
