package templates

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"text/template"
	"time"
)

//go:embed defaults
var defaultsFS embed.FS

// builtinPrefix names built-in prompts in errors.
const builtinPrefix = "builtin:"

// Log attribute keys.
const (
	logKeyDir      = "dir"
	logKeyFiles    = "files"
	logKeyProblems = "problems"
	logKeyProblem  = "problem"
	logKeyIgnored  = "ignored"
	logKeyFirst    = "first"
	logKeyError    = "error"
)

// pollInterval is how often Run looks at the repository; a change is live
// within two intervals.
const pollInterval = time.Second

// Options configure a Library.
type Options struct {
	// Logger receives reloads and template problems; nil discards them.
	Logger *slog.Logger
	// Clock is what the template function now returns; nil is time.Now.
	Clock func() time.Time
}

// Library holds the current Set of prompts of a config repository and
// replaces it when the repository changes.
type Library struct {
	dir      string              // "" when there is no repository
	display  func(string) string // the name errors give a file of the repository
	log      *slog.Logger
	funcs    template.FuncMap
	builtin  *repo
	interval time.Duration

	current atomic.Pointer[Set]

	mu      sync.Mutex            // serialises loads
	readErr atomic.Pointer[error] // why the last read failed; nil after a successful one
}

// Open loads the config repository in dir. With dir "" only the built-in
// defaults are used. Templates that fail to parse do not fail Open: they
// fail the prompts that use them, and are logged and listed by
// Set.Problems. Open fails when dir cannot be read (wrapping
// fs.ErrNotExist when it does not exist). It starts no goroutine; call
// Run to follow changes.
func Open(dir string, opts Options) (*Library, error) {
	clock := opts.Clock
	if clock == nil {
		clock = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	funcs := funcMap(clock)
	builtin, err := loadBuiltin(funcs)
	if err != nil {
		return nil, err
	}
	l := &Library{dir: dir, log: log, funcs: funcs, builtin: builtin, interval: pollInterval}
	if dir == "" {
		l.current.Store(&Set{repo: &repo{}, builtin: builtin})
		return l, nil
	}
	l.display = displayIn(dir)
	l.mu.Lock()
	defer l.mu.Unlock()
	files, err := l.read()
	if err != nil {
		return nil, err
	}
	// The first load has no last good set to keep, so a link out of the
	// repository fails the prompts that use it (a ⚠️ on their turns).
	l.install(files)
	return l, nil
}

// builtinFS is the embedded defaults, named builtin:<path> in errors.
func builtinFS() (fs.FS, func(rel string) string) {
	fsys, _ := fs.Sub(defaultsFS, "defaults") // fails only on an invalid path
	return fsys, func(rel string) string { return builtinPrefix + rel }
}

// displayIn is the name errors give a file of the repository in dir, by
// its slash-separated path.
func displayIn(dir string) func(rel string) string {
	return func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
}

// openRoot opens the repository in dir as a root: every read through it
// stays inside dir, following a symbolic link that stays inside and
// refusing one that leaves (a template linked to /proc/self/environ must
// never reach a prompt). It is opened again for every read, so that dir
// being a link git-sync swaps is followed to its new target. Call done
// when finished with fsys.
func openRoot(dir string) (fsys fs.FS, done func(), err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	return root.FS(), func() { _ = root.Close() }, nil
}

// readRoot reads the repository in dir through openRoot.
func readRoot(dir string) (map[string]fileData, error) {
	fsys, done, err := openRoot(dir)
	if err != nil {
		return nil, err
	}
	defer done()
	return readRepo(fsys)
}

// loadBuiltin parses the embedded defaults. They are part of the binary,
// so a problem in them is a bug, reported as an error.
func loadBuiltin(funcs template.FuncMap) (*repo, error) {
	fsys, display := builtinFS()
	files, err := readRepo(fsys)
	if err != nil {
		return nil, fmt.Errorf("templates: built-in defaults: %w", err)
	}
	r := buildRepo(files, display, funcs)
	if len(r.problems) > 0 {
		return nil, fmt.Errorf("templates: built-in defaults: %w", r.problems[0])
	}
	return r, nil
}

// Current returns the Set in use. Keep it for the length of a turn.
func (l *Library) Current() *Set { return l.current.Load() }

// Reload reads the repository again and swaps in the new Set, whether or
// not anything changed (for SIGHUP). When the repository cannot be read
// the current Set stays and the error is returned.
func (l *Library) Reload() error {
	if l.dir == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	files, err := l.readUsable()
	if err != nil {
		return err
	}
	l.install(files)
	return nil
}

// read reads the repository and records the outcome for Err. Callers hold
// mu.
func (l *Library) read() (map[string]fileData, error) {
	files, err := readRoot(l.dir)
	if err != nil {
		err = fmt.Errorf("templates: read %s: %w", l.dir, err)
		l.readErr.Store(&err)
		return nil, err
	}
	l.readErr.Store(nil)
	return files, nil
}

// readUsable is read, failing as well when a file is a symbolic link out
// of the repository: a reload that finds one keeps the last good set, so
// the link's target is never read and the prompts keep working as they
// did. Callers hold mu.
func (l *Library) readUsable() (map[string]fileData, error) {
	files, err := l.read()
	if err != nil {
		return nil, err
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if errors.Is(files[rel].err, errLinkOut) {
			err := fmt.Errorf("templates: %s: %w", l.display(rel), files[rel].err)
			l.readErr.Store(&err)
			return nil, err
		}
	}
	return files, nil
}

// Err reports why the repository could not be read at the last attempt
// (Reload or Run's polling), when the prompts loaded before stay in use;
// nil when the last read succeeded. It is for health checks: a volume
// that vanished or a broken symbolic link swap shows here.
func (l *Library) Err() error {
	if p := l.readErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Run follows the repository until ctx ends, polling every second: file
// sizes and times, then contents, so that a symbolic link swapped by
// git-sync or a Kubernetes volume is seen as well as an edit. A change is
// live within two seconds. It returns nil when ctx ends.
func (l *Library) Run(ctx context.Context) error {
	if l.dir == "" {
		<-ctx.Done()
		return nil
	}
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			l.poll()
		}
	}
}

// poll reloads when the repository differs from the current Set.
func (l *Library) poll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.Err()
	files, err := l.readUsable()
	if err != nil {
		if before == nil || before.Error() != err.Error() {
			l.log.Warn("templates: cannot read the repository; keeping the loaded prompts", logKeyDir, l.dir, logKeyError, err)
		}
		return
	}
	if sameFiles(files, l.Current().files) && RepoCommit(l.dir) == l.Current().commit {
		return
	}
	l.install(files)
}

// install builds a Set from files and makes it current. Callers hold mu.
func (l *Library) install(files map[string]fileData) {
	set := &Set{files: files, repo: buildRepo(files, l.display, l.funcs), builtin: l.builtin, commit: RepoCommit(l.dir)}
	l.current.Store(set)
	l.log.Info("templates: loaded", logKeyDir, l.dir, logKeyFiles, len(files), logKeyProblems, len(set.repo.problems))
	// Files outside the layout are ignored and summed up in one line (a
	// directory that is not a config repository would otherwise flood the
	// log); every other problem fails some prompts and is logged on its own.
	var ignored []string
	for _, p := range set.repo.problems {
		if errors.Is(p, errUnknownFile) {
			ignored = append(ignored, p.File)
			continue
		}
		l.log.Warn("templates: problem", logKeyProblem, p.Error())
	}
	if len(ignored) > 0 {
		l.log.Warn("templates: files outside the layout are ignored; conclave templates check lists them",
			logKeyDir, l.dir, logKeyIgnored, len(ignored), logKeyFirst, ignored[0])
	}
}
