package templates

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckCases runs Check on the repositories under testdata/check (a
// "fixture.json" section is passed as the fixture) and compares the
// report with the golden file beside each.
func TestCheckCases(t *testing.T) {
	runCases(t, "testdata/check", func(t *testing.T, c testCase, goldenPath string) {
		dir := t.TempDir()
		var opts CheckOptions
		for _, file := range c.order {
			if file == "fixture.json" {
				f, err := ParseFixture("fixture.json", []byte(c.files[file]))
				if err != nil {
					t.Fatal(err)
				}
				opts.Fixtures = append(opts.Fixtures, f)
				continue
			}
			writeFile(t, filepath.Join(dir, filepath.FromSlash(file)), c.files[file])
		}
		r := Check(dir, opts)
		golden(t, goldenPath, reportText(r, dir))
		if r.OK() != (len(r.Errors) == 0) {
			t.Error("OK() disagrees with Errors")
		}
	})
}

func reportText(r Report, dir string) string {
	var b strings.Builder
	for _, p := range r.Errors {
		b.WriteString("error: " + p.String() + "\n")
	}
	for _, p := range r.Warnings {
		b.WriteString("warning: " + p.String() + "\n")
	}
	for _, p := range r.Notes {
		b.WriteString("note: " + p.String() + "\n")
	}
	if b.Len() == 0 {
		return "clean\n"
	}
	return strings.ReplaceAll(b.String(), dir, "$DIR")
}

func TestCheckExamplesAreClean(t *testing.T) {
	fx, err := LoadFixture("testdata/examples-fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]CheckOptions{
		"built-in fixture": {},
		"example fixture":  {Fixtures: []Fixture{fx}},
	} {
		t.Run(name, func(t *testing.T) {
			r := Check("testdata/examples", opts)
			// The examples ship their prompt tests in tests/, which the
			// check notes and skips; anything more is not clean.
			want := "note: $DIR/tests: ignored: prompt tests, not prompts\n"
			if text := reportText(r, "testdata/examples"); text != want {
				t.Errorf("report:\n%s\nwant:\n%s", text, want)
			}
		})
	}
}

func TestCheckMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	r := Check(dir, CheckOptions{})
	if r.OK() || len(r.Errors) != 1 || !strings.Contains(r.Errors[0].String(), dir+": cannot read:") {
		t.Errorf("report: %+v", r)
	}
}

// TestExamplesGolden shows what the example repository renders, for the
// agent it overrides and for another, with both fixtures.
func TestExamplesGolden(t *testing.T) {
	lib := open(t, "testdata/examples")
	example, err := LoadFixture("testdata/examples-fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, fx := range []Fixture{BuiltinFixture(), example} {
		for _, agent := range []string{testAgent, "marc.acme.137.protocol6022.eth"} {
			for _, role := range Roles() {
				for _, prompt := range Prompts(role) {
					got, err := lib.Current().Render(agent, role, prompt, fx.Data)
					if err != nil {
						t.Fatalf("%s %s/%s: %v", agent, role, prompt, err)
					}
					fmt.Fprintf(&out, "## %s, %s %s/%s\n%s\n", fx.Name, agent, role, prompt, got)
				}
			}
		}
	}
	golden(t, "testdata/examples.golden", out.String())
}
