package templates

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// FixedClock is the time check and render give templates (through now),
// so that their output does not change from one run to the next.
func FixedClock() time.Time { return time.Date(2025, time.March, 14, 9, 30, 0, 0, time.UTC) }

// CheckOptions configure Check.
type CheckOptions struct {
	// Fixtures are the data templates are rendered with. A prompt is
	// rendered for each role that uses it, with the fixtures written for
	// that role (Role equal to it, or empty); a role none is written for
	// uses BuiltinFixtureFor(role). Each fixture is rendered as written,
	// then with person authors, then with agent authors.
	Fixtures []Fixture
	// Clock is what now returns; nil means FixedClock.
	Clock func() time.Time
	// Vars are the operator variables of the configuration
	// ([templates.vars]). Templates render with them, under a fixture's
	// own Vars; a .Vars.x that neither defines is warned about.
	Vars map[string]string
}

// Problem is one finding of Check.
type Problem struct {
	File    string
	Line    int // 0 when the finding has no line
	Message string
}

// String is "file:line: message", or "file: message" without a line.
func (p Problem) String() string {
	return (&Error{File: p.File, Line: p.Line, Message: p.Message}).Error()
}

// Report is what Check found, each list ordered by file and line.
type Report struct {
	// Errors fail the check: unknown file names, templates that do not
	// parse or fail to render, settings files that do not decode.
	Errors []Problem
	// Warnings are fields that would render "<no value>".
	Warnings []Problem
	// Notes name what was left out as not part of the layout: top-level
	// dot files, tests/, files that are neither templates nor settings
	// (README.md), settings-like files outside the layout's directories
	// (ci.toml).
	Notes []Problem
}

// OK reports whether the check found no errors.
func (r Report) OK() bool { return len(r.Errors) == 0 }

// Check examines a config repository the way conclave will load it
// (dir "" examines the built-in defaults): it parses every template and
// settings file, names files outside the layout, renders every prompt
// template against fixtures for every role that uses it, with person and
// agent authors, and warns about fields that do not exist or print
// "<no value>". It reads files but changes nothing.
func Check(dir string, opts CheckOptions) Report {
	clock := opts.Clock
	if clock == nil {
		clock = FixedClock
	}
	c := &checker{errors: map[string]Problem{}, warnings: map[string]Problem{}}
	fsys, display := builtinFS()
	if dir != "" {
		root, done, err := openRoot(dir)
		if err != nil {
			p := Problem{File: dir, Message: "cannot read: " + err.Error()}
			c.error(p.String(), p)
			return c.report()
		}
		defer done()
		fsys, display = root, displayIn(dir)
	}
	files, err := readRepo(fsys)
	if err != nil {
		p := Problem{File: dir, Message: "cannot read: " + err.Error()}
		c.error(p.String(), p)
		return c.report()
	}
	r := buildRepo(files, display, funcMap(clock))
	for _, p := range r.problems {
		c.error(p.Error(), Problem{File: p.File, Line: p.Line, Message: p.Message})
	}
	notes := leftOut(fsys, display)
	for _, name := range r.ignored {
		notes = append(notes, Problem{File: name, Message: "ignored: not part of the layout (a prompt's settings sit beside it, as <role>/<prompt>.toml)"})
	}
	byRole := map[string][]variant{}
	for _, role := range Roles() {
		byRole[role] = variants(fixturesFor(role, opts.Fixtures), opts.Vars)
	}
	c.vars = map[string]bool{}
	for k := range opts.Vars {
		c.vars[k] = true
	}
	for _, f := range opts.Fixtures {
		for k := range f.Data.Vars {
			c.vars[k] = true
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(r.prompts)) {
		pf := r.prompts[rel]
		if pf.err != nil {
			continue
		}
		var vs []variant
		for _, role := range rolesUsing(rel) {
			vs = append(vs, byRole[role]...)
		}
		c.prompt(pf, vs)
	}
	report := c.report()
	byText := map[string]Problem{}
	for _, n := range notes {
		byText[n.String()] = n
	}
	report.Notes = sortedProblems(byText)
	return report
}

// leftOut notes the top-level entries a load skips without a word: dot
// files, the tests/ folder, and files that are neither templates nor
// settings.
func leftOut(fsys fs.FS, display func(string) string) []Problem {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil // reported by the read
	}
	var out []Problem
	for _, e := range entries {
		name, ext := e.Name(), path.Ext(e.Name())
		switch {
		case strings.HasPrefix(name, "."):
			out = append(out, Problem{File: display(name), Message: "ignored: dot files are never read"})
		case name == dirTests && e.IsDir():
			out = append(out, Problem{File: display(name), Message: "ignored: prompt tests, not prompts"})
		case !e.IsDir() && ext != extTemplate && ext != extSettings:
			out = append(out, Problem{File: display(name), Message: "ignored: only .tmpl and .toml files are read"})
		}
	}
	return out
}

// rolesUsing lists the roles that may render the prompt file at rel: its
// role for <role>/<p>, every role with prompt p for all/<p> and
// agents/<ens>/<p> (an agent's role is not known from its directory).
func rolesUsing(rel string) []string {
	p := classify(rel)
	if Prompts(p.level) != nil {
		return []string{p.level}
	}
	return rolesWith(p.prompt)
}

// fixturesFor picks the given fixtures written for role, or for any role;
// with none, the role's built-in fixture.
func fixturesFor(role string, given []Fixture) []Fixture {
	var out []Fixture
	for _, f := range given {
		if f.Role == "" || f.Role == role {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		out = []Fixture{BuiltinFixtureFor(role)}
	}
	return out
}

type checker struct {
	errors   map[string]Problem
	warnings map[string]Problem
	vars     map[string]bool // the operator variables defined
}

// error records p once for key: the same error met with several variants
// is reported with the first.
func (c *checker) error(key string, p Problem) {
	if _, ok := c.errors[key]; !ok {
		c.errors[key] = p
	}
}

func (c *checker) warning(key string, p Problem) {
	if _, ok := c.warnings[key]; !ok {
		c.warnings[key] = p
	}
}

func (c *checker) report() Report {
	return Report{Errors: sortedProblems(c.errors), Warnings: sortedProblems(c.warnings)}
}

func sortedProblems(m map[string]Problem) []Problem {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Message, b.Message)
	})
	return out
}

// prompt checks one prompt template: statically, then by rendering every
// variant.
func (c *checker) prompt(pf *promptFile, vs []variant) {
	static := map[string][]string{} // file:line → expressions warned about
	analyze(pf.tmpl, c.vars, func(file string, line int, expr, msg string) {
		at := fmt.Sprintf("%s:%d", file, line)
		static[at] = append(static[at], expr)
		c.warning(at+": "+msg, Problem{File: file, Line: line, Message: msg})
	})
	for _, s := range pf.softened {
		at := fmt.Sprintf("%s:%d", s.file, s.line)
		static[at] = append(static[at], s.expr, s.replaced)
		c.warning(at+": "+s.msg, Problem{File: s.file, Line: s.line, Message: s.msg})
	}
	var label string
	hits := 0
	t, err := instrument(pf.tmpl, func(s printSite) {
		hits++
		for _, expr := range static[fmt.Sprintf("%s:%d", s.file, s.line)] {
			if strings.Contains(s.expr, expr) {
				return // said already
			}
		}
		c.warning(fmt.Sprintf("%s:%d: {{%s}}", s.file, s.line, s.expr), Problem{
			File: s.file, Line: s.line,
			Message: fmt.Sprintf("{{%s}} renders \"<no value>\" with %s", s.expr, label),
		})
	})
	if err != nil {
		p := Problem{File: pf.tmpl.Name(), Message: err.Error()}
		c.error(p.String(), p)
		return
	}
	for _, v := range vs {
		label = v.label
		before := hits
		out, err := execute(t, pf.size, &v.data)
		if err != nil {
			for _, e := range flatten(err) {
				c.error(e.Error(), Problem{File: e.File, Line: e.Line, Message: e.Message + " (with " + v.label + ")"})
			}
			continue
		}
		if hits == before && strings.Contains(out, noValue) {
			c.warning(pf.tmpl.Name()+": <no value>", Problem{File: pf.tmpl.Name(), Message: "renders \"<no value>\" with " + v.label})
		}
	}
}

// variant is fixture data with a description for messages.
type variant struct {
	label string
	data  Data
}

// variants renders each fixture as written, with person authors and with
// agent authors, so that a field only agents have is caught unguarded;
// vars are the configured variables, under the fixture's own.
func variants(fixtures []Fixture, vars map[string]string) []variant {
	var out []variant
	for _, f := range fixtures {
		if len(vars) > 0 {
			merged := maps.Clone(vars)
			maps.Copy(merged, f.Data.Vars)
			f.Data.Vars = merged
		}
		name := f.Name
		if name == "" {
			name = "a fixture"
		}
		person, agent := authors(f.Data.ChannelMembers)
		out = append(out,
			variant{label: name, data: f.Data},
			variant{label: name + ", person authors", data: withAuthor(f.Data, person)},
			variant{label: name + ", agent authors", data: withAuthor(f.Data, agent)},
		)
	}
	return out
}

// authors picks a person and an agent other than the agent itself from
// the members, making them up when the members have none.
func authors(members []Member) (person, agent Member) {
	person = Person("Alex Doe")
	agent = Agent(AgentInfo{
		Name:       "Sam",
		EnsDomain:  "sam.example.137.protocol6022.eth",
		Owner:      "0x0000000000000000000000000000000000000001",
		Addresses:  map[string]string{"evm": "0x0000000000000000000000000000000000000002"},
		Attributes: map[string]string{"role": "expert"},
	})
	foundPerson, foundAgent := false, false
	for i, m := range members {
		switch {
		case !m.IsAgent() && !foundPerson:
			person, foundPerson = m, true
		case m.IsAgent() && i > 0 && !foundAgent:
			agent, foundAgent = m, true
		}
	}
	return person, agent
}

func withAuthor(d Data, m Member) Data {
	d.InitialRequest.Author = m
	d.LatestRequest.Author = m
	d.LatestPersonRequest.Author = m
	d.Request.Author = m
	d.Messages = slices.Clone(d.Messages)
	for i := range d.Messages {
		d.Messages[i].Author = m
	}
	return d
}

// printSite is an action that prints a value.
type printSite struct {
	file string
	line int
	expr string
}

const checkFunc = "conclaveCheckValue"

// instrument returns a copy of t in which every printing action also
// reports, through found, a value that prints "<no value>". t is left as
// it was.
func instrument(t *template.Template, found func(printSite)) (*template.Template, error) {
	ns, err := t.Clone()
	if err != nil {
		return nil, err
	}
	var sites []printSite
	for _, d := range ns.Templates() {
		if d.Tree == nil {
			continue
		}
		tree := d.Tree.Copy()
		walkNodes(tree.Root, func(n parse.Node) {
			act, ok := n.(*parse.ActionNode)
			if !ok || len(act.Pipe.Decl) > 0 {
				return
			}
			file, line := nodeLine(tree, act)
			sites = append(sites, printSite{file: file, line: line, expr: act.Pipe.String()})
			idx := strconv.Itoa(len(sites) - 1)
			act.Pipe.Cmds = append(act.Pipe.Cmds, &parse.CommandNode{
				NodeType: parse.NodeCommand,
				Pos:      act.Pos,
				Args: []parse.Node{
					parse.NewIdentifier(checkFunc).SetTree(tree).SetPos(act.Pos),
					&parse.StringNode{NodeType: parse.NodeString, Pos: act.Pos, Quoted: strconv.Quote(idx), Text: idx},
				},
			})
		})
		if _, err := ns.AddParseTree(d.Name(), tree); err != nil {
			return nil, err
		}
	}
	ns.Funcs(template.FuncMap{checkFunc: func(idx string, v any) any {
		if s, ok := v.(string); v == nil || ok && strings.Contains(s, noValue) {
			i, _ := strconv.Atoi(idx)
			found(sites[i])
		}
		if v == nil {
			return noValue
		}
		return v
	}})
	return ns, nil
}
