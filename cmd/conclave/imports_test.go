package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/conclavehq/conclave"

// testSupport are the packages of test support that stand alone (a rule
// below checks that they import no conclave package), so that any
// package may import them, the leaves included: no rule bans them.
var testSupport = []string{"bot/fakeslack", "internal/testlog", "internal/testclock"}

// importRules are the rules for imports of docs/architecture.md: imports
// go down the flow only. Each names the packages it covers (a path and
// everything under it, relative to the module) and the conclave packages
// they must not import (test support aside).
var importRules = []struct {
	from   []string
	banned []string
	why    string
}{
	{[]string{"memory"}, []string{"agents", "bot", "templates", "ens", "cmd"},
		"memory satisfies the ports agents declares and knows nothing of the packages above it"},
	{[]string{"agents"}, []string{"bot", "cmd"},
		"agents is the domain; the transports call it, never the other way"},
	{[]string{"agents/pairing"}, []string{"agents", "bot", "cmd"},
		"pairing, wallet links and admins are rules of their own: they do not depend on the engine"},
	{[]string{"templates", "ens"}, []string{"agents", "bot", "cmd", "memory"},
		"templates and ens sit below agents in the flow"},
	{[]string{"bot"}, []string{"cmd", "memory"},
		"a transport talks to the engine, not to what cmd/conclave wires under it"},
	{[]string{"cmd/internal/prompttest"}, []string{"cmd/conclave"},
		"prompt tests drive the engine through the terminal transport; cmd/conclave wires them"},
	{testSupport, []string{""},
		"test support stands alone: any package may import it"},
	{[]string{"internal"}, []string{""},
		"the helpers with no domain stand alone: the transports and the store use them as the engine does"},
	{[]string{"agents/conversation"}, []string{""},
		"a conversation's rules are data: no store, no Slack, no identities, no model, no templates; the engine gathers what they need"},
	{[]string{"agents/turn"}, []string{"memory", "bot", "cmd"},
		"a turn takes its input as values and returns its result: the engine converts the store's types at its edge"},
}

// onlyRules are the packages that may import, of the module, only the
// packages listed (and everything under them; test support and the
// module's internal/ helpers aside).
var onlyRules = []struct {
	from    []string
	allowed []string
	why     string
}{
	{[]string{"agents/turn"}, []string{"agents/llm", "agents/conversation", "templates", "ens"},
		"a turn uses the model client, the prompts, identities and the conversation's values (kinds, participants, notes); nothing else of the engine"},
}

// stdRules are the packages of the standard library a package must not
// import (test files aside), by the same coverage as importRules.
var stdRules = []struct {
	from   []string
	banned []string
	why    string
}{
	{[]string{"agents/conversation"}, []string{"context", "net", "net/http", "os", "log/slog"},
		"a conversation's rules do no I/O and wait for nothing: they take no context"},
}

// TestMemoryImportsNothingOfAgents checks, with no exemption (test support
// included), that the store and its test helpers import nothing of agents:
// a lower layer never reaches up, not even for a clock.
func TestMemoryImportsNothingOfAgents(t *testing.T) {
	checked := 0
	for _, p := range listPackages(t) {
		if !under(p.rel, "memory") {
			continue
		}
		checked++
		for _, imp := range p.imports {
			if under(imp, "agents") {
				t.Errorf("%s/%s imports %s/%s: memory imports nothing of agents (docs/architecture.md, Rules for imports)", module, p.rel, module, imp)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package of memory was checked")
	}
}

// under tells whether rel (module-relative) is dir or inside it; "" is
// the whole module.
func under(rel, dir string) bool {
	return dir == "" || rel == dir || strings.HasPrefix(rel, dir+"/")
}

// conclavePackage is one package of the module as go list describes it.
type conclavePackage struct {
	rel     string // path relative to the module ("" for the root)
	dir     string
	imports []string // the module's packages it imports
	std     []string // the other packages it imports
	goFiles []string // non-test files
}

func listPackages(t *testing.T) []conclavePackage {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("the go tool is needed to list the packages: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .Imports \" \"}}\t{{join .GoFiles \" \"}}", module+"/...") // #nosec G204 -- the go tool, fixed arguments
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []conclavePackage
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		p := conclavePackage{rel: strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/"), dir: f[1], goFiles: strings.Fields(f[3])}
		for _, imp := range strings.Fields(f[2]) {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				p.imports = append(p.imports, strings.TrimPrefix(strings.TrimPrefix(imp, module), "/"))
			} else {
				p.std = append(p.std, imp)
			}
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d packages of %s; expected the whole module", len(pkgs), module)
	}
	return pkgs
}

// TestImportsGoDownTheFlow checks the rules for imports of
// docs/architecture.md against what the packages import (test files
// aside).
func TestImportsGoDownTheFlow(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, rule := range importRules {
			if !coveredBy(p.rel, rule.from) {
				continue
			}
			for _, imp := range p.imports {
				if coveredBy(imp, testSupport) {
					continue
				}
				for _, b := range rule.banned {
					if under(imp, b) && !under(imp, p.rel) {
						t.Errorf("%s/%s imports %s/%s: %s (docs/architecture.md, Rules for imports)", module, p.rel, module, imp, rule.why)
					}
				}
			}
		}
	}
}

// TestTurnImportsOnlyWhatItUses checks onlyRules.
func TestTurnImportsOnlyWhatItUses(t *testing.T) {
	checked := 0
	for _, p := range listPackages(t) {
		for _, rule := range onlyRules {
			if !coveredBy(p.rel, rule.from) {
				continue
			}
			checked++
			for _, imp := range p.imports {
				if coveredBy(imp, testSupport) || under(imp, "internal") || under(imp, p.rel) || coveredBy(imp, rule.allowed) {
					continue
				}
				t.Errorf("%s/%s imports %s/%s: %s (docs/architecture.md, Rules for imports)", module, p.rel, module, imp, rule.why)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package of onlyRules was found")
	}
}

// TestConversationTakesNoContext checks stdRules: the packages of pure
// rules import nothing that does I/O or waits.
func TestConversationTakesNoContext(t *testing.T) {
	checked := 0
	for _, p := range listPackages(t) {
		for _, rule := range stdRules {
			if !coveredBy(p.rel, rule.from) {
				continue
			}
			checked++
			for _, imp := range p.std {
				if slices.Contains(rule.banned, imp) {
					t.Errorf("%s/%s imports %s: %s (docs/architecture.md, Rules for imports)", module, p.rel, imp, rule.why)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package of the rules was found")
	}
}

func coveredBy(rel string, dirs []string) bool {
	for _, d := range dirs {
		if under(rel, d) {
			return true
		}
	}
	return false
}

// TestAgentsNeverNameTheStore checks that no non-test file of agents names
// memory.Store: the engine uses the small ports it declares.
func TestAgentsNeverNameTheStore(t *testing.T) {
	checked := 0
	for _, p := range listPackages(t) {
		if !under(p.rel, "agents") {
			continue
		}
		for _, name := range p.goFiles {
			path := filepath.Join(p.dir, name)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			for _, pos := range namesOf(f, module+"/memory", "Store") {
				t.Errorf("%s: names memory.Store; declare the small port the code needs in agents (docs/architecture.md, Rules for imports)", fset.Position(pos))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no file of agents was checked")
	}
}

// namesOf returns where file f names the identifier sel of the package
// imported from path.
func namesOf(f *ast.File, path, sel string) []token.Pos {
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			local = filepath.Base(path)
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" || local == "_" {
		return nil
	}
	var at []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok && id.Name == local && s.Sel.Name == sel {
				at = append(at, s.Pos())
			}
		}
		return true
	})
	return at
}
