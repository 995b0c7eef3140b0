package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
)

// templatesDirUsage is the one description of --dir that templates check,
// render, test and init share.
const templatesDirUsage = "the config repository of prompts (default: templates.dir of the configuration)"

// templatesDir is the config repository a templates command works on:
// --dir when given, else the configuration's templates.dir.
func templatesDir(cfg Config, flagDir string) TemplatesConfig {
	if flagDir != "" {
		return TemplatesConfig{Dir: flagDir, SetBy: "--dir", Explicit: true}
	}
	return cfg.Templates
}

// existingTemplatesDir is tc's directory when it is one: a missing
// directory is named in the error, with where it came from.
func existingTemplatesDir(tc TemplatesConfig) (string, error) {
	from := "templates.dir"
	if tc.SetBy != "" {
		from = tc.SetBy
	}
	info, err := os.Stat(tc.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("templates: %s names %q, which does not exist (create it with `conclave templates init %s`)", from, tc.Dir, tc.Dir)
	case err != nil:
		return "", fmt.Errorf("templates: %s: %w", from, err)
	case !info.IsDir():
		return "", fmt.Errorf("templates: %s names %q, which is not a directory", from, tc.Dir)
	}
	return tc.Dir, nil
}

// dirOrArgument is --dir, or the one argument after the flags that
// templates test took before --dir (still accepted); both is an error.
func dirOrArgument(flagDir, arg string) (string, error) {
	if flagDir != "" && arg != "" {
		return "", fmt.Errorf("%w: give the directory once: --dir %s or %s", errUsage, flagDir, arg)
	}
	if flagDir == "" {
		return arg, nil
	}
	return flagDir, nil
}

// dirFlags is the flag set of a templates command that takes the
// directory as --dir or as the argument after the flags (note, shown
// under the usage, says how), with the configuration's flags: load reads
// the configuration once they are parsed.
func dirFlags(name, note string, e env) (fset *flag.FlagSet, load func() (Config, []string, error), dir *string) {
	fset = newFlags(name, e)
	usage := fset.Usage
	fset.Usage = func() {
		usage()
		fmt.Fprintln(fset.Output(), "\n"+note)
	}
	load = configFlag(fset, e)
	return fset, load, fset.String("dir", "", templatesDirUsage)
}
