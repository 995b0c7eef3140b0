package templates

import (
	"maps"
	"strings"
	"text/template/parse"
)

// foldAttributeNames lowercases the names read from an agent's
// attributes in a parsed template, as the attribute keys are (see
// attributes): .Attributes.Mission reads "mission". It follows the
// attributes through field chains (.LatestRequest.Author.Attributes.X,
// $m.Attributes.X, (index .ChannelMembers 0).Attributes.X), with and
// variables ({{with .Attributes}}{{.Mission}}{{end}}, {{$a :=
// .Attributes}}{{$a.Mission}}); not into a {{template}} call, whose dot it
// cannot know. Lowercasing again changes nothing, so trees shared between
// prompts may be folded more than once.
func foldAttributeNames(n parse.Node) {
	foldNode(n, foldScope{vars: map[string]bool{}})
}

// foldScope says whether the dot, and which variables, hold attributes.
type foldScope struct {
	dot  bool
	vars map[string]bool
}

func (sc foldScope) inner(dot bool) foldScope {
	return foldScope{dot: dot, vars: maps.Clone(sc.vars)}
}

func foldNode(n parse.Node, sc foldScope) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			foldNode(c, sc)
		}
	case *parse.ActionNode:
		foldPipe(n.Pipe, sc, true)
	case *parse.IfNode:
		inner := sc.inner(sc.dot)
		foldPipe(n.Pipe, inner, true)
		foldNode(n.List, inner)
		foldNode(n.ElseList, sc.inner(sc.dot))
	case *parse.WithNode:
		inner := sc.inner(sc.dot)
		inner.dot = foldPipe(n.Pipe, inner, true)
		foldNode(n.List, inner)
		foldNode(n.ElseList, sc.inner(sc.dot))
	case *parse.RangeNode:
		inner := sc.inner(false)
		foldPipe(n.Pipe, sc.inner(sc.dot), false)
		for _, v := range n.Pipe.Decl {
			inner.vars[v.Ident[0]] = false
		}
		foldNode(n.List, inner)
		foldNode(n.ElseList, sc.inner(sc.dot))
	case *parse.TemplateNode:
		foldPipe(n.Pipe, sc, false)
	}
}

// foldPipe folds a pipeline and reports whether its value is attributes;
// with declare, its variables take that value.
func foldPipe(p *parse.PipeNode, sc foldScope, declare bool) bool {
	if p == nil {
		return false
	}
	attrs := false
	for _, cmd := range p.Cmds {
		attrs = false
		for _, arg := range cmd.Args {
			attrs = foldArg(arg, sc)
		}
		if len(cmd.Args) != 1 {
			attrs = false // a function's result
		}
	}
	if declare {
		for _, v := range p.Decl {
			sc.vars[v.Ident[0]] = attrs
		}
	}
	return attrs
}

// foldArg folds one operand and reports whether its value is attributes.
func foldArg(n parse.Node, sc foldScope) bool {
	switch n := n.(type) {
	case *parse.DotNode:
		return sc.dot
	case *parse.FieldNode:
		return foldChain(n.Ident, sc.dot)
	case *parse.VariableNode:
		return foldChain(n.Ident[1:], sc.vars[n.Ident[0]])
	case *parse.ChainNode:
		return foldChain(n.Field, foldArg(n.Node, sc))
	case *parse.PipeNode:
		return foldPipe(n, sc, false)
	}
	return false
}

// foldChain lowercases each name read from attributes along a chain of
// field names, from a value that is attributes when attrs is set, and
// reports whether the chain ends on attributes.
func foldChain(idents []string, attrs bool) bool {
	for i, id := range idents {
		if attrs {
			idents[i] = strings.ToLower(id)
		}
		attrs = id == "Attributes"
	}
	return attrs
}
