package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// buildConclave builds conclave from the repository at root into a
// temporary folder; cleanup removes it.
func buildConclave(root string) (bin string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "conclave-bin-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(tmp, "conclave")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/conclave") // #nosec G204 -- a fixed build of the repository's own command
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("go build ./cmd/conclave: %v\n%s", err, out)
	}
	return bin, func() { _ = os.RemoveAll(tmp) }, nil
}

// checkContents writes the configuration and the templates that the
// Deployment mounts from ConfigMaps into a folder laid out as in the pod,
// and has conclave itself check them: `config print` loads and validates
// the configuration (with the container's own CONCLAVE_ variables), and
// `templates check` the templates, when there are any.
func (b *bundle) checkContents(conclave string) []string {
	d := b.deployments[0]
	c := container(d.Spec.Template.Spec, conclaveContainer)
	tmp, err := os.MkdirTemp("", "conclave-deploy-")
	if err != nil {
		return []string{err.Error()}
	}
	defer os.RemoveAll(tmp)
	var problems []string
	templates := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := b.configMaps[v.ConfigMap.Name]
		for _, item := range v.ConfigMap.Items {
			templates = true
			path := filepath.Join(tmp, "templates", filepath.FromSlash(item.Path))
			err := os.MkdirAll(filepath.Dir(path), 0o750)
			if err == nil {
				err = os.WriteFile(path, []byte(cm.Data[item.Key]), 0o600)
			}
			if err != nil {
				problems = append(problems, err.Error())
			}
		}
		if config, ok := cm.Data["config.toml"]; ok {
			if err := os.WriteFile(filepath.Join(tmp, "config.toml"), []byte(config), 0o600); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	runs := [][]string{{"config", "print", "--config", filepath.Join(tmp, "config.toml")}}
	if templates {
		runs = append(runs, []string{"templates", "check", "--dir", filepath.Join(tmp, "templates")})
	}
	for _, args := range runs {
		cmd := exec.Command(conclave, args...) // #nosec G204 -- fixed sub-commands on files this program wrote
		cmd.Dir = tmp
		cmd.Env = podEnv(*c)
		if out, err := cmd.CombinedOutput(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: conclave %s: %v\n%s", b.source, strings.Join(args[:2], " "), err, out))
		}
	}
	return problems
}

// podEnv is the environment conclave is checked with: none of this
// process's CONCLAVE_ variables, the container's literal ones instead
// (but templates.dir, which names a path of the pod; checkGitSync checks
// it).
func podEnv(c corev1.Container) []string {
	var vars []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCLAVE_") {
			vars = append(vars, kv)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil && e.Name != "CONCLAVE_TEMPLATES_DIR" {
			vars = append(vars, e.Name+"="+e.Value)
		}
	}
	return vars
}
