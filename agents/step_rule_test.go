package agents

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Only the step feeds the machine: its methods are called from
// conversation.go and machine.go alone (SPEC §13.5). A turn, the outbox,
// the view and the rest get what they need from the step.
func TestMachineCalledFromTheStepOnly(t *testing.T) {
	fset, parsed := parseSources(t)
	methods := map[string]bool{}
	for _, f := range parsed {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "machine" {
					methods[fd.Name.Name] = true
				}
			}
		}
	}
	if len(methods) == 0 {
		t.Fatal("no method of machine found")
	}
	for name, f := range parsed {
		if name == "machine.go" || name == "conversation.go" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !methods[sel.Sel.Name] {
				return true
			}
			if recv, ok := sel.X.(*ast.SelectorExpr); ok && recv.Sel.Name == "m" {
				t.Errorf("%s: calls machine.%s; only the step (conversation.go) feeds the machine", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

// The outbox calls nothing back: it holds no function, so it cannot
// reach into the conversation that owns it (SPEC §13.5).
func TestOutboxHoldsNoFunction(t *testing.T) {
	typ := reflect.TypeFor[outbox]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Type.Kind() == reflect.Func {
			t.Errorf("outbox.%s is a function (%s)", f.Name, f.Type)
		}
	}
}

// No type of agents has more than 30 methods: one that grows past it has
// more than one job (SPEC §13.5).
func TestNoTypeOverThirtyMethods(t *testing.T) {
	_, parsed := parseSources(t)
	count := map[string]int{}
	for _, f := range parsed {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			typ := fd.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				count[id.Name]++
			}
		}
	}
	if count["machine"] == 0 {
		t.Fatal("no method counted")
	}
	for typ, n := range count {
		if n > 30 {
			t.Errorf("%s has %d methods, more than 30", typ, n)
		}
	}
}

// parseSources parses the package's source files, its tests left out, by
// file name.
func parseSources(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
	}
	return fset, parsed
}
