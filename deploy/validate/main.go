// Command validate checks the deployment files offline, as CI does:
//
//   - deploy/compose.yaml with compose-go (the loader and schema that
//     `docker compose config` uses), its hardening, and that it passes
//     every variable of .env.example;
//   - deploy/kubernetes as written, as `kubectl apply -k` builds it
//     (kustomize's own Go API), and with the git-sync component added;
//   - the Helm chart deploy/helm/conclave rendered with Helm's own chart
//     loader, values schema and template engine, with its default values
//     and with git-sync, a created Secret and inline templates;
//   - the release workflow .github/workflows/release.yml;
//   - the Grafana dashboards deploy/grafana/*.json.
//
// Every Kubernetes object is decoded strictly into the Kubernetes API's own
// Go types (an unknown or misspelt field, or a wrong type, is an error) and
// then checked for what conclave needs: several replicas, probes on
// /healthz and /readyz on the operations port, a non-root read-only pod
// without a service-account token, a NetworkPolicy and a
// PodDisruptionBudget that select the pods, the Secret and ConfigMaps it
// references, and, with git-sync, a templates.dir that is git-sync's
// published link in a volume both containers mount. conclave itself then
// checks the configuration and templates the ConfigMaps carry.
//
// It is a module of its own so the Kubernetes, Compose, kustomize and Helm
// libraries stay out of conclave's go.mod. Run it from this directory with
// the repository root as its argument:
//
//	(cd deploy/validate && go run . ../..)
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	problems := validate(root)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Println("deploy: compose.yaml, kubernetes/ (and its git-sync component), the Helm chart, the Grafana dashboard and the release workflow are valid")
}

// validate runs every check on the repository at root.
func validate(root string) []string {
	compose := filepath.Join(root, "deploy", "compose.yaml")
	problems := checkCompose(compose)
	problems = append(problems, checkComposeEnv(compose, filepath.Join(root, ".env.example"))...)
	problems = append(problems, checkDashboards(root)...)
	problems = append(problems, checkRelease(filepath.Join(root, ".github", "workflows", "release.yml"))...)
	bundles, more := kubernetesBundles(root)
	problems = append(problems, more...)
	if len(problems) > 0 {
		return problems
	}
	for _, b := range bundles {
		problems = append(problems, b.check()...)
	}
	if len(problems) > 0 {
		return problems
	}
	conclave, cleanup, err := buildConclave(root)
	if err != nil {
		return []string{err.Error()}
	}
	defer cleanup()
	for _, b := range bundles {
		problems = append(problems, b.checkContents(conclave)...)
	}
	return problems
}

// checkDashboards checks every dashboard of deploy/grafana.
func checkDashboards(root string) []string {
	files, err := filepath.Glob(filepath.Join(root, "deploy", "grafana", "*.json"))
	if err != nil || len(files) == 0 {
		return []string{fmt.Sprintf("deploy/grafana: no dashboards (%v)", err)}
	}
	known, err := knownMetrics(root)
	if err != nil {
		return []string{fmt.Sprintf("metrics conclave exports: %v", err)}
	}
	var problems []string
	for _, f := range files {
		problems = append(problems, checkDashboard(f, known)...)
	}
	return problems
}

// kubernetesBundles loads every set of Kubernetes objects this repository
// ships: the manifests as written, as kustomize builds them (alone and
// with the git-sync component), and the Helm chart rendered with the
// values sets of chartCases.
func kubernetesBundles(root string) ([]*bundle, []string) {
	var bundles []*bundle
	var problems []string
	add := func(b *bundle, errs []string) {
		problems = append(problems, errs...)
		if b != nil {
			bundles = append(bundles, b)
		}
	}
	dir := filepath.Join(root, "deploy", "kubernetes")
	add(loadManifests(dir))
	add(kustomizeBase(dir))
	add(kustomizeGitSync(dir))
	chart := filepath.Join(root, "deploy", "helm", "conclave")
	problems = append(problems, lintChart(chart)...)
	for _, c := range chartCases {
		add(renderChart(chart, c))
	}
	metrics, err := knownMetrics(root)
	if err != nil {
		problems = append(problems, fmt.Sprintf("metrics conclave exports: %v", err))
	}
	for _, b := range bundles {
		b.metrics = metrics
	}
	return bundles, problems
}
