package templates

import (
	"strconv"
	"text/template/parse"
)

// A field read through a value that has no fields — .ConversationId.x, a
// field of a list such as .ChannelMembers.Name, or of an attribute value —
// is an error in text/template, where a missing key is "<no value>". The
// template contract makes both "<no value>". softenReads finds such reads
// with the static pass of analyze.go and turns each into the same read
// through index (.A.B becomes (index . "A" "B")), which reads map keys as
// a field read does, fails on a person's agent-only fields as a field read
// does, and gives no value where a field read would fail.
//
// A partial's tree is shared by every prompt of a repository, and one
// partial may be called with different dots: a read that goes through
// such a value in one of them is turned into index for all, which reads
// the others as before.

// softRead is a replaced read, for check's warnings: the read as written
// and as replaced.
type softRead struct {
	file, expr, replaced, msg string
	line                      int
}

// softenReads replaces, in every prompt of r, the field reads that can
// only go through a text, number, boolean or list.
func softenReads(r *repo) {
	warned := map[parse.Node]softRead{}
	for _, pf := range r.prompts {
		if pf.tmpl == nil {
			continue
		}
		a := &analyzer{ns: pf.tmpl, seen: map[string]bool{}}
		a.read = func(tree *parse.Tree, n parse.Node, throughValue bool, msg string) {
			if !throughValue {
				return
			}
			file, line := nodeLine(tree, n)
			warned[n] = softRead{file: file, line: line, expr: n.String(), msg: msg}
		}
		a.template(pf.tmpl, shapeData)
	}
	soft := func(n parse.Node) bool { _, ok := warned[n]; return ok }
	for _, pf := range r.prompts {
		if pf.tmpl == nil {
			continue
		}
		for _, d := range pf.tmpl.Templates() {
			if d.Tree == nil {
				continue
			}
			for _, rep := range replaceReads(d.Tree, d.Tree.Root, soft) {
				w := warned[rep.read]
				w.replaced = rep.with.String()
				pf.softened = append(pf.softened, w)
			}
		}
	}
}

// indexRead is the read n (a field, variable or chain node) through
// index: its receiver, then its field names as string keys.
func indexRead(tree *parse.Tree, n parse.Node) parse.Node {
	pos := n.Position()
	var recv parse.Node
	var names []string
	switch n := n.(type) {
	case *parse.FieldNode:
		recv, names = &parse.DotNode{NodeType: parse.NodeDot, Pos: pos}, n.Ident
	case *parse.VariableNode:
		recv = &parse.VariableNode{NodeType: parse.NodeVariable, Pos: pos, Ident: n.Ident[:1]}
		names = n.Ident[1:]
	case *parse.ChainNode:
		recv, names = n.Node, n.Field
	default:
		return n
	}
	args := []parse.Node{parse.NewIdentifier("index").SetTree(tree).SetPos(pos), recv}
	for _, name := range names {
		args = append(args, &parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: strconv.Quote(name), Text: name})
	}
	return &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{{NodeType: parse.NodeCommand, Pos: pos, Args: args}}}
}

// replacement is a read replaced by its index form.
type replacement struct{ read, with parse.Node }

// replaceReads replaces the reads soft selects below n by their index
// form, and returns what it replaced.
func replaceReads(tree *parse.Tree, n parse.Node, soft func(parse.Node) bool) []replacement {
	var replaced []replacement
	var pipe func(p *parse.PipeNode)
	var arg func(n parse.Node) parse.Node
	arg = func(n parse.Node) parse.Node {
		if soft(n) {
			if c, ok := n.(*parse.ChainNode); ok {
				c.Node = arg(c.Node)
			}
			with := indexRead(tree, n)
			replaced = append(replaced, replacement{read: n, with: with})
			return with
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
