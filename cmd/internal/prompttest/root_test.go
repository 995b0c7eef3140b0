package prompttest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	chatHello     = "> Ada: hello\n< elen: 🧭 Hello Ada.\n= elen: Hello Ada\n"
	goldenHello   = "001-elen-default.txt"
	outsideMarker = "outside the repository: never written, deleted or shown"
)

// outsideDir is a directory outside the repository holding a stale
// golden file and one a request would overwrite, both with a marker.
func outsideDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"999-stale.txt", goldenHello} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(outsideMarker), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// assertUntouched fails unless dir holds the two marker files of
// outsideDir, unchanged, and nothing else.
func assertUntouched(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 2 {
		t.Fatalf("outside directory: %v, %d entries, want the 2 it had", err, len(entries))
	}
	for _, e := range entries {
		body, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || string(body) != outsideMarker {
			t.Errorf("%s changed: %q, %v", e.Name(), body, err)
		}
	}
}

// TestUpdateNeverWritesOutOfTests: with tests/a.golden linked to a
// directory outside the repository, -update fails and writes and deletes
// nothing there; the compare run shows nothing of it.
func TestUpdateNeverWritesOutOfTests(t *testing.T) {
	o, out := options(t, map[string]string{"a.chat": chatHello}, nil)
	outside := outsideDir(t)
	if err := os.Symlink(outside, filepath.Join(o.Dir, "tests", "a.golden")); err != nil {
		t.Fatal(err)
	}
	o.Update = true
	if sum, err := Run(context.Background(), o); err != nil || sum.Failed != 1 {
		t.Errorf("-update through a linked golden directory: %+v, %v, want a failure\n%s", sum, err, out)
	}
	assertUntouched(t, outside)
	o.Update = false
	out.Reset()
	if sum, err := Run(context.Background(), o); err != nil || sum.Failed != 1 {
		t.Errorf("compare: %+v, %v", sum, err)
	}
	if strings.Contains(out.String(), outsideMarker) {
		t.Errorf("the output shows a file outside the repository:\n%s", out)
	}
}

// TestUpdateNeverFollowsAGoldenFileOut: a golden file linked outside
// tests/ is neither overwritten nor shown in a diff.
func TestUpdateNeverFollowsAGoldenFileOut(t *testing.T) {
	o, out := options(t, map[string]string{"a.chat": chatHello}, nil)
	outside := outsideDir(t)
	golden := filepath.Join(o.Dir, "tests", "a.golden")
	if err := os.Mkdir(golden, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, goldenHello), filepath.Join(golden, goldenHello)); err != nil {
		t.Fatal(err)
	}
	if sum, _ := Run(context.Background(), o); sum.Failed != 1 || strings.Contains(out.String(), outsideMarker) {
		t.Errorf("compare: %+v; the output must fail without the linked content:\n%s", sum, out)
	}
	o.Update = true
	if sum, _ := Run(context.Background(), o); sum.Failed != 1 {
		t.Errorf("-update through a linked golden file: %+v, want a failure", sum)
	}
	assertUntouched(t, outside)
}

// TestLinksInsideTestsAreFollowed: a golden directory linked to another
// inside tests/ is written through.
func TestLinksInsideTestsAreFollowed(t *testing.T) {
	o, out := options(t, map[string]string{"a.chat": chatHello, "shared/keep": ""}, nil)
	if err := os.Symlink("shared", filepath.Join(o.Dir, "tests", "a.golden")); err != nil {
		t.Fatal(err)
	}
	o.Update = true
	if sum, err := Run(context.Background(), o); err != nil || sum.Passed != 1 {
		t.Fatalf("-update: %+v, %v\n%s", sum, err, out)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, "tests", "shared", goldenHello)); err != nil {
		t.Errorf("the golden file was not written through the inside link: %v", err)
	}
}
