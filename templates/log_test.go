package templates

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadLogsIgnoredFilesOnce: a directory full of files outside the
// layout (such as a source tree) gives one summary line, while a broken
// template is still logged on its own.
func TestLoadLogsIgnoredFilesOnce(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"defaults/expert/system.tmpl": "x",
		"testdata/a/default.tmpl":     "x",
		"expert/default.tmpl":         "x",
		"expert/system.tmpl":          "{{if}}",
		"notes.md":                    "not a template",
	} {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), body)
	}
	_, logs := openLogged(t, dir)
	out := logs.String()
	if n := strings.Count(out, "files outside the layout are ignored"); n != 1 {
		t.Errorf("summary lines = %d, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "ignored=3") {
		t.Errorf("summary does not count 3 ignored files:\n%s", out)
	}
	if n := strings.Count(out, "templates: problem"); n != 1 || !strings.Contains(out, "expert/system.tmpl:1") {
		t.Errorf("want the broken template logged once with its line:\n%s", out)
	}
}
