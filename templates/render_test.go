package templates

import (
	"fmt"
	"strings"
	"testing"
)

// TestRenderCases renders the cases under testdata/render: each holds a
// config repository and a "render" section of lines
// "<agent> <role> <prompt> <authors>" (authors: fixture, person or agent),
// optionally a "fixture.json" replacing the built-in fixture. The golden
// file beside it holds each output or error.
func TestRenderCases(t *testing.T) {
	runCases(t, "testdata/render", func(t *testing.T, c testCase, goldenPath string) {
		dir := writeRepo(t, c.files)
		lib := open(t, dir)
		fx := BuiltinFixture()
		if body, ok := c.files["fixture.json"]; ok {
			var err error
			if fx, err = ParseFixture("fixture.json", []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		lines := strings.Split(strings.TrimSpace(c.files["render"]), "\n")
		if lines[0] == "" {
			t.Fatal("the case has no render section")
		}
		var out strings.Builder
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("render line %q: want <agent> <role> <prompt> <authors>", line)
			}
			got, err := lib.Current().Render(f[0], f[1], f[2], fixtureData(t, fx, f[3]))
			fmt.Fprintf(&out, "## %s\n", line)
			if err != nil {
				got = "error: " + strings.ReplaceAll(err.Error(), dir, "$DIR")
			}
			out.WriteString(got + "\n")
		}
		golden(t, goldenPath, out.String())
	})
}
