package templates

import (
	"strings"
)

// Set is one loaded version of the prompts: the config repository as it
// was read, over the built-in defaults. A Set never changes, so a turn
// that started with it renders with it to the end, whatever reloads
// happen meanwhile. It is safe for concurrent use.
type Set struct {
	files   map[string]fileData // as read, to tell whether the repository changed
	repo    *repo
	builtin *repo
	commit  string // the config repository's commit when it is a git work tree
}

// Commit is the commit of the git work tree the prompts were read from
// (RepoCommit of the templates directory, at the load); "" when the
// directory is in no work tree or for the built-in prompts alone.
func (s *Set) Commit() string { return s.commit }

// Render renders prompt for the agent named agentENS (a normalised ENS
// name) of the given role (facilitator, expert or clone).
//
// The template is the first that exists of agents/<agentENS>/<prompt>.tmpl,
// <role>/<prompt>.tmpl, all/<prompt>.tmpl and the built-in default. A file
// that exists but cannot be used fails the render; it is never skipped in
// favour of a lower level. Errors in a template, including an agent-only
// field read on a person and an output of nothing but white space, are
// *Error values naming the file and line. A role without prompts (human)
// or a prompt the role does not have is an error too.
func (s *Set) Render(agentENS, role, prompt string, d Data) (string, error) {
	pf, err := s.resolve(agentENS, role, prompt)
	if err != nil {
		return "", err
	}
	if pf.err != nil {
		return "", pf.err
	}
	out, err := execute(pf.tmpl, pf.sizeHint(), &d)
	if err == nil {
		pf.rendered.Store(int64(len(out)))
	}
	return out, err
}

// Settings returns the settings of prompt for an agent: the .toml files
// beside agents/<agentENS>/<prompt>.tmpl, <role>/<prompt>.tmpl and
// all/<prompt>.tmpl merged key by key in that order (a key set at a
// higher level wins), over the built-in settings of the prompt. Any of
// those files being broken is an error naming it. The LLM profile level is
// left to the caller.
func (s *Set) Settings(agentENS, role, prompt string) (Settings, error) {
	if err := checkRolePrompt(role, prompt); err != nil {
		return Settings{}, err
	}
	var merged Settings
	for _, rel := range candidates(strings.ToLower(agentENS), role, prompt, extSettings) {
		sf, ok := s.repo.settings[rel]
		if !ok {
			continue
		}
		if sf.err != nil {
			return Settings{}, sf.err
		}
		merged = merged.merge(sf.settings)
	}
	if sf, ok := s.builtin.settings[role+"/"+prompt+extSettings]; ok {
		merged = merged.merge(sf.settings)
	}
	return merged, nil
}

// Problems lists what is wrong in the repository as loaded: files that
// fail to parse or decode, unreadable files and file names outside the
// layout. Prompts that do not use a broken file keep working.
func (s *Set) Problems() []*Error {
	return append([]*Error(nil), s.repo.problems...)
}

// Source names the template Render uses for a prompt: its path in the
// config repository and the SHA-256 of its content (hex), or "built-in"
// and "" when the built-in default serves it. Partials it includes are
// not named.
func (s *Set) Source(agentENS, role, prompt string) (file, hash string) {
	for _, rel := range candidates(strings.ToLower(agentENS), role, prompt, extTemplate) {
		if pf, ok := s.repo.prompts[rel]; ok {
			return rel, pf.hash
		}
	}
	return BuiltinSource, ""
}

// BuiltinSource is what Source names a built-in default.
const BuiltinSource = "built-in"

func (s *Set) resolve(agentENS, role, prompt string) (*promptFile, error) {
	if err := checkRolePrompt(role, prompt); err != nil {
		return nil, err
	}
	for _, rel := range candidates(strings.ToLower(agentENS), role, prompt, extTemplate) {
		if pf, ok := s.repo.prompts[rel]; ok {
			return pf, nil
		}
	}
	return s.builtin.prompts[role+"/"+prompt+extTemplate], nil
}
