package templates

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const testAgent = "claudine.acme.137.protocol6022.eth"

// renderSystem renders the expert system prompt of testAgent with the
// built-in fixture.
func renderSystem(t *testing.T, s *Set) string {
	t.Helper()
	got, err := s.Render(testAgent, RoleExpert, PromptSystem, BuiltinFixture().Data)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestOpenMissingDir(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope"), Options{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestOpenEmptyDirUsesBuiltins(t *testing.T) {
	want := renderSystem(t, open(t, "").Current())
	if got := renderSystem(t, open(t, t.TempDir()).Current()); got != want {
		t.Errorf("empty repository renders\n%s\nwant the built-in\n%s", got, want)
	}
}

func TestOpenStartsNoGoroutine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "expert/system.tmpl"), "v1.")
	before := runtime.NumGoroutine()
	open(t, dir)
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines: %d before Open, %d after", before, after)
	}
}

// A Set is immutable: a turn that holds one keeps rendering with it after
// a reload.
func TestReloadSwapsWhileHeldSetStays(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "expert/system.tmpl")
	writeFile(t, path, "version one.")
	lib := open(t, dir)
	held := lib.Current()
	writeFile(t, path, "version two.")
	if err := lib.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := renderSystem(t, held); got != "version one." {
		t.Errorf("held set renders %q, want version one.", got)
	}
	if got := renderSystem(t, lib.Current()); got != "version two." {
		t.Errorf("current set renders %q, want version two.", got)
	}
}

func TestReloadKeepsSetWhenDirIsGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	writeFile(t, filepath.Join(dir, "expert/system.tmpl"), "kept.")
	lib := open(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := lib.Reload(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Reload err = %v, want fs.ErrNotExist", err)
	}
	if err := lib.Err(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Err() = %v, want fs.ErrNotExist", err)
	}
	if got := renderSystem(t, lib.Current()); got != "kept." {
		t.Errorf("renders %q, want kept.", got)
	}
}

// TestPollSeesChanges drives one poll after each kind of change, as Run
// does every second.
func TestPollSeesChanges(t *testing.T) {
	// write is a change writing body to the file at rel.
	write := func(rel, body string) func(*testing.T, string) {
		return func(t *testing.T, root string) { writeFile(t, filepath.Join(root, rel), body) }
	}
	tests := []struct {
		name   string
		files  map[string]string                      // the files the case starts from
		links  func(t *testing.T, root string) string // when set, links the files and returns the repository dir
		change func(t *testing.T, root string)
		want   string // rendered after the change; "" means the built-in
	}{
		{
			name:   "edit",
			files:  map[string]string{"expert/system.tmpl": "before."},
			change: write("expert/system.tmpl", "after, longer."),
			want:   "after, longer.",
		},
		{
			name:  "same size and time, other content",
			files: map[string]string{"expert/system.tmpl": "aaaa."},
			change: func(t *testing.T, root string) {
				path := filepath.Join(root, "expert/system.tmpl")
				info, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, "bbbb.")
				if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
					t.Fatal(err)
				}
			},
			want: "bbbb.",
		},
		{
			name:   "file added",
			files:  map[string]string{"clone/system.tmpl": "clone."},
			change: write("all/system.tmpl", "added."),
			want:   "added.",
		},
		{
			name:  "file removed",
			files: map[string]string{"expert/system.tmpl": "removed soon."},
			change: func(t *testing.T, root string) {
				if err := os.Remove(filepath.Join(root, "expert/system.tmpl")); err != nil {
					t.Fatal(err)
				}
			},
			want: "",
		},
		{
			name:  "git-sync swaps the repository link",
			files: map[string]string{"rev1/expert/system.tmpl": "revision one.", "rev2/expert/system.tmpl": "revision two."},
			links: func(t *testing.T, root string) string {
				symlink(t, "rev1", filepath.Join(root, "repo"))
				return filepath.Join(root, "repo")
			},
			change: func(t *testing.T, root string) {
				swapLink(t, "rev2", filepath.Join(root, "repo"))
			},
			want: "revision two.",
		},
		{
			name:  "Kubernetes swaps ..data",
			files: map[string]string{"..2025_01/expert/system.tmpl": "volume one.", "..2025_02/expert/system.tmpl": "volume two."},
			links: func(t *testing.T, root string) string {
				symlink(t, "..2025_01", filepath.Join(root, "..data"))
				symlink(t, "..data/expert", filepath.Join(root, "expert"))
				return root
			},
			change: func(t *testing.T, root string) {
				swapLink(t, "..2025_02", filepath.Join(root, "..data"))
			},
			want: "volume two.",
		},
	}
	builtin := renderSystem(t, open(t, "").Current())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeRepo(t, tt.files)
			dir := root
			if tt.links != nil {
				dir = tt.links(t, root)
			}
			lib := open(t, dir)
			lib.poll()
			if got := lib.Current(); got.files == nil {
				t.Fatal("no files recorded")
			}
			unchanged := lib.Current()
			lib.poll()
			if lib.Current() != unchanged {
				t.Error("a poll without change swapped the set")
			}
			tt.change(t, root)
			lib.poll()
			want := tt.want
			if want == "" {
				want = builtin
			}
			if got := renderSystem(t, lib.Current()); got != want {
				t.Errorf("after the change renders %q, want %q", got, want)
			}
		})
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// swapLink points link at target atomically, as git-sync and the kubelet
// do: a new link renamed over the old one.
func swapLink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp"
	symlink(t, target, tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// warnings counts the warnings in text logs.
func warnings(logs *bytes.Buffer) int { return strings.Count(logs.String(), " level=WARN ") }

func TestPollLogsAnUnreadableRepositoryOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	writeFile(t, filepath.Join(dir, "expert/system.tmpl"), "kept.")
	lib, logs := openLogged(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		lib.poll()
	}
	if n := warnings(logs); n != 1 {
		t.Errorf("%d warnings for a vanished repository, want 1", n)
	}
	if err := lib.Err(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Err() = %v, want fs.ErrNotExist", err)
	}
	if got := renderSystem(t, lib.Current()); got != "kept." {
		t.Errorf("renders %q, want the kept set", got)
	}
	writeFile(t, filepath.Join(dir, "expert/system.tmpl"), "back.")
	lib.poll()
	if got := renderSystem(t, lib.Current()); got != "back." {
		t.Errorf("renders %q, want back.", got)
	}
	if err := lib.Err(); err != nil {
		t.Errorf("Err() = %v after a good read, want nil", err)
	}
}

func TestProblemsAreListedAndLogged(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "expert/system.tmpl"), "fine.\n{{if}}")
	writeFile(t, filepath.Join(dir, "expert/default.tmpl"), "misplaced.")
	writeFile(t, filepath.Join(dir, "all/system.toml"), "colour = 1")
	lib, logs := openLogged(t, dir)
	var got []string
	for _, p := range lib.Current().Problems() {
		got = append(got, strings.ReplaceAll(p.Error(), dir, "$DIR"))
	}
	want := []string{
		`$DIR/all/system.toml:1: unknown key "colour" (keys: ` + settingsKeys + `)`,
		`$DIR/expert/default.tmpl: unknown file: expert has no prompt "default"; the prompts here are system, context-not-found, context-found`,
		`$DIR/expert/system.tmpl:2: missing value for if`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := warnings(logs); n != len(want) {
		t.Errorf("%d warnings logged, want %d", n, len(want))
	}
}

func TestRunFollowsChangesAndStops(t *testing.T) {
	// In a synctest bubble Run's ticker runs on the bubble's clock: once an
	// interval has passed and Run waits for its next tick again
	// (synctest.Wait), it has polled the changed repository.
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "expert/system.tmpl")
		writeFile(t, path, "first.")
		lib := open(t, dir)
		lib.interval = 10 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- lib.Run(ctx) }()
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				cancel()
				<-done
			}
		})

		writeFile(t, path, "second, picked up by Run.")
		time.Sleep(lib.interval)
		synctest.Wait()
		if got := renderSystem(t, lib.Current()); got != "second, picked up by Run." {
			t.Fatalf("after one poll the prompt reads %q: Run did not pick up the change", got)
		}
		cancel()
		err := <-done
		stopped = true
		if err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	})
}

func TestRunWithoutRepositoryWaitsForContext(t *testing.T) {
	lib := open(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lib.Run(ctx); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if err := lib.Reload(); err != nil {
		t.Errorf("Reload without a repository = %v, want nil", err)
	}
}

// Turns render while reloads swap sets: run with -race.
func TestRenderDuringReloads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "expert/system.tmpl")
	writeFile(t, path, "v0 {{.MemorySessionId}}.")
	lib := open(t, dir)
	d := BuiltinFixture().Data
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 200 {
				got, err := lib.Current().Render(testAgent, RoleExpert, PromptSystem, d)
				if err != nil || !strings.HasSuffix(got, " C45653.") {
					errs <- errors.Join(err, errors.New("unexpected render: "+got))
					return
				}
			}
		})
	}
	for i := range 20 {
		writeFile(t, path, "v"+strings.Repeat("x", i)+" {{.MemorySessionId}}.")
		if err := lib.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A prompt or settings file that cannot be read fails its prompt like a
// broken one; it is never skipped in favour of a lower level.
func TestUnreadableFilesFailTheirPrompt(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "expert/system.tmpl"), "role level.")
	writeFile(t, filepath.Join(dir, "expert/context-found.tmpl"), strings.Repeat("x", maxFileSize+1))
	writeFile(t, filepath.Join(dir, "all/system.toml"), `model = "m"`)
	if err := os.MkdirAll(filepath.Join(dir, "agents", testAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "missing.tmpl", filepath.Join(dir, "agents", testAgent, "system.tmpl"))
	symlink(t, "missing.toml", filepath.Join(dir, "expert", "system.toml"))
	set := open(t, dir).Current()
	d := BuiltinFixture().Data
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"dangling link to a template", func() error {
			_, err := set.Render(testAgent, RoleExpert, PromptSystem, d)
			return err
		}, "/agents/" + testAgent + "/system.tmpl: cannot read: "},
		{"file too large", func() error {
			_, err := set.Render(testAgent, RoleExpert, PromptContextFound, d)
			return err
		}, "/expert/context-found.tmpl: cannot read: larger than 1048576 bytes"},
		{"dangling link to settings", func() error {
			_, err := set.Settings("marc.acme.137.protocol6022.eth", RoleExpert, PromptSystem)
			return err
		}, "/expert/system.toml: cannot read: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if got, err := set.Render("marc.acme.137.protocol6022.eth", RoleExpert, PromptSystem, d); err != nil || got != "role level." {
		t.Errorf("another agent: %q, %v", got, err)
	}
}

// TestSource: a trace names the file a prompt came from and its content
// hash, or the built-in default.
func TestSource(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "expert/system.tmpl"), "v1.")
	s := open(t, dir).Current()
	file, hash := s.Source(testAgent, RoleExpert, PromptSystem)
	if file != "expert/system.tmpl" || hash != sha256Hex("v1.") {
		t.Errorf("Source = %q, %q; want expert/system.tmpl and the SHA-256 of its content", file, hash)
	}
	if file, hash := s.Source(testAgent, RoleExpert, PromptContextFound); file != BuiltinSource || hash != "" {
		t.Errorf("Source of a built-in = %q, %q", file, hash)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
