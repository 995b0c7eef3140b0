package templates

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// The commit of the config repository is read from its git metadata,
// without a git binary (the image has none): the HEAD of the work tree
// holding the templates directory, a branch's ref resolved through the
// loose refs and packed-refs. A linked work tree (git worktree, as
// git-sync makes one per revision behind a symbolic link) has a .git file
// naming its own git directory, whose commondir holds the shared refs.

// maxGitDepth bounds the walk up from the templates directory to the work
// tree's root.
const maxGitDepth = 32

// RepoCommit returns the commit checked out in the git work tree that
// holds dir (dir itself or a folder above it), as hex; "" when dir is in
// no work tree or its HEAD cannot be read.
func RepoCommit(dir string) string {
	if dir == "" {
		return ""
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for range maxGitDepth {
		if gitDir, ok := gitDirOf(filepath.Join(abs, ".git")); ok {
			return headCommit(gitDir)
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return ""
		}
		abs = parent
	}
	return ""
}

// gitDirOf returns the git directory dotGit stands for: itself when it is
// a directory, the one a .git file names ("gitdir: <path>", relative to
// the file's folder) otherwise.
func gitDirOf(dotGit string) (string, bool) {
	info, err := os.Stat(dotGit)
	switch {
	case err != nil:
		return "", false
	case info.IsDir():
		return dotGit, true
	}
	body, err := os.ReadFile(dotGit) // #nosec G304 -- the .git file of the operator's templates directory
	if err != nil {
		return "", false
	}
	path, ok := strings.CutPrefix(strings.TrimSpace(string(body)), "gitdir:")
	if !ok {
		return "", false
	}
	path = strings.TrimSpace(path)
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(dotGit), path)
	}
	return path, true
}

// headCommit reads HEAD in gitDir: a commit (a detached HEAD, as git-sync
// leaves its work trees) or a ref to resolve.
func headCommit(gitDir string) string {
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD")) // #nosec G304 -- inside the git directory found above
	if err != nil {
		return ""
	}
	line := strings.TrimSpace(string(head))
	ref, isRef := strings.CutPrefix(line, "ref:")
	if !isRef {
		return commitID(line)
	}
	return resolveRef(gitDir, strings.TrimSpace(ref))
}

// resolveRef finds the commit ref points at: a loose ref in the work
// tree's git directory or the common one, else packed-refs. Symbolic refs
// are followed a few levels.
func resolveRef(gitDir, ref string) string {
	common := gitDir
	if body, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil { // #nosec G304 -- inside the git directory
		c := strings.TrimSpace(string(body))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		common = c
	}
	for range 5 {
		if !validRef(ref) {
			return ""
		}
		var body []byte
		var err error
		for _, dir := range []string{gitDir, common} {
			if body, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(ref))); err == nil { // #nosec G304 G703 -- a ref name checked by validRef
				break
			}
		}
		if err != nil {
			return packedRef(common, ref)
		}
		line := strings.TrimSpace(string(body))
		next, isRef := strings.CutPrefix(line, "ref:")
		if !isRef {
			return commitID(line)
		}
		ref = strings.TrimSpace(next)
	}
	return ""
}

// validRef accepts the ref names HEAD may point at: refs/… without a
// ".." component, so that a read stays inside the git directory.
func validRef(ref string) bool {
	if !strings.HasPrefix(ref, "refs/") {
		return false
	}
	for _, part := range strings.Split(ref, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// packedRef looks ref up in packed-refs: lines "<id> <ref>", comments
// starting with '#', peeled tags with '^'.
func packedRef(common, ref string) string {
	body, err := os.ReadFile(filepath.Join(common, "packed-refs")) // #nosec G304 G703 -- inside the git directory
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		id, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref {
			return commitID(id)
		}
	}
	return ""
}

// commitID is s when it is a commit id (40 hex digits, or 64 in a SHA-256
// repository), else "".
func commitID(s string) string {
	if len(s) != 40 && len(s) != 64 {
		return ""
	}
	if _, err := hex.DecodeString(s); err != nil {
		return ""
	}
	return strings.ToLower(s)
}
