package templates

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with the file at path, or rewrites the file with
// -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test -update and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// testCase is a file of named sections, "-- name --" on a line of its
// own, like txtar: the comment before the first section says what the
// case shows.
type testCase struct {
	comment string
	files   map[string]string
	order   []string
}

// runCases runs f as a subtest for each case file in dir, with the path
// of its golden file.
func runCases(t *testing.T, dir string, f func(t *testing.T, c testCase, goldenPath string)) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no cases in %s: %v", dir, err)
	}
	for _, path := range paths {
		base := strings.TrimSuffix(path, ".txt")
		t.Run(filepath.Base(base), func(t *testing.T) {
			f(t, readCase(t, path), base+".golden")
		})
	}
}

func readCase(t *testing.T, path string) testCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := testCase{files: map[string]string{}}
	var name string
	var body bytes.Buffer
	flush := func() {
		if name == "" {
			c.comment = body.String()
		} else {
			c.files[name] = body.String()
			c.order = append(c.order, name)
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			name = strings.TrimSuffix(strings.TrimPrefix(trimmed, "-- "), " --")
			continue
		}
		body.WriteString(line)
	}
	flush()
	return c
}

// writeRepo writes the template and settings files of a case into a new
// directory and returns it.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if !strings.HasSuffix(name, extTemplate) && !strings.HasSuffix(name, extSettings) {
			continue
		}
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), body)
	}
	return dir
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// open opens a library on dir with the fixed clock.
func open(t testing.TB, dir string) *Library {
	t.Helper()
	l, err := Open(dir, Options{Clock: FixedClock})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// openLogged opens a library on dir that logs, as text, to the returned
// buffer.
func openLogged(t *testing.T, dir string) (*Library, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	l, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return l, &logs
}

// fixtureData is the built-in fixture's data with its authors as written
// ("fixture"), persons ("person") or agents ("agent").
func fixtureData(t *testing.T, f Fixture, authorsKind string) Data {
	t.Helper()
	person, agent := authors(f.Data.ChannelMembers)
	switch authorsKind {
	case "fixture":
		return f.Data
	case "person":
		return withAuthor(f.Data, person)
	case "agent":
		return withAuthor(f.Data, agent)
	}
	t.Fatalf("unknown authors %q: want fixture, person or agent", authorsKind)
	return Data{}
}
