package prompttest

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// goldenFiles names each request's file: NNN-<agent>-<phase>.txt, the
// agent by its ENS name's first label, in the order the model received
// them.
func goldenFiles(requests []Request) map[string]string {
	files := make(map[string]string, len(requests))
	for i, r := range requests {
		agent, _, _ := strings.Cut(strings.ToLower(r.Agent), ".")
		files[fmt.Sprintf("%03d-%s-%s.txt", i+1, fileSafe(agent), fileSafe(r.Prompt))] = r.Text
	}
	return files
}

// fileSafe keeps a name part to letters, digits and dashes.
func fileSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
	if s == "" {
		return "request"
	}
	return s
}

// existingGolden lists the .txt files of a golden directory.
func existingGolden(golden *os.Root) ([]string, error) {
	entries, err := fs.ReadDir(golden.FS(), ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".txt") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// writeGolden writes the files into tests/<dir> and removes the .txt
// files no request matches any more, all through the tests/ root: a
// golden directory or file linked out of tests/ is an error, and nothing
// outside is written or deleted.
func writeGolden(tests *os.Root, dir string, files map[string]string) error {
	if err := tests.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) { // #nosec G301 -- a directory of the repository, committed
		return fmt.Errorf("templates test: write golden files: %w", err)
	}
	golden, err := tests.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("templates test: write golden files: %w", err)
	}
	defer golden.Close()
	old, err := existingGolden(golden)
	if err != nil {
		return fmt.Errorf("templates test: write golden files: %w", err)
	}
	for _, name := range old {
		if _, ok := files[name]; !ok {
			if err := golden.Remove(name); err != nil {
				return fmt.Errorf("templates test: remove a stale golden file: %w", err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := golden.WriteFile(name, []byte(files[name]), 0o644); err != nil { // #nosec G306 -- committed to the repository
			return fmt.Errorf("templates test: write golden files: %w", err)
		}
	}
	return nil
}

// compareGolden compares the files with those of tests/<dir> (shown as
// display), read through the tests/ root: a difference is a unified diff
// naming the golden file; a missing or a stale file is named too. A
// golden file linked out of tests/ is an error, its content never shown.
func compareGolden(tests *os.Root, dir, display, script string, files map[string]string) []string {
	golden, err := tests.OpenRoot(dir)
	var old []string
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return []string{fmt.Sprintf("read the golden files: %v", err)}
	default:
		defer golden.Close()
		if old, err = existingGolden(golden); err != nil {
			return []string{fmt.Sprintf("read the golden files: %v", err)}
		}
	}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(display, name)
		var want []byte
		err := fs.ErrNotExist
		if golden != nil {
			want, err = golden.ReadFile(name)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, fmt.Sprintf("%s: no such golden file: the request is new (run with -update to write it)", path))
		case err != nil:
			problems = append(problems, err.Error())
		case string(want) != files[name]:
			problems = append(problems, fmt.Sprintf("%s: the request differs (run with -update to accept it):\n%s",
				path, UnifiedDiff(path, string(want), name+" (sent by "+script+")", files[name])))
		}
	}
	for _, name := range old {
		if _, ok := files[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s: no request matches it any more (run with -update to remove it)", filepath.Join(display, name)))
		}
	}
	return problems
}
