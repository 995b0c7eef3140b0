package agents

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

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

// No type of agents, agents/conversation or agents/turn has more than 30
// methods: one that grows past it has more than one job (SPEC §13.5).
func TestNoTypeOverThirtyMethods(t *testing.T) {
	_, parsed := parseSources(t, ".")
	_, conv := parseSources(t, "conversation")
	_, turns := parseSources(t, "turn")
	files := slices.Concat(slices.Collect(maps.Values(parsed)), slices.Collect(maps.Values(conv)), slices.Collect(maps.Values(turns)))
	count := map[string]int{}
	for _, f := range files {
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
	if count["convo"] == 0 || count["Machine"] == 0 || count["Runner"] == 0 {
		t.Fatal("no method counted")
	}
	for typ, n := range count {
		if n > 30 {
			t.Errorf("%s has %d methods, more than 30", typ, n)
		}
	}
}

// parseSources parses the source files of the package in dir, its tests
// left out, by file name.
func parseSources(t *testing.T, dir string) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
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
		parsed[filepath.Base(name)] = f
	}
	return fset, parsed
}
