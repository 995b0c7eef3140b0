package templates

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// The directories of a config repository besides the role directories.
const (
	dirAll      = "all"
	dirAgents   = "agents"
	dirPartials = "partials"
)

const (
	extTemplate = ".tmpl"
	extSettings = ".toml"
)

// fileKind says what a file of the config repository is.
type fileKind int

const (
	kindUnknown  fileKind = iota
	kindPrompt            // <role>/<p>.tmpl, all/<p>.tmpl, agents/<ens>/<p>.tmpl
	kindSettings          // the same places, .toml
	kindPartial           // partials/*.tmpl
	kindIgnored           // a settings-like file outside the layout (ci.toml): not conclave's, noted by check
)

// dirTests holds a config repository's prompt tests, never prompts: it is
// not read (check notes it).
const dirTests = "tests"

// place is where a file sits in the layout.
type place struct {
	kind   fileKind
	level  string // a role, dirAll or dirAgents
	agent  string // for dirAgents
	prompt string
	why    string // for kindUnknown: what is wrong with the name
}

// allPrompts is every prompt name, in a stable order.
func allPrompts() []string {
	var out []string
	for _, r := range Roles() {
		for _, p := range Prompts(r) {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// rolesWith lists the roles that have prompt p.
func rolesWith(p string) []string {
	var out []string
	for _, r := range Roles() {
		if slices.Contains(Prompts(r), p) {
			out = append(out, r)
		}
	}
	return out
}

// classify places a slash-separated path relative to the repository root.
func classify(rel string) place {
	ext := path.Ext(rel)
	parts := strings.Split(rel, "/")
	base := strings.TrimSuffix(parts[len(parts)-1], ext)
	kind := kindPrompt
	if ext == extSettings {
		kind = kindSettings
	}
	switch {
	case len(parts) == 2 && parts[0] == dirPartials:
		if ext != extTemplate {
			return place{why: "partials hold only .tmpl files; settings go beside a prompt"}
		}
		return place{kind: kindPartial}
	case len(parts) == 2 && parts[0] == dirAll:
		if !slices.Contains(allPrompts(), base) {
			return place{why: unknownPrompt("unknown prompt", base, allPrompts())}
		}
		return place{kind: kind, level: dirAll, prompt: base}
	case len(parts) == 2 && Prompts(parts[0]) != nil:
		role := parts[0]
		if !slices.Contains(Prompts(role), base) {
			return place{why: unknownPrompt(role+" has no prompt", base, Prompts(role))}
		}
		return place{kind: kind, level: role, prompt: base}
	case len(parts) == 3 && parts[0] == dirAgents:
		agent := parts[1]
		if !strings.HasSuffix(strings.ToLower(agent), ".eth") {
			return place{why: fmt.Sprintf("agent directories are full ENS names ending in .eth, not %q", agent)}
		}
		if agent != strings.ToLower(agent) {
			return place{why: fmt.Sprintf("agent directories are lowercase ENS names; rename %q to %q", agent, strings.ToLower(agent))}
		}
		if !slices.Contains(allPrompts(), base) {
			return place{why: unknownPrompt("unknown prompt", base, allPrompts())}
		}
		return place{kind: kind, level: dirAgents, agent: agent, prompt: base}
	}
	if ext == extSettings && !isLayoutDir(parts[0]) {
		// A tool's own settings beside the prompts (ci.toml): not
		// conclave's to judge.
		return place{kind: kindIgnored, why: "not part of the layout (a prompt's settings sit beside it: <role>/<prompt>.toml)"}
	}
	return place{why: "not a place of the layout (<role>/<prompt>, all/<prompt>, agents/<ens-name>/<prompt>, partials/<name>.tmpl)"}
}

// isLayoutDir reports whether a top-level directory is one of the layout's:
// a role, all, agents or partials. A file at the top level is in none.
func isLayoutDir(name string) bool {
	return Prompts(name) != nil || name == dirAll || name == dirAgents || name == dirPartials
}

func unknownPrompt(what, name string, known []string) string {
	msg := fmt.Sprintf("%s %q; the prompts here are %s", what, name, strings.Join(known, ", "))
	if fixed := strings.ReplaceAll(strings.ToLower(name), "_", "-"); fixed != name && slices.Contains(known, fixed) {
		msg += fmt.Sprintf(" (did you mean %q?)", fixed)
	}
	return msg
}

// candidates lists the files that may hold prompt p for an agent, in
// resolution order, with the given extension.
func candidates(agent, role, prompt, ext string) []string {
	return []string{
		dirAgents + "/" + agent + "/" + prompt + ext,
		role + "/" + prompt + ext,
		dirAll + "/" + prompt + ext,
	}
}

// checkRolePrompt reports whether role has prompt.
func checkRolePrompt(role, prompt string) error {
	ps := Prompts(role)
	if ps == nil {
		return fmt.Errorf("templates: role %q has no prompts (roles with prompts: %s)", role, strings.Join(Roles(), ", "))
	}
	if !slices.Contains(ps, prompt) {
		return fmt.Errorf("templates: role %s has no prompt %q (its prompts: %s)", role, prompt, strings.Join(ps, ", "))
	}
	return nil
}
