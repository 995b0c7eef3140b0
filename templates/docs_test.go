package templates

import (
	"os"
	"strings"
	"testing"
)

// docBlock is a fenced code block of a Markdown file.
type docBlock struct {
	lang string
	body string
	line int
}

func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	var cur *docBlock
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &docBlock{lang: strings.TrimPrefix(line, "```"), line: i + 1}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed code block", path, cur.line)
	}
	return blocks
}

// TestDocExamples executes every example of docs/templates.md: each tmpl
// block is rendered against the built-in fixture and compared with the
// output block after it; toml blocks must be valid settings; the json block
// is the built-in fixture itself.
func TestDocExamples(t *testing.T) {
	const path = "../docs/templates.md"
	blocks := docBlocks(t, path)
	examples := 0
	for i, b := range blocks {
		switch b.lang {
		case "tmpl":
			if i+1 >= len(blocks) || blocks[i+1].lang != "output" {
				t.Errorf("%s:%d: a tmpl block must be followed by an output block", path, b.line)
				continue
			}
			examples++
			got := renderExample(t, b.body)
			if want := strings.TrimSpace(blocks[i+1].body); got != want {
				t.Errorf("%s:%d: the example renders\n%s\nbut the page says\n%s", path, b.line, got, want)
			}
		case "toml":
			if _, err := decodeSettings("doc.toml", []byte(b.body)); err != nil {
				t.Errorf("%s:%d: %v", path, b.line, err)
			}
		case "json":
			if strings.TrimSpace(b.body) != strings.TrimSpace(string(builtinFixture)) {
				t.Errorf("%s:%d: the fixture on the page is not templates/fixture.json", path, b.line)
			}
		}
	}
	if examples < 10 {
		t.Errorf("found %d examples; the page has more", examples)
	}
}

// docVars are the [templates.vars] the page's examples render with.
var docVars = map[string]string{"company": "Acme Insurance", "escalation": "claims-lead@acme.example"}

func renderExample(t *testing.T, src string) string {
	t.Helper()
	// As conclave loads a prompt: a repository of one file.
	const rel = "expert/system.tmpl"
	r := buildRepo(map[string]fileData{rel: {body: []byte(src)}}, func(string) string { return "example.tmpl" }, funcMap(FixedClock))
	pf := r.prompts[rel]
	if pf.err != nil {
		return "error: " + pf.err.Error()
	}
	d := BuiltinFixture().Data
	d.Vars = docVars // as the page says the configuration holds
	out, err := execute(pf.tmpl, len(src), &d)
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}
