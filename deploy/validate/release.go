package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// workflow is the part of a GitHub Actions workflow checkRelease reads.
type workflow struct {
	// On is the trigger; YAML 1.1 reads an unquoted `on` key as true,
	// so it is looked up under both names.
	On   map[string]any `json:"on"`
	True map[string]any `json:"true"`
	Jobs map[string]struct {
		Permissions map[string]string `json:"permissions"`
		Steps       []struct {
			Uses string         `json:"uses"`
			With map[string]any `json:"with"`
		} `json:"steps"`
	} `json:"jobs"`
}

// releasePlatforms are the image's platforms.
var releasePlatforms = []string{"linux/amd64", "linux/arm64"}

// checkRelease checks the release workflow builds and pushes the image to
// ghcr.io for both platforms on a v* tag, with the version and commit the
// Dockerfile takes as build arguments, and every action pinned to a
// commit (checkPins). It cannot run here; this is what can be known of it
// without GitHub.
func checkRelease(path string) []string {
	data, err := os.ReadFile(path) // #nosec G304 G703 -- the repository's own workflow, at a fixed path
	if err != nil {
		return []string{err.Error()}
	}
	var w workflow
	if err := yaml.Unmarshal(data, &w); err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	checkPins(string(data), bad)
	checkReleaseTrigger(w, bad)
	steps := releaseSteps(w)
	checkReleaseOrder(steps, bad)
	if !steps.packages {
		bad("the job needs permissions: packages: write to push to ghcr.io")
	}
	if steps.login != nil && steps.login["registry"] != "ghcr.io" {
		bad("docker/login-action must log in to ghcr.io")
	}
	if steps.build != nil {
		checkReleaseBuild(steps.build, bad)
	}
	return problems
}

// checkReleaseTrigger checks the workflow runs on pushed v* tags and on
// nothing else.
func checkReleaseTrigger(w workflow, bad func(string, ...any)) {
	on := w.On
	if on == nil {
		on = w.True
	}
	push, _ := on["push"].(map[string]any)
	tags, _ := push["tags"].([]any)
	if !slices.Contains(tags, any("v*")) {
		bad("must run on pushed tags v* (on.push.tags)")
	}
	if _, ok := push["branches"]; ok {
		bad("must run on tags only, not on branches")
	}
}

// workflowSteps is what checkRelease reads from a workflow's jobs: the
// actions its steps use, in order, the settings of its login and
// build-push steps, and whether a job may write packages.
type workflowSteps struct {
	actions      []string
	build, login map[string]any
	packages     bool
}

// releaseSteps gathers the workflowSteps of w.
func releaseSteps(w workflow) workflowSteps {
	var s workflowSteps
	for _, job := range w.Jobs {
		if job.Permissions["packages"] == "write" {
			s.packages = true
		}
		for _, step := range job.Steps {
			action, _, _ := strings.Cut(step.Uses, "@")
			s.actions = append(s.actions, action)
			switch action {
			case "docker/build-push-action":
				s.build = step.With
			case "docker/login-action":
				s.login = step.With
			}
		}
	}
	return s
}

// checkReleaseOrder checks the steps set up QEMU and buildx, log in, then
// build and push, in that order.
func checkReleaseOrder(steps workflowSteps, bad func(string, ...any)) {
	order := []string{"docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action", "docker/build-push-action"}
	at := -1
	for _, action := range order {
		i := slices.Index(steps.actions, action)
		if i < 0 {
			bad("no %s step", action)
			continue
		}
		if i < at {
			bad("%s must come after the steps before it (%s)", action, strings.Join(order, ", "))
		}
		at = i
	}
}

// checkReleaseBuild checks the build-push step's settings: both platforms,
// a push, and the build arguments the Dockerfile takes.
func checkReleaseBuild(build map[string]any, bad func(string, ...any)) {
	platforms := strings.Split(fmt.Sprint(build["platforms"]), ",")
	for i := range platforms {
		platforms[i] = strings.TrimSpace(platforms[i])
	}
	for _, p := range releasePlatforms {
		if !slices.Contains(platforms, p) {
			bad("docker/build-push-action must build for %s (platforms)", p)
		}
	}
	if build["push"] != true {
		bad("docker/build-push-action must push the image (push: true)")
	}
	args := fmt.Sprint(build["build-args"])
	for _, arg := range []string{"VERSION=", "COMMIT="} {
		if !strings.Contains(args, arg) {
			bad("docker/build-push-action must pass the build argument %s… the Dockerfile takes", arg)
		}
	}
}

// usesLine is a step's `uses:` line: the action, its ref and the comment.
var usesLine = regexp.MustCompile(`^\s*(?:-\s+)?uses:\s*(\S+?)@(\S+)\s*(#.*)?$`)

// pinnedRef is a full commit SHA; releaseComment names the release it is.
var (
	pinnedRef      = regexp.MustCompile(`^[0-9a-f]{40}$`)
	releaseComment = regexp.MustCompile(`^#\s*v[0-9]+(\.[0-9]+)*\s*$`)
)

// checkPins checks every action the workflow uses is pinned to a full
// commit SHA (a tag can be moved to other code; the commit cannot),
// followed by its release as a comment (# v4.2.0) so that people can read
// and update it. A local action (./…) is the repository's own.
func checkPins(text string, bad func(string, ...any)) {
	for i, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, "uses:") || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		m := usesLine.FindStringSubmatch(line)
		switch {
		case m == nil && strings.Contains(line, "./"):
		case m == nil:
			bad("line %d: %s is not pinned to a commit (action@<40-hex SHA> # vX.Y.Z)", i+1, strings.TrimSpace(line))
		case !pinnedRef.MatchString(m[2]):
			bad("line %d: %s@%s is not pinned to a commit; use the full SHA of its release's tag", i+1, m[1], m[2])
		case !releaseComment.MatchString(m[3]):
			bad("line %d: %s@%s needs its release as a comment (# vX.Y.Z)", i+1, m[1], m[2])
		}
	}
}
