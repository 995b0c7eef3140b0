package templates

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo makes a git repository in a new directory with one commit
// holding facilitator/default.tmpl under prompts/, and returns it.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to build a repository with")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "prompts", "facilitator", "default.tmpl"), "Answer the person.\n")
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "prompts")
	return dir
}

// git runs git in dir with a fixed identity and no user configuration.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestRepoCommit(t *testing.T) {
	t.Run("a branch, a loose ref", func(t *testing.T) {
		dir := gitRepo(t)
		want := git(t, dir, "rev-parse", "HEAD")
		if got := RepoCommit(filepath.Join(dir, "prompts")); got != want {
			t.Errorf("RepoCommit = %q, want %q", got, want)
		}
	})
	t.Run("packed refs", func(t *testing.T) {
		dir := gitRepo(t)
		want := git(t, dir, "rev-parse", "HEAD")
		git(t, dir, "pack-refs", "--all", "--prune")
		if _, err := os.Stat(filepath.Join(dir, ".git", "refs", "heads", "main")); err == nil {
			t.Fatal("the ref is still loose")
		}
		if got := RepoCommit(dir); got != want {
			t.Errorf("RepoCommit = %q, want %q", got, want)
		}
	})
	t.Run("detached head", func(t *testing.T) {
		dir := gitRepo(t)
		first := git(t, dir, "rev-parse", "HEAD")
		writeFile(t, filepath.Join(dir, "prompts", "facilitator", "default.tmpl"), "Answer briefly.\n")
		git(t, dir, "commit", "-q", "-am", "briefer")
		git(t, dir, "checkout", "-q", "--detach", first)
		if got := RepoCommit(filepath.Join(dir, "prompts")); got != first {
			t.Errorf("RepoCommit = %q, want %q", got, first)
		}
	})
	t.Run("git-sync: a linked work tree behind a symbolic link", func(t *testing.T) {
		dir := gitRepo(t)
		want := git(t, dir, "rev-parse", "HEAD")
		root := t.TempDir()
		wt := filepath.Join(root, ".worktrees", want)
		git(t, dir, "worktree", "add", "-q", "--detach", wt, want)
		if err := os.Symlink(filepath.Join(".worktrees", want), filepath.Join(root, "current")); err != nil {
			t.Fatal(err)
		}
		if got := RepoCommit(filepath.Join(root, "current", "prompts")); got != want {
			t.Errorf("RepoCommit = %q, want %q", got, want)
		}
		// A linked work tree on a branch reads the shared refs.
		wt2 := filepath.Join(root, "branch")
		git(t, dir, "worktree", "add", "-q", "-b", "review", wt2)
		if got := RepoCommit(wt2); got != want {
			t.Errorf("on a branch: RepoCommit = %q, want %q", got, want)
		}
	})
	t.Run("no work tree", func(t *testing.T) {
		if got := RepoCommit(t.TempDir()); got != "" {
			t.Errorf("RepoCommit = %q, want none", got)
		}
		if got := RepoCommit(""); got != "" {
			t.Errorf("RepoCommit(\"\") = %q, want none", got)
		}
	})
	t.Run("a broken .git is no commit", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, ".git"), "gitdir: /nowhere/at/all\n")
		if got := RepoCommit(dir); got != "" {
			t.Errorf("RepoCommit = %q, want none", got)
		}
		dir = t.TempDir()
		writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/../../../etc/passwd\n")
		if got := RepoCommit(dir); got != "" {
			t.Errorf("RepoCommit through .. = %q, want none", got)
		}
	})
}

// A Set knows the commit it was read from, and a new commit that changes
// no template is still picked up by the polling.
func TestSetCommit(t *testing.T) {
	dir := gitRepo(t)
	first := git(t, dir, "rev-parse", "HEAD")
	lib := open(t, filepath.Join(dir, "prompts"))
	if got := lib.Current().Commit(); got != first {
		t.Fatalf("Commit = %q, want %q", got, first)
	}
	writeFile(t, filepath.Join(dir, "README.md"), "prompts of the claims desk\n")
	git(t, dir, "add", "README.md")
	git(t, dir, "commit", "-q", "-m", "readme")
	second := git(t, dir, "rev-parse", "HEAD")
	lib.poll()
	if got := lib.Current().Commit(); got != second {
		t.Errorf("after a commit: Commit = %q, want %q", got, second)
	}
	builtin := open(t, "")
	if got := builtin.Current().Commit(); got != "" {
		t.Errorf("the built-in prompts have commit %q", got)
	}
}
