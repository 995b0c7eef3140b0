package templates

import (
	"fmt"
	"maps"
	"strings"
	"text/template"
	"text/template/parse"
)

// A static pass over a prompt's parse tree finds fields that do not exist
// in the template data, even in branches no fixture reaches. It follows
// the dot through with, range and {{template}} calls, and variables
// through their declarations.

// shape is what a template expression holds, as far as the pass knows.
type shape int

const (
	shapeAny      shape = iota // unknown: not checked
	shapeData                  // the root
	shapeRequest               // InitialRequest, LatestRequest, LatestPersonRequest, Request
	shapeMember                // a member
	shapeMembers               // ChannelMembers
	shapeStrings               // KnownSessions
	shapeMap                   // Addresses, Attributes: any key may be missing
	shapeScalar                // a string, number or boolean
	shapeNil                   // no data: {{template "x"}} without a value
	shapeMessages              // Messages
	shapeMessage               // a message
	shapeVars                  // Vars: a key no configuration defines is warned about
)

func fieldsOf(s shape) map[string]shape {
	switch s {
	case shapeData:
		return map[string]shape{
			"ConversationId":           shapeScalar,
			"ChannelDescription":       shapeScalar,
			"ChannelMembers":           shapeMembers,
			"ConversationMessageCount": shapeScalar,
			"MemorySessionId":          shapeScalar,
			"InitialRequest":           shapeRequest,
			"LatestRequest":            shapeRequest,
			"LatestPersonRequest":      shapeRequest,
			"Request":                  shapeRequest,
			"ConcludeReason":           shapeScalar,
			"KnownSessions":            shapeStrings,
			"CloneOf":                  shapeMember,
			"Messages":                 shapeMessages,
			"ExchangeMessageCount":     shapeScalar,
			"Vars":                     shapeVars,
		}
	case shapeMessage:
		return map[string]shape{"Author": shapeMember, "Content": shapeScalar, "Time": shapeAny, "InExchange": shapeScalar}
	case shapeRequest:
		return map[string]shape{"Content": shapeScalar, "Author": shapeMember}
	case shapeMember:
		return map[string]shape{
			"Name":          shapeScalar,
			"IsAgent":       shapeScalar,
			"EnsDomain":     shapeScalar,
			"Owner":         shapeScalar,
			"Addresses":     shapeMap,
			"Attributes":    shapeMap,
			"SessionFormat": shapeScalar,
			"StandsFor":     shapeScalar,
			"String":        shapeScalar,
		}
	}
	return nil
}

// fieldHint suggests the right field for a common mistake.
func fieldHint(base shape, field string) string {
	memberFields := fieldsOf(shapeMember)
	switch {
	case base == shapeData && memberFields[field] != shapeAny:
		return fmt.Sprintf("; the agent itself is the first member: (index .ChannelMembers 0).%s", field)
	case base == shapeData && field == "ContextKeys":
		return "; an expert's keys are .KnownSessions"
	case base == shapeData && field == "ContextKey":
		return "; the bound key is .MemorySessionId"
	case base == shapeMember && field == "WalletAddress":
		return "; the wallet is .Addresses.evm"
	case base == shapeMember && (field == "Role" || field == "Mission" || field == "Expertise"):
		return fmt.Sprintf("; attributes are under .Attributes, keys in any case (for example .Attributes.%s)", strings.ToLower(field))
	}
	for name := range fieldsOf(base) {
		if strings.EqualFold(name, field) {
			return fmt.Sprintf("; did you mean .%s?", name)
		}
	}
	return ""
}

type analyzer struct {
	ns   *template.Template
	seen map[string]bool // template name and dot shape, analysed
	warn func(file string, line int, expr, msg string)
	// read, when set, is told of each chain of field reads: whether it
	// goes through a value that has no fields (and why), or not as far as
	// the pass knows.
	read func(tree *parse.Tree, n parse.Node, throughValue bool, msg string)
	// vars, when set, are the operator variables defined: reading any
	// other of .Vars is warned about.
	vars map[string]bool
}

type scope struct {
	dot  shape
	vars map[string]shape
}

func (sc scope) with(dot shape) scope {
	return scope{dot: dot, vars: maps.Clone(sc.vars)}
}

// analyze checks t, whose dot is the template data; vars are the
// operator variables defined (nil: not checked).
func analyze(t *template.Template, vars map[string]bool, warn func(file string, line int, expr, msg string)) {
	a := &analyzer{ns: t, seen: map[string]bool{}, warn: warn, vars: vars}
	a.template(t, shapeData)
}

func (a *analyzer) template(t *template.Template, dot shape) {
	key := fmt.Sprintf("%s\x00%d", t.Name(), dot)
	if a.seen[key] || t.Tree == nil {
		return
	}
	a.seen[key] = true
	a.list(t.Tree, t.Tree.Root, scope{dot: dot, vars: map[string]shape{"$": dot}})
}

func (a *analyzer) list(tree *parse.Tree, l *parse.ListNode, sc scope) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		a.node(tree, n, sc)
	}
}

func (a *analyzer) node(tree *parse.Tree, n parse.Node, sc scope) {
	switch n := n.(type) {
	case *parse.ActionNode:
		a.pipe(tree, n.Pipe, sc, true)
	case *parse.IfNode:
		inner := sc.with(sc.dot)
		a.pipe(tree, n.Pipe, inner, true)
		a.list(tree, n.List, inner)
		a.list(tree, n.ElseList, sc.with(sc.dot))
	case *parse.WithNode:
		inner := sc.with(sc.dot)
		inner.dot = a.pipe(tree, n.Pipe, inner, true)
		a.list(tree, n.List, inner)
		a.list(tree, n.ElseList, sc.with(sc.dot))
	case *parse.RangeNode:
		inner := sc.with(sc.dot)
		over := a.pipe(tree, n.Pipe, inner, false)
		elem, key := shapeAny, shapeAny
		switch over {
		case shapeMembers:
			elem, key = shapeMember, shapeScalar
		case shapeMessages:
			elem, key = shapeMessage, shapeScalar
		case shapeStrings:
			elem, key = shapeScalar, shapeScalar
		case shapeMap, shapeVars:
			key = shapeScalar
		}
		switch len(n.Pipe.Decl) {
		case 1:
			inner.vars[n.Pipe.Decl[0].Ident[0]] = elem
		case 2:
			inner.vars[n.Pipe.Decl[0].Ident[0]] = key
			inner.vars[n.Pipe.Decl[1].Ident[0]] = elem
		}
		inner.dot = elem
		a.list(tree, n.List, inner)
		a.list(tree, n.ElseList, sc.with(sc.dot))
	case *parse.TemplateNode:
		dot := shapeNil
		if n.Pipe != nil {
			dot = a.pipe(tree, n.Pipe, sc, true)
		}
		if called := a.ns.Lookup(n.Name); called != nil {
			a.template(called, dot)
		}
	}
}

// pipe returns the shape of a pipeline's value; declare says whether its
// variable declarations take that shape (range declares its own way).
func (a *analyzer) pipe(tree *parse.Tree, p *parse.PipeNode, sc scope, declare bool) shape {
	if p == nil {
		return sc.dot
	}
	s := shapeAny
	for _, cmd := range p.Cmds {
		s = a.command(tree, cmd, sc)
	}
	if declare {
		for _, v := range p.Decl {
			sc.vars[v.Ident[0]] = s
		}
	}
	return s
}

func (a *analyzer) command(tree *parse.Tree, cmd *parse.CommandNode, sc scope) shape {
	if len(cmd.Args) == 0 {
		return shapeAny
	}
	shapes := make([]shape, len(cmd.Args))
	for i, arg := range cmd.Args {
		shapes[i] = a.arg(tree, arg, sc)
	}
	fn, ok := cmd.Args[0].(*parse.IdentifierNode)
	if !ok {
		return shapes[0]
	}
	// One element of a list: index with one position, first and last.
	one := fn.Ident == "index" && len(cmd.Args) == 3 || (fn.Ident == "first" || fn.Ident == "last") && len(cmd.Args) == 2
	if one && len(shapes) > 1 {
		switch shapes[1] {
		case shapeMembers:
			return shapeMember
		case shapeMessages:
			return shapeMessage
		}
	}
	return shapeAny
}

func (a *analyzer) arg(tree *parse.Tree, n parse.Node, sc scope) shape {
	switch n := n.(type) {
	case *parse.DotNode:
		return sc.dot
	case *parse.FieldNode:
		return a.fields(tree, n, sc.dot, n.Ident)
	case *parse.VariableNode:
		base, ok := sc.vars[n.Ident[0]]
		if !ok {
			base = shapeAny
		}
		return a.fields(tree, n, base, n.Ident[1:])
	case *parse.ChainNode:
		return a.fields(tree, n, a.arg(tree, n.Node, sc), n.Field)
	case *parse.PipeNode:
		return a.pipe(tree, n, sc, false)
	case *parse.StringNode, *parse.NumberNode, *parse.BoolNode:
		return shapeScalar
	}
	return shapeAny
}

// fields follows a chain of field names from base, warning at the first
// that cannot be read.
func (a *analyzer) fields(tree *parse.Tree, n parse.Node, base shape, idents []string) shape {
	s := base
	through := false
	if a.read != nil && len(idents) > 0 {
		defer func() {
			if !through {
				a.read(tree, n, false, "")
			}
		}()
	}
	for _, id := range idents {
		switch s {
		case shapeAny:
			return shapeAny
		case shapeMap:
			s = shapeScalar // an address or attribute value
			continue
		case shapeVars:
			if a.vars != nil && !a.vars[id] {
				a.warnAt(tree, n, fmt.Sprintf("%s: no configuration defines the variable %s ([templates.vars] or a fixture's Vars), so it renders \"<no value>\"", n, id))
			}
			s = shapeScalar
			continue
		case shapeNil:
			a.warnAt(tree, n, fmt.Sprintf("%s reads no data (the {{template}} call passes none, add a dot: {{template \"name\" .}}) and renders \"<no value>\"", n))
			return shapeAny
		case shapeScalar, shapeMembers, shapeStrings, shapeMessages:
			msg := fmt.Sprintf("%s: field %s cannot be read from a %s and renders \"<no value>\"", n, id, map[shape]string{shapeScalar: "text, number or boolean", shapeMembers: "list (use range or index)", shapeStrings: "list (use range or index)", shapeMessages: "list (use range or index)"}[s])
			a.warnAt(tree, n, msg)
			if a.read != nil {
				through = true
				a.read(tree, n, true, msg)
			}
			return shapeAny
		}
		next, ok := fieldsOf(s)[id]
		if !ok {
			a.warnAt(tree, n, fmt.Sprintf("%s: field %s does not exist and renders \"<no value>\"%s", n, id, fieldHint(s, id)))
			return shapeAny
		}
		s = next
	}
	return s
}

func (a *analyzer) warnAt(tree *parse.Tree, n parse.Node, msg string) {
	if a.warn == nil {
		return
	}
	file, line := nodeLine(tree, n)
	a.warn(file, line, n.String(), msg)
}
