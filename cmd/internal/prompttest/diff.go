package prompttest

import (
	"fmt"
	"strings"
)

// contextLines is how many unchanged lines a hunk shows around a change.
const contextLines = 3

// op is one line of an edit script: kept (' '), removed ('-') or added
// ('+'), with its line numbers in the old and new texts (1-based).
type op struct {
	kind     byte
	old, new int
	text     string
}

// UnifiedDiff is the unified diff (as `diff -u` prints it) from text a,
// labelled aName, to text b, labelled bName; "" when they are equal.
//
// Golden requests are a few hundred lines at most, so a longest common
// subsequence over lines (quadratic) is fast enough and gives the
// smallest diff; it is a few dozen lines instead of a dependency.
func UnifiedDiff(aName, a, bName, b string) string {
	if a == b {
		return ""
	}
	ops := editScript(splitLines(a), splitLines(b))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for i, done := 0, 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: the changes from here, merged while no more than twice
		// the context separates them, with the context around them.
		start := max(done, i-contextLines)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j + 1
			} else if j-end >= 2*contextLines {
				break
			}
		}
		end = min(len(ops), end+contextLines)
		writeHunk(&out, ops[start:end])
		i, done = end, end
	}
	return out.String()
}

func writeHunk(out *strings.Builder, ops []op) {
	oldStart, newStart, oldLen, newLen := 0, 0, 0, 0
	for _, o := range ops {
		if o.kind != '+' {
			if oldLen == 0 {
				oldStart = o.old
			}
			oldLen++
		}
		if o.kind != '-' {
			if newLen == 0 {
				newStart = o.new
			}
			newLen++
		}
	}
	// An empty side is numbered by the line before it, as diff -u does.
	if oldLen == 0 {
		oldStart = ops[0].old - 1
	}
	if newLen == 0 {
		newStart = ops[0].new - 1
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(oldStart, oldLen), hunkRange(newStart, newLen))
	for _, o := range ops {
		fmt.Fprintf(out, "%c%s\n", o.kind, o.text)
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// editScript turns a into b line by line, keeping a longest common
// subsequence.
func editScript(a, b []string) []op {
	// lcs[i][j] is the length of a longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', i + 1, j + 1, a[i]})
			i, j = i+1, j+1
		case j == len(b) || i < len(a) && lcs[i+1][j] >= lcs[i][j+1]:
			ops = append(ops, op{'-', i + 1, j + 1, a[i]})
			i++
		default:
			ops = append(ops, op{'+', i + 1, j + 1, b[j]})
			j++
		}
	}
	return ops
}

// splitLines splits text into lines; a final newline ends the last line
// rather than starting an empty one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
