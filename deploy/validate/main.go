// Command validate checks the deployment files offline, as CI does:
// deploy/compose.yaml with compose-go (the loader and schema that
// `docker compose config` uses), and every object of deploy/kubernetes
// decoded strictly into the Kubernetes API's own Go types (an unknown or
// misspelt field, or a wrong type, is an error), then checked for what
// conclave needs: several replicas, probes on /healthz and /readyz, the
// Secret and ConfigMaps it references; conclave itself checks the
// configuration and templates those ConfigMaps carry.
//
// It is a module of its own so the Kubernetes and Compose libraries stay
// out of conclave's go.mod. Run it from the repository root:
//
//	(cd deploy/validate && go run . ../..)
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	var problems []string
	for _, check := range []func(string) []string{checkCompose, checkKubernetes} {
		problems = append(problems, check(root)...)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Println("deploy: compose.yaml and kubernetes/ are valid")
}

// checkCompose loads compose.yaml as `docker compose config` does (schema
// validation, interpolation, normalisation) and checks Redis keeps an
// append-only file.
func checkCompose(root string) []string {
	path := filepath.Join(root, "deploy", "compose.yaml")
	opts, err := cli.NewProjectOptions([]string{path}, cli.WithOsEnv, cli.WithName("conclave"))
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	var problems []string
	redis, ok := project.Services["redis"]
	if !ok || !strings.Contains(strings.Join(redis.Command, " "), "--appendonly yes") {
		problems = append(problems, path+": the redis service must run with --appendonly yes")
	}
	conclave, ok := project.Services["conclave"]
	if !ok {
		return append(problems, path+": no conclave service")
	}
	if _, ok := conclave.DependsOn["redis"]; !ok {
		problems = append(problems, path+": conclave must depend on redis")
	}
	if v := conclave.Environment["CONCLAVE_MEMORY_REDIS_URL"]; v == nil || !strings.HasPrefix(*v, "redis://redis:") {
		problems = append(problems, path+": conclave must use the redis service (CONCLAVE_MEMORY_REDIS_URL)")
	}
	return problems
}

// objects are the decoded Kubernetes objects, by kind and name.
type objects struct {
	deployments []appsv1.Deployment
	secrets     map[string]bool
	configMaps  map[string]corev1.ConfigMap
}

// checkKubernetes decodes every document of deploy/kubernetes/*.yaml
// strictly into its API type and checks the Deployment.
func checkKubernetes(root string) []string {
	dir := filepath.Join(root, "deploy", "kubernetes")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return []string{fmt.Sprintf("%s: no manifests (%v)", dir, err)}
	}
	var problems []string
	objs := objects{secrets: map[string]bool{}, configMaps: map[string]corev1.ConfigMap{}}
	for _, f := range files {
		data, err := os.ReadFile(f) // #nosec G304 G703 -- the repository's own manifests, found by a fixed glob
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			if err := objs.decode(doc); err != nil {
				problems = append(problems, fmt.Sprintf("%s: document %d: %v", f, i+1, err))
			}
		}
	}
	if len(objs.deployments) != 1 {
		return append(problems, fmt.Sprintf("%s: want one Deployment, found %d", dir, len(objs.deployments)))
	}
	return append(problems, objs.checkDeployment(dir, objs.deployments[0])...)
}

// decode decodes one YAML document into the type its kind names.
func (o *objects) decode(doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	switch head.APIVersion + "/" + head.Kind {
	case "apps/v1/Deployment":
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(doc, &d); err != nil {
			return err
		}
		o.deployments = append(o.deployments, d)
	case "v1/Secret":
		var s corev1.Secret
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			return err
		}
		o.secrets[s.Name] = true
	case "v1/ConfigMap":
		var c corev1.ConfigMap
		if err := yaml.UnmarshalStrict(doc, &c); err != nil {
			return err
		}
		o.configMaps[c.Name] = c
	case "v1/Service":
		return yaml.UnmarshalStrict(doc, &corev1.Service{})
	case "policy/v1/PodDisruptionBudget":
		return yaml.UnmarshalStrict(doc, &policyv1.PodDisruptionBudget{})
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		return nil // checked by kubectl; it only lists the files above
	default:
		return fmt.Errorf("unexpected kind %s %s", head.APIVersion, head.Kind)
	}
	return nil
}

// checkDeployment checks what conclave needs of its Deployment.
func (o *objects) checkDeployment(dir string, d appsv1.Deployment) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: Deployment %s: ", dir, d.Name)+fmt.Sprintf(format, args...))
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		bad("want several replicas")
	}
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		bad("want one container")
		return problems
	}
	c := spec.Containers[0]
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			bad("%s probe must GET %s", what, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil && !o.secrets[ef.SecretRef.Name] {
			bad("envFrom names Secret %q, which is not defined", ef.SecretRef.Name)
		}
	}
	if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil }) {
		bad("the tokens must come from a Secret (envFrom)")
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm, ok := o.configMaps[v.ConfigMap.Name]
		if !ok {
			bad("volume %s names ConfigMap %q, which is not defined", v.Name, v.ConfigMap.Name)
			continue
		}
		for _, item := range v.ConfigMap.Items {
			if _, ok := cm.Data[item.Key]; !ok {
				bad("volume %s maps key %q, which ConfigMap %s does not have", v.Name, item.Key, cm.Name)
			}
		}
	}
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
		bad("must run as non-root")
	}
	problems = append(problems, o.checkContents(dir, spec.Volumes)...)
	if len(problems) == 0 && d.Spec.Template.Labels["app.kubernetes.io/name"] != d.Spec.Selector.MatchLabels["app.kubernetes.io/name"] {
		problems = append(problems, errors.New("the selector does not match the pod labels").Error())
	}
	return problems
}

// checkContents writes the configuration and the templates that the
// Deployment mounts from ConfigMaps into a directory laid out as in the
// pod, and has conclave itself check them: `config print` loads and
// validates the configuration, `templates check` the repository.
func (o *objects) checkContents(dir string, volumes []corev1.Volume) []string {
	tmp, err := os.MkdirTemp("", "conclave-deploy-")
	if err != nil {
		return []string{err.Error()}
	}
	defer os.RemoveAll(tmp)
	var problems []string
	for _, v := range volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := o.configMaps[v.ConfigMap.Name]
		for _, item := range v.ConfigMap.Items {
			path := filepath.Join(tmp, "templates", filepath.FromSlash(item.Path))
			if err := os.MkdirAll(filepath.Dir(path), 0o750); err == nil {
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
	root := filepath.Join(dir, "..", "..")
	for _, args := range [][]string{
		{"config", "print", "--config", filepath.Join(tmp, "config.toml")},
		{"templates", "check", "--dir", filepath.Join(tmp, "templates")},
	} {
		cmd := exec.Command("go", append([]string{"run", "./cmd/conclave"}, args...)...) // #nosec G204 -- fixed sub-commands on files this program wrote
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: conclave %s: %v\n%s", dir, strings.Join(args[:2], " "), err, out))
		}
	}
	return problems
}
