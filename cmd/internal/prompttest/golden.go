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

// existingGolden lists the .txt files of a golden directory (none when it
// does not exist).
func existingGolden(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
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

// writeGolden writes the files into dir and removes the .txt files no
// request matches any more.
func writeGolden(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil { // #nosec G301 -- a directory of the repository, committed
		return fmt.Errorf("templates test: write golden files: %w", err)
	}
	old, err := existingGolden(dir)
	if err != nil {
		return fmt.Errorf("templates test: write golden files: %w", err)
	}
	for _, name := range old {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("templates test: remove a stale golden file: %w", err)
			}
		}
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil { // #nosec G306 -- committed to the repository
			return fmt.Errorf("templates test: write golden files: %w", err)
		}
	}
	return nil
}

// compareGolden compares the files with those of dir: a difference is a
// unified diff naming the golden file; a missing or a stale file is named
// too.
func compareGolden(dir, script string, files map[string]string) []string {
	old, err := existingGolden(dir)
	if err != nil {
		return []string{fmt.Sprintf("read the golden files: %v", err)}
	}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(dir, name)
		want, err := os.ReadFile(path) // #nosec G304 -- a golden file of the repository being tested
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
			problems = append(problems, fmt.Sprintf("%s: no request matches it any more (run with -update to remove it)", filepath.Join(dir, name)))
		}
	}
	return problems
}
