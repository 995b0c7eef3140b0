package templates

import (
	"text/template/parse"
)

// A field read through a value that has no fields — .ConversationId.x, a
// field of a list such as .ChannelMembers.Name, or of an attribute value —
// is an error in text/template, where a missing key is "<no value>". The
// template contract makes both "<no value>". softenReads finds such reads
// with the static pass of analyze.go and replaces each by an expression
// that gives no value, so that the render goes on as for a missing key.
//
// A partial's tree is shared by every prompt of a repository, and one
// partial may be called with different dots: a read is replaced only when
// every prompt that reaches it reads it through such a value.

// softRead is a replaced read, for check's warnings.
type softRead struct {
	file, expr, msg string
	line            int
}

// softenReads replaces, in every prompt of r, the field reads that can
// only go through a text, number, boolean or list.
func softenReads(r *repo) {
	bad, good := map[parse.Node]bool{}, map[parse.Node]bool{}
	warned := map[parse.Node]softRead{}
	for _, pf := range r.prompts {
		if pf.tmpl == nil {
			continue
		}
		a := &analyzer{ns: pf.tmpl, seen: map[string]bool{}}
		a.read = func(tree *parse.Tree, n parse.Node, throughValue bool, msg string) {
			if !throughValue {
				good[n] = true
				return
			}
			bad[n] = true
			file, line := nodeLine(tree, n)
			warned[n] = softRead{file: file, line: line, expr: n.String(), msg: msg}
		}
		a.template(pf.tmpl, shapeData)
	}
	soft := func(n parse.Node) bool { return bad[n] && !good[n] }
	for _, pf := range r.prompts {
		if pf.tmpl == nil {
			continue
		}
		for _, d := range pf.tmpl.Templates() {
			if d.Tree == nil {
				continue
			}
			for _, n := range replaceReads(d.Tree, d.Tree.Root, soft) {
				pf.softened = append(pf.softened, warned[n])
			}
		}
	}
}

// noValueExpr is what a replaced read becomes: (index nil), which gives
// no value.
func noValueExpr(tree *parse.Tree, pos parse.Pos) *parse.PipeNode {
	return &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{{
		NodeType: parse.NodeCommand, Pos: pos,
		Args: []parse.Node{
			parse.NewIdentifier("index").SetTree(tree).SetPos(pos),
			&parse.NilNode{NodeType: parse.NodeNil, Pos: pos},
		},
	}}}
}

// replaceReads replaces the reads soft selects below n, and returns them.
func replaceReads(tree *parse.Tree, n parse.Node, soft func(parse.Node) bool) []parse.Node {
	var replaced []parse.Node
	var pipe func(p *parse.PipeNode)
	var arg func(n parse.Node) parse.Node
	arg = func(n parse.Node) parse.Node {
		if soft(n) {
			replaced = append(replaced, n)
			return noValueExpr(tree, n.Position())
		}
		switch n := n.(type) {
		case *parse.ChainNode:
			n.Node = arg(n.Node)
		case *parse.PipeNode:
			pipe(n)
		}
		return n
	}
	pipe = func(p *parse.PipeNode) {
		if p == nil {
			return
		}
		for _, cmd := range p.Cmds {
			for i, a := range cmd.Args {
				cmd.Args[i] = arg(a)
			}
		}
	}
	walkNodes(n, func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ActionNode:
			pipe(n.Pipe)
		case *parse.IfNode:
			pipe(n.Pipe)
		case *parse.WithNode:
			pipe(n.Pipe)
		case *parse.RangeNode:
			pipe(n.Pipe)
		case *parse.TemplateNode:
			pipe(n.Pipe)
		}
	})
	return replaced
}
