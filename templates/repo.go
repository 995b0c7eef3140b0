package templates

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/template"
	"text/template/parse"
	"time"
)

const (
	maxDepth    = 3       // agents/<ens>/<prompt>.tmpl, and one level more to name misplaced files
	maxFileSize = 1 << 20 // a template larger than this is a mistake
)

// fileData is one .tmpl or .toml file as read from the repository.
type fileData struct {
	size  int64
	mtime time.Time
	body  []byte
	err   error // the file could not be read
}

func (f fileData) same(g fileData) bool {
	return f.size == g.size && f.mtime.Equal(g.mtime) && errText(f.err) == errText(g.err) && bytes.Equal(f.body, g.body)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func sameFiles(a, b map[string]fileData) bool {
	return maps.EqualFunc(a, b, fileData.same)
}

// errLinkOut marks a symbolic link the repository's root refuses to
// follow: one that leaves the repository. Whatever its name, it is an
// error naming the link, and its target is never read.
var errLinkOut = errors.New("a symbolic link out of the config repository is not followed")

// readRepo reads the .tmpl and .toml files of a repository. Symbolic links
// that stay inside fsys (an os.Root) are followed, so a directory swapped by git-sync or a Kubernetes volume
// reads as its new target; names starting with "." are skipped (.git, and
// the ..data links of Kubernetes), and so is the top-level tests/ (prompt
// tests). Only an unreadable root is an error;
// an unreadable file is recorded on the file.
func readRepo(fsys fs.FS) (map[string]fileData, error) {
	files := map[string]fileData{}
	if err := readRepoDir(fsys, ".", 0, files); err != nil {
		return nil, err
	}
	return files, nil
}

func readRepoDir(fsys fs.FS, dir string, depth int, files map[string]fileData) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || depth == 0 && name == dirTests {
			continue
		}
		rel := path.Join(dir, name)
		ext := path.Ext(name)
		isFile := ext == extTemplate || ext == extSettings
		info, err := fs.Stat(fsys, rel) // follows links that stay in the root
		switch {
		case err != nil && e.Type()&fs.ModeSymlink != 0 && !errors.Is(err, fs.ErrNotExist):
			files[rel] = fileData{err: fmt.Errorf("%w (%w)", errLinkOut, err)}
		case err != nil:
			if isFile {
				files[rel] = fileData{err: err}
			}
		case info.IsDir():
			if depth < maxDepth {
				if err := readRepoDir(fsys, rel, depth+1, files); err != nil {
					files[rel] = fileData{err: err}
				}
			}
		case isFile:
			files[rel] = readRepoFile(fsys, rel, info)
		}
	}
	return nil
}

func readRepoFile(fsys fs.FS, rel string, info fs.FileInfo) fileData {
	f := fileData{size: info.Size(), mtime: info.ModTime()}
	if f.size > maxFileSize {
		f.err = fmt.Errorf("larger than %d bytes", maxFileSize)
		return f
	}
	f.body, f.err = fs.ReadFile(fsys, rel)
	return f
}

// promptFile is one parsed prompt template, or why it cannot be used.
type promptFile struct {
	tmpl *template.Template // nil when err is set
	size int                // of the source
	hash string             // SHA-256 of the source, hex
	err  error
	// rendered is the length of the last render, so the next one gets a
	// buffer of about the right size at once.
	rendered atomic.Int64
	// softened are the field reads through a value without fields that
	// were made to give no value (see softenReads), for check's warnings.
	softened []softRead
}

// sizeHint is the expected length of a render: the last one's and a
// little more, or, before any, one and a half times the source.
func (pf *promptFile) sizeHint() int {
	if n := int(pf.rendered.Load()); n > 0 {
		return n + n/8
	}
	return pf.size + pf.size/2
}

// settingsFile is one decoded settings file, or why it cannot be used.
type settingsFile struct {
	settings Settings
	err      error
}

// repo is a parsed repository: the config repository's files, or the
// built-in defaults.
type repo struct {
	prompts  map[string]*promptFile   // by relative path
	settings map[string]*settingsFile // by relative path
	problems []*Error
	ignored  []string // display names of the settings-like files outside the layout (kindIgnored)
}

// buildRepo parses files; display turns a relative path into the name
// errors show. A broken file is recorded, never fatal: it fails only the
// prompts that use it.
func buildRepo(files map[string]fileData, display func(string) string, funcs template.FuncMap) *repo {
	r := &repo{prompts: map[string]*promptFile{}, settings: map[string]*settingsFile{}}
	base, brokenPartials := r.parsePartials(files, display, funcs)
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		f, name, p := files[rel], display(rel), classify(rel)
		if errors.Is(f.err, errLinkOut) && p.kind != kindPrompt && p.kind != kindSettings && p.kind != kindPartial {
			r.problems = append(r.problems, &Error{File: name, Message: "cannot read: " + f.err.Error(), err: f.err})
			continue
		}
		if p.kind == kindIgnored {
			r.ignored = append(r.ignored, name)
			continue
		}
		if p.kind == kindUnknown {
			r.problems = append(r.problems, &Error{File: name, Message: "unknown file: " + p.why, err: errUnknownFile})
			continue
		}
		var unreadable error
		if f.err != nil {
			unreadable = &Error{File: name, Message: "cannot read: " + f.err.Error(), err: f.err}
			r.problems = append(r.problems, flatten(unreadable)...)
		}
		switch {
		case p.kind == kindPrompt && unreadable != nil:
			r.prompts[rel] = &promptFile{err: unreadable}
		case p.kind == kindPrompt:
			pf := parsePrompt(name, string(f.body), base, funcs, brokenPartials)
			sum := sha256.Sum256(f.body)
			pf.hash = hex.EncodeToString(sum[:])
			if pf.err != nil {
				r.problems = append(r.problems, flatten(pf.err)...)
			}
			r.prompts[rel] = pf
		case p.kind == kindSettings && unreadable != nil:
			r.settings[rel] = &settingsFile{err: unreadable}
		case p.kind == kindSettings:
			s, err := decodeSettings(name, f.body)
			if err != nil {
				r.problems = append(r.problems, flatten(err)...)
			}
			r.settings[rel] = &settingsFile{settings: s, err: err}
		}
	}
	softenReads(r)
	sortErrors(r.problems)
	return r
}

// parsePartials parses every partial into one namespace, the base of every
// prompt's, and lists the partials that cannot be used.
func (r *repo) parsePartials(files map[string]fileData, display func(string) string, funcs template.FuncMap) (*template.Template, []string) {
	base := template.New("").Funcs(funcs)
	var broken []string
	definedBy := map[string]string{}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		f, name := files[rel], display(rel)
		if classify(rel).kind != kindPartial {
			continue
		}
		if f.err != nil {
			broken = append(broken, name) // reported with the other files
			continue
		}
		t, err := parseFile(name, string(f.body), funcs)
		if err != nil {
			r.problems = append(r.problems, flatten(err)...)
			broken = append(broken, name)
			continue
		}
		for _, d := range t.Templates() {
			if other, ok := definedBy[d.Name()]; ok && other != name && !parse.IsEmptyTree(d.Tree.Root) {
				r.problems = append(r.problems, &Error{File: name, Message: fmt.Sprintf("template %q is also defined in %s; this one is used", d.Name(), other)})
			}
			definedBy[d.Name()] = name
			if _, err := base.AddParseTree(d.Name(), d.Tree); err != nil {
				r.problems = append(r.problems, &Error{File: name, Message: err.Error(), err: err})
			}
		}
	}
	return base, broken
}

// parsePrompt parses one prompt file in a namespace of its own: the
// partials plus the file's own {{define}} blocks.
func parsePrompt(name, text string, base *template.Template, funcs template.FuncMap, brokenPartials []string) *promptFile {
	t, err := parseFile(name, text, funcs)
	if err != nil {
		return &promptFile{err: err}
	}
	ns, err := base.Clone()
	if err != nil {
		return &promptFile{err: &Error{File: name, Message: err.Error(), err: err}}
	}
	for _, d := range t.Templates() {
		if _, err := ns.AddParseTree(d.Name(), d.Tree); err != nil {
			return &promptFile{err: &Error{File: name, Message: err.Error(), err: err}}
		}
	}
	main := ns.Lookup(name)
	if errs := undefinedTemplates(main, brokenPartials); len(errs) > 0 {
		return &promptFile{err: errors.Join(errs...)}
	}
	return &promptFile{tmpl: main, size: len(text)}
}

// undefinedTemplates finds {{template "x"}} calls, from t or from what it
// calls, that name no defined template. Without this check they would
// fail only when the render reaches them.
func undefinedTemplates(t *template.Template, brokenPartials []string) []error {
	var errs []error
	seen := map[string]bool{t.Name(): true}
	queue := []*template.Template{t}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		walkNodes(cur.Tree.Root, func(n parse.Node) {
			call, ok := n.(*parse.TemplateNode)
			if !ok {
				return
			}
			if called := t.Lookup(call.Name); called != nil && called.Tree != nil {
				if !seen[call.Name] {
					seen[call.Name] = true
					queue = append(queue, called)
				}
				return
			}
			file, line := nodeLine(cur.Tree, n)
			msg := fmt.Sprintf("template %q is not defined", call.Name)
			if file := builtinPartial(call.Name); file != "" {
				msg += fmt.Sprintf(" (a partial of the built-in prompts: copy %s into this repository's partials/; in conclave's source it is templates/defaults/%s)", file, file)
			}
			if len(brokenPartials) > 0 {
				msg += fmt.Sprintf(" (partials that cannot be used: %s)", strings.Join(brokenPartials, ", "))
			}
			errs = append(errs, &Error{File: file, Line: line, Message: msg})
		})
	}
	return errs
}

// definePattern finds the {{define "name"}} blocks of a partial's text.
var definePattern = regexp.MustCompile(`\{\{-?\s*define\s+"([^"]+)"`)

// builtinPartial is the built-in partial file that defines the template
// name ("partials/members.tmpl"), for an override that calls it without
// carrying it; "" when none does. Read only on that error.
func builtinPartial(name string) string {
	entries, _ := fs.ReadDir(defaultsFS, "defaults/"+dirPartials) // embedded: cannot fail
	for _, e := range entries {
		body, err := fs.ReadFile(defaultsFS, "defaults/"+dirPartials+"/"+e.Name())
		if err != nil {
			continue
		}
		for _, m := range definePattern.FindAllStringSubmatch(string(body), -1) {
			if m[1] == name {
				return dirPartials + "/" + e.Name()
			}
		}
	}
	return ""
}

// walkNodes calls f on n and every node below it.
func walkNodes(n parse.Node, f func(parse.Node)) {
	if n == nil {
		return
	}
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		f(n)
		for _, c := range n.Nodes {
			walkNodes(c, f)
		}
		return
	case *parse.IfNode:
		f(n)
		walkBranch(&n.BranchNode, f)
		return
	case *parse.RangeNode:
		f(n)
		walkBranch(&n.BranchNode, f)
		return
	case *parse.WithNode:
		f(n)
		walkBranch(&n.BranchNode, f)
		return
	}
	f(n)
}

func walkBranch(b *parse.BranchNode, f func(parse.Node)) {
	walkNodes(b.List, f)
	if b.ElseList != nil {
		walkNodes(b.ElseList, f)
	}
}

var locationRE = regexp.MustCompile(`^(.*):(\d+):\d+$`)

// nodeLine returns the file and line of a node, as text/template computes
// them for its own errors.
func nodeLine(tree *parse.Tree, n parse.Node) (string, int) {
	loc, _ := tree.ErrorContext(n)
	m := locationRE.FindStringSubmatch(loc)
	if m == nil {
		return tree.ParseName, 0
	}
	line, _ := strconv.Atoi(m[2])
	return m[1], line
}

// flatten lists the errors joined in err.
func flatten(err error) []*Error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*Error
		for _, e := range joined.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	return []*Error{{Message: err.Error(), err: err}}
}

func sortErrors(errs []*Error) {
	slices.SortStableFunc(errs, func(a, b *Error) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Message, b.Message)
	})
}
