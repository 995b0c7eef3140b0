package templates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretMarker stands for what a file outside the repository holds (the
// environment of /proc/self/environ): it must never reach a prompt.
const secretMarker = "SLACK_BOT_TOKEN=xoxb-marker-never-in-a-prompt"

// outsideFile writes a file holding secretMarker outside any repository.
func outsideFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "environ")
	writeFile(t, path, secretMarker)
	return path
}

// TestLinkOutOfTheRepositoryIsRefused: a template linked to a file
// outside the repository fails its prompt naming the link, and its
// content is never rendered; the other prompts keep working.
func TestLinkOutOfTheRepositoryIsRefused(t *testing.T) {
	dir := writeRepo(t, map[string]string{"clone/system.tmpl": "clone."})
	writeFile(t, filepath.Join(dir, "expert", "keep"), "")
	symlink(t, outsideFile(t), filepath.Join(dir, "expert", "system.tmpl"))
	lib, logs := openLogged(t, dir)
	set := lib.Current()
	got, err := set.Render(testAgent, RoleExpert, PromptSystem, BuiltinFixture().Data)
	if err == nil || strings.Contains(got, "marker") {
		t.Fatalf("render = %q, %v; want an error and no content", got, err)
	}
	te, ok := err.(*Error)
	if !ok || te.RepoFile() != "expert/system.tmpl" || !strings.Contains(err.Error(), "symbolic link out of the config repository") {
		t.Errorf("error %v (%T), want a *Error naming expert/system.tmpl as a link out", err, err)
	}
	if strings.Contains(err.Error(), "marker") || strings.Contains(logs.String(), "marker") {
		t.Errorf("the target's content shows: %v / %s", err, logs)
	}
	if got, err := set.Render(testAgent, RoleClone, PromptSystem, BuiltinFixture().Data); err != nil || got != "clone." {
		t.Errorf("another prompt: %q, %v", got, err)
	}
}

// TestLinkInsideTheRepositoryIsFollowed: a link that stays inside is
// read as its target.
func TestLinkInsideTheRepositoryIsFollowed(t *testing.T) {
	dir := writeRepo(t, map[string]string{"all/system.tmpl": "shared inside."})
	if err := os.MkdirAll(filepath.Join(dir, "expert"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "../all/system.tmpl", filepath.Join(dir, "expert", "system.tmpl"))
	if got := renderSystem(t, open(t, dir).Current()); got != "shared inside." {
		t.Errorf("render = %q", got)
	}
}

// TestReloadKeepsTheLastGoodSetOnALinkOut: a link out that appears after
// a good load is a WARN and an Err; the prompts stay as they were.
func TestReloadKeepsTheLastGoodSetOnALinkOut(t *testing.T) {
	dir := writeRepo(t, map[string]string{"expert/system.tmpl": "good."})
	lib, logs := openLogged(t, dir)
	swapLink(t, outsideFile(t), filepath.Join(dir, "expert", "system.tmpl"))
	lib.poll()
	lib.poll()
	if err := lib.Reload(); err == nil || !strings.Contains(err.Error(), "system.tmpl") {
		t.Errorf("Reload = %v, want an error naming the file", err)
	}
	if got := renderSystem(t, lib.Current()); got != "good." {
		t.Errorf("after the link out renders %q, want the last good set", got)
	}
	if lib.Err() == nil {
		t.Error("Err = nil after a link out")
	}
	if warnings(logs) != 1 || strings.Contains(logs.String(), "marker") {
		t.Errorf("want one WARN without the content, logs:\n%s", logs)
	}
	if err := os.Remove(filepath.Join(dir, "expert", "system.tmpl")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "expert", "system.tmpl"), "fixed.")
	lib.poll()
	if got := renderSystem(t, lib.Current()); got != "fixed." || lib.Err() != nil {
		t.Errorf("after the fix renders %q, Err %v", got, lib.Err())
	}
}

// TestCheckNamesALinkOut: check fails on a file or directory linked
// outside the repository, naming it, and shows nothing of the target.
func TestCheckNamesALinkOut(t *testing.T) {
	dir := writeRepo(t, map[string]string{"clone/system.tmpl": "clone."})
	if err := os.MkdirAll(filepath.Join(dir, "expert"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, outsideFile(t), filepath.Join(dir, "expert", "system.tmpl"))
	outsideDir := t.TempDir()
	writeFile(t, filepath.Join(outsideDir, "system.tmpl"), secretMarker)
	symlink(t, outsideDir, filepath.Join(dir, "facilitator"))
	r := Check(dir, CheckOptions{})
	if r.OK() {
		t.Fatal("check is OK with links out")
	}
	var text strings.Builder
	for _, p := range append(append(r.Errors, r.Warnings...), r.Notes...) {
		text.WriteString(p.String() + "\n")
	}
	for _, want := range []string{filepath.Join(dir, "expert", "system.tmpl") + ": cannot read: a symbolic link out", filepath.Join(dir, "facilitator") + ": cannot read: a symbolic link out"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "marker") {
		t.Errorf("report shows the target:\n%s", text.String())
	}
}
