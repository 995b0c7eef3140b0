package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizeBase builds deploy/kubernetes as `kubectl apply -k` does.
func kustomizeBase(dir string) (*bundle, []string) {
	return kustomize(dir, "kustomize build "+dir, false)
}

// gitSyncComponent is the component's folder under deploy/kubernetes.
const gitSyncComponent = "components/git-sync"

// gitSyncOverlay is an overlay as docs/operations.md shows it: the base,
// the git-sync component, and the repository to sync.
const gitSyncOverlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%q]
components: [%q]
configMapGenerator:
  - name: conclave-git-sync
    literals: [GITSYNC_REPO=https://git.example/acme/conclave-prompts, GITSYNC_REF=main, GITSYNC_PERIOD=30s]
`

// kustomizeGitSync builds an overlay of deploy/kubernetes with the git-sync
// component, written to a temporary folder.
func kustomizeGitSync(dir string) (*bundle, []string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, []string{err.Error()}
	}
	overlay, err := os.MkdirTemp("", "conclave-overlay-")
	if err != nil {
		return nil, []string{err.Error()}
	}
	defer os.RemoveAll(overlay)
	// kustomize takes relative paths only.
	base, err := filepath.Rel(overlay, abs)
	if err != nil {
		return nil, []string{err.Error()}
	}
	body := fmt.Sprintf(gitSyncOverlay, filepath.ToSlash(base), path.Join(filepath.ToSlash(base), gitSyncComponent))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(body), 0o600); err != nil {
		return nil, []string{err.Error()}
	}
	return kustomize(overlay, "kustomize build of "+path.Join(filepath.ToSlash(dir), gitSyncComponent), true)
}

// kustomize builds the kustomization in dir with kustomize's Go API and
// decodes the result.
func kustomize(dir, source string, gitSync bool) (*bundle, []string) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", source, err)}
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", source, err)}
	}
	b := newBundle(source)
	b.gitSync = gitSync
	return b, b.decodeAll(source, out)
}

// chartCase is one set of values the chart is rendered with.
type chartCase struct {
	name   string
	values string // YAML, over the chart's values.yaml
	// gitSync, externalSecret, monitoring and ingress are what the
	// rendering should have.
	gitSync             bool
	externalSecret      string
	monitoring, ingress bool
}

// chartCases are the values sets CI renders: the defaults (with the Secret
// the operator creates), templates from git, the chart creating the
// Secret with inline templates, and everything optional turned on with a
// model, an OTLP collector and Redis Sentinel inside the cluster.
var chartCases = []chartCase{
	{name: "default values", externalSecret: "conclave"},
	{
		name:           "git-sync",
		externalSecret: "conclave-tokens",
		gitSync:        true,
		values: `
secret: {existingSecret: conclave-tokens}
redis: {url: "redis://redis.conclave:6379/0"}
gitSync:
  enabled: true
  repo: https://git.example/acme/conclave-prompts
  subPath: prompts
  credentialsSecret: git-token
`,
	},
	{
		name: "created Secret, inline templates",
		values: `
secret:
  create: true
  values: {SLACK_APP_TOKEN: xapp-test, SLACK_BOT_TOKEN: xoxb-test, OPENAI_API_KEY: sk-test}
templates:
  facilitator/default.tmpl: |
    You run this channel's conversations.
  expert/system.tmpl: |
    You answer for {{.Agent.Name}}.
`,
	},
	{
		name:           "metrics, ingress, in-cluster endpoints",
		externalSecret: "conclave",
		monitoring:     true,
		ingress:        true,
		values: `
config: |
  [llm]
  base_url = "http://ollama.models:11434/v1"
  [memory]
  redis_url = "redis+sentinel://sentinel.redis:26379/0?master_name=conclave&addr=sentinel-1.redis:26379"
  [otel]
  endpoint = "http://collector.monitoring:4318"
networkPolicy:
  opsFrom:
    - podSelector: {}
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
  egress:
    redis: {ports: [6379, 26379], cidrs: [10.0.0.0/8]}
    model: {ports: [11434], cidrs: [10.0.0.0/8, "fd00::/8"]}
    otel: {ports: [4318], cidrs: []}
ingress: {enabled: true, className: nginx, host: conclave.example.com, tlsSecret: conclave-tls}
metrics:
  serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}}
  prometheusRule: {enabled: true}
`,
	},
}

// releaseName is the release every rendering is installed as.
const releaseName = "conclave"

// renderChart renders the chart in dir as `helm install` would: Helm's
// loader, its values schema check and its template engine, in strict mode
// (a template reading a value that is not there fails).
func renderChart(dir string, c chartCase) (*bundle, []string) {
	source := fmt.Sprintf("helm template %s (%s)", dir, c.name)
	files, err := render(dir, c.values)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", source, err)}
	}
	b := newBundle(source)
	b.gitSync, b.externalSecret = c.gitSync, c.externalSecret
	b.monitoring, b.ingress = c.monitoring, c.ingress
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if path.Ext(name) != ".yaml" {
			continue // NOTES.txt and the helpers
		}
		problems = append(problems, b.decodeAll(source+": "+name, []byte(files[name]))...)
	}
	return b, problems
}

// render renders the chart in dir over values (YAML).
func render(dir, values string) (map[string]string, error) {
	chrt, err := loader.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	var overrides map[string]any
	if err := yaml.Unmarshal([]byte(values), &overrides); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	opts := common.ReleaseOptions{Name: releaseName, Namespace: "conclave", Revision: 1, IsInstall: true}
	vals, err := util.ToRenderValuesWithSchemaValidation(chrt, overrides, opts, common.DefaultCapabilities, false)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.RenderWithContext(context.Background(), chrt, vals)
}

// lintChart runs Helm's chart linter (`helm lint`) with the default
// values; a warning fails as an error does.
func lintChart(dir string) []string {
	var problems []string
	for _, m := range lint.RunAll(dir, nil, "conclave").Messages {
		if m.Severity >= support.WarningSev {
			problems = append(problems, fmt.Sprintf("helm lint %s: %s", dir, strings.TrimSpace(m.Error())))
		}
	}
	return problems
}
