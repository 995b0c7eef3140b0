package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"

	"github.com/conclavehq/conclave/templates"
)

// templatesInFile applies what the configuration file at path says of
// templates.dir: a relative directory is relative to the file's folder,
// so a configuration works from any working directory.
func templatesInFile(path string, data []byte, tc TemplatesConfig) TemplatesConfig {
	var doc struct {
		Templates struct {
			Dir *string `toml:"dir"`
		} `toml:"templates"`
	}
	if toml.Unmarshal(data, &doc) != nil || doc.Templates.Dir == nil {
		return tc // decodeConfig has read the file; a failure here is none of ours
	}
	tc.Dir, tc.SetBy, tc.Explicit = *doc.Templates.Dir, path, false
	if tc.Dir != "" && !filepath.IsAbs(tc.Dir) {
		tc.Dir = filepath.Join(filepath.Dir(path), tc.Dir)
	}
	return tc
}

// openConfiguredTemplates opens the prompts templates.dir names. The
// default directory may be missing, or be the Go package of the built-in
// prompts in a checkout: the built-in prompts are used and note is told
// at info level. A directory the configuration names is expected:
// missing, it is an error (a misspelt directory would otherwise quietly
// serve the built-in prompts); holding Go source, a warning from a file
// (and the built-in prompts), an error from a variable or a flag.
func openConfiguredTemplates(tc TemplatesConfig, opts templates.Options, note func(level slog.Level, msg string)) (*templates.Library, string, error) {
	problem := ""
	switch _, err := os.Stat(tc.Dir); {
	case tc.SetBy == "" || tc.Dir == "":
	case errors.Is(err, fs.ErrNotExist):
		problem = "does not exist"
	case isGoSource(tc.Dir):
		problem = "holds Go source, not a config repository of prompts"
	}
	switch {
	case problem == "does not exist" && !tc.Explicit:
		return nil, "", fmt.Errorf("templates: templates.dir in %s names %q, which does not exist (create it with `conclave templates init %s`, or remove the key for the built-in prompts)", tc.SetBy, tc.Dir, tc.Dir)
	case problem != "" && tc.Explicit:
		return nil, "", fmt.Errorf("templates: %s names %q, which %s", tc.SetBy, tc.Dir, problem)
	case problem != "":
		note(slog.LevelWarn, fmt.Sprintf("templates: templates.dir in %s names %q, which %s; using the built-in prompts", tc.SetBy, tc.Dir, problem))
		tc.Dir = ""
	}
	return openTemplates(tc.Dir, opts, func(msg string) { note(slog.LevelInfo, msg) })
}
