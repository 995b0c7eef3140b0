package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const repoRoot = "../.."

// TestRepositoryFiles: the files as committed pass every check but
// conclave's own (which `go run .` adds).
func TestRepositoryFiles(t *testing.T) {
	compose := filepath.Join(repoRoot, "deploy", "compose.yaml")
	problems := checkCompose(compose)
	problems = append(problems, checkComposeEnv(compose, filepath.Join(repoRoot, ".env.example"))...)
	problems = append(problems, checkDashboards(repoRoot)...)
	problems = append(problems, checkRelease(filepath.Join(repoRoot, ".github", "workflows", "release.yml"))...)
	bundles, more := kubernetesBundles(repoRoot)
	problems = append(problems, more...)
	for _, b := range bundles {
		problems = append(problems, b.check()...)
	}
	if len(problems) > 0 {
		t.Fatalf("problems:\n%s", strings.Join(problems, "\n"))
	}
	// The manifests, their kustomize build and its git-sync overlay, and
	// each chart case.
	if want := 3 + len(chartCases); len(bundles) != want {
		t.Errorf("%d sets of objects checked, want %d", len(bundles), want)
	}
}

// edited writes a copy of the repository file rel, with each old string
// replaced by its new one, into a temporary folder and returns its path.
func edited(t *testing.T, rel string, pairs ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(text, pairs[i]) {
			t.Fatalf("%s has no %q", rel, pairs[i])
		}
		text = strings.Replace(text, pairs[i], pairs[i+1], 1)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(rel))
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantProblem fails unless one of problems contains want.
func wantProblem(t *testing.T, problems []string, want string) {
	t.Helper()
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("no problem says %q; got:\n%s", want, strings.Join(problems, "\n"))
	}
}

func TestComposeHardening(t *testing.T) {
	tests := []struct {
		name  string
		pairs []string
		want  string
	}{
		{"writable root", []string{"read_only: true", "read_only: false"}, "conclave must run with read_only: true"},
		{"no tmpfs", []string{"    tmpfs:\n      - /tmp:size=16m,mode=1777\n", ""}, "conclave needs a tmpfs"},
		{"capabilities kept", []string{"cap_drop: [ALL]", "cap_drop: [NET_RAW]"}, "must drop every capability"},
		{"privileges may grow", []string{`security_opt: ["no-new-privileges:true"]`, "security_opt: []"}, "no-new-privileges:true"},
		{"ops port published", []string{`- "8080:8080"   # the wallet page only`, `- "8080:8080"
      - "9090:9090"`}, "publishes its operations port 9090 on the host"},
		{"no ops listener", []string{`CONCLAVE_HTTP_OPS_ADDR: ":9090"`, `CONCLAVE_LOG_LEVEL: info`}, "an operations listener of their own"},
		{"public port not published", []string{`- "8080:8080"   # the wallet page only`, `- "8081:8081"`}, "must publish its public listener (port 8080"},
		{"redis forgets", []string{`"--appendonly", "yes"`, `"--appendonly", "no"`}, "--appendonly yes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, checkCompose(edited(t, "deploy/compose.yaml", tt.pairs...)), tt.want)
		})
	}
}

// TestComposeEnvironment: a variable .env.example lists that compose does
// not pass to conclave is named.
func TestComposeEnvironment(t *testing.T) {
	envExample := filepath.Join(repoRoot, ".env.example")
	t.Run("dropped", func(t *testing.T) {
		compose := edited(t, "deploy/compose.yaml", "      OPENAI_BASE_URL: ${OPENAI_BASE_URL:-}\n", "")
		wantProblem(t, checkComposeEnv(compose, envExample), "conclave does not get OPENAI_BASE_URL, which .env.example lists")
	})
	t.Run("a new variable", func(t *testing.T) {
		example := edited(t, ".env.example", "CRM_TOKEN=", "ACME_TOKEN=\nCRM_TOKEN=")
		wantProblem(t, checkComposeEnv(filepath.Join(repoRoot, "deploy", "compose.yaml"), example), "conclave does not get ACME_TOKEN")
	})
	t.Run("build argument", func(t *testing.T) {
		compose := edited(t, "deploy/compose.yaml", "COMMIT: ${CONCLAVE_COMMIT:-unknown}", "COMMIT: unknown")
		wantProblem(t, checkComposeEnv(compose, envExample), "conclave does not get CONCLAVE_COMMIT")
	})
}

func TestDashboard(t *testing.T) {
	known, err := knownMetrics(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	const dash = "deploy/grafana/conclave.json"
	tests := []struct {
		name  string
		pairs []string
		want  string
	}{
		{"misspelt key", []string{`"targets": [`, `"target": [`}, `unknown field "target"`},
		{"not JSON", []string{`"panels": [`, `"panels": [,`}, "invalid character"},
		{"unknown series", []string{"conclave_posts_pending", "conclave_posts_waiting"}, "reads conclave_posts_waiting, which conclave does not export"},
		{"every job", []string{`max(conclave_template_problems{namespace=~\"$namespace\", job=~\"$job\"})`, `max(conclave_template_problems)`}, `reads conclave_template_problems without job=~"$job"`},
		{"unbalanced", []string{`sum(up{`, `sum((up{`}, "its brackets do not pair up"},
		{"fixed data source", []string{`"uid": "${datasource}"`, `"uid": "prom-1"`}, "must query ${datasource}"},
		{"no budget panel", []string{`"expr": "max by (scope) (conclave_budget_used_ratio`, `"expr": "max by (scope) (conclave_posts_pending`}, "no panel shows conclave_budget_used_ratio"},
		{"duplicate id", []string{`"id": 3,`, `"id": 2,`}, "ids must be unique"},
		{"off the grid", []string{`"w": 24,`, `"w": 25,`}, "outside the 24-column grid"},
		{"overlap", []string{`"x": 6,`, `"x": 4,`}, "overlaps panel"},
		{"plugin", []string{`"type": "stat"`, `"type": "piechart"`}, `type "piechart" is not one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, checkDashboard(edited(t, dash, tt.pairs...), known), tt.want)
		})
	}
}

// TestKnownMetrics: the series are read from the Go source, histograms
// with their _bucket, _count and _sum.
func TestKnownMetrics(t *testing.T) {
	known, err := knownMetrics(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"conclave_turns_total", "conclave_slack_envelopes_total", "conclave_posts_pending", "conclave_ens_cache_stale_total"} {
		if !known[name] {
			t.Errorf("%s not found in the source", name)
		}
	}
	if u := unknownMetrics("rate(conclave_llm_request_duration_seconds_bucket[5m]) + conclave_turns_total + conclave_nope_total", known); !slices.Equal(u, []string{"conclave_nope_total"}) {
		t.Errorf("unknown = %v, want [conclave_nope_total]", u)
	}
	if u := unknownMetrics("conclave_turns_total_bucket", known); len(u) != 1 {
		t.Errorf("a counter has no _bucket series, got unknown = %v", u)
	}
}

func TestReleaseWorkflow(t *testing.T) {
	tests := []struct {
		name  string
		pairs []string
		want  string
	}{
		{"on branches", []string{`tags: ["v*"]`, `branches: [main]`}, "must run on pushed tags v*"},
		{"one platform", []string{"platforms: linux/amd64,linux/arm64", "platforms: linux/amd64"}, "must build for linux/arm64"},
		{"no version", []string{"VERSION=${{ github.ref_name }}\n", ""}, "the build argument VERSION="},
		{"no commit", []string{"COMMIT=${{ github.sha }}", "REVISION=${{ github.sha }}"}, "the build argument COMMIT="},
		{"no qemu", []string{"      - uses: docker/setup-qemu-action@96fe6ef7f33517b61c61be40b68a1882f3264fb8 # v4.2.0\n", ""}, "no docker/setup-qemu-action step"},
		{"pinned by tag", []string{"docker/login-action@4907a6ddec9925e35a0a9e82d7399ccc52663121 # v4.1.0", "docker/login-action@v4"}, "docker/login-action@v4 is not pinned to a commit"},
		{"short SHA", []string{"actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1", "actions/checkout@3d3c42e"}, "actions/checkout@3d3c42e is not pinned to a commit"},
		{"pin without its release", []string{"@37fe631027851001ddb9b187196cc803df7f5f0e # v4.3.0", "@37fe631027851001ddb9b187196cc803df7f5f0e"}, "docker/setup-buildx-action@37fe631027851001ddb9b187196cc803df7f5f0e needs its release as a comment"},
		{"a branch", []string{"uses: docker/metadata-action@dc802804100637a589fabce1cb79ff13a1411302 # v6.2.0", "uses: docker/metadata-action@master"}, "docker/metadata-action@master is not pinned"},
		{"not pushed", []string{"push: true", "push: false"}, "must push the image"},
		{"another registry", []string{"registry: ghcr.io", "registry: docker.io"}, "must log in to ghcr.io"},
		{"no packages permission", []string{"packages: write", "packages: read"}, "packages: write"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, checkRelease(edited(t, ".github/workflows/release.yml", tt.pairs...)), tt.want)
		})
	}
}

// loaded returns the named set of objects of the repository, e.g. the
// kustomize build or a chart case.
func loaded(t *testing.T, source string) *bundle {
	t.Helper()
	bundles, problems := kubernetesBundles(repoRoot)
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	for _, b := range bundles {
		if strings.Contains(b.source, source) {
			return b
		}
	}
	t.Fatalf("no set of objects %q", source)
	return nil
}

// pod returns the bundle's pod spec and conclave's container in it, to
// be edited.
func pod(b *bundle) (*corev1.PodSpec, *corev1.Container) {
	spec := &b.deployments[0].Spec.Template.Spec
	return spec, container(*spec, conclaveContainer)
}

func TestKubernetesChecks(t *testing.T) {
	no := false
	yes := true
	tests := []struct {
		name   string
		source string
		edit   func(b *bundle)
		want   string
	}{
		{"service-account token", "kustomize build", func(b *bundle) {
			spec, _ := pod(b)
			spec.AutomountServiceAccountToken = nil
		}, "automountServiceAccountToken: false"},
		{"root", "kustomize build", func(b *bundle) {
			spec, _ := pod(b)
			spec.SecurityContext.RunAsNonRoot = &no
		}, "must run as non-root"},
		{"writable root file system", "default values", func(b *bundle) {
			_, c := pod(b)
			c.SecurityContext.ReadOnlyRootFilesystem = &no
		}, "container conclave: the root file system must be read-only"},
		{"privilege escalation", "kustomize build", func(b *bundle) {
			_, c := pod(b)
			c.SecurityContext.AllowPrivilegeEscalation = &yes
		}, "allowPrivilegeEscalation must be false"},
		{"capability added", "default values", func(b *bundle) {
			_, c := pod(b)
			c.SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}, "must drop every capability and add none"},
		{"probe on the public port", "default values", func(b *bundle) {
			_, c := pod(b)
			c.LivenessProbe.HTTPGet.Port = intstr.FromString("http")
		}, "liveness probe must ask the operations port 9090, not http"},
		{"readiness elsewhere", "kustomize build", func(b *bundle) {
			_, c := pod(b)
			c.ReadinessProbe.HTTPGet.Path = "/healthz"
		}, "readiness probe must GET /readyz"},
		{"no ops listener", "kustomize build", func(b *bundle) {
			_, c := pod(b)
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "CONCLAVE_HTTP_OPS_ADDR" })
		}, "the operations endpoints must have a listener of their own"},
		{"no NetworkPolicy", "kustomize build", func(b *bundle) {
			b.policies = nil
		}, "want one NetworkPolicy selecting conclave's pods, found 0"},
		{"ops port open to all", "default values", func(b *bundle) {
			b.policies[0].Spec.Ingress[1].From = nil
		}, "ingress rule 2 lets anyone reach the operations port 9090"},
		{"ops port open to every address", "kustomize build", func(b *bundle) {
			b.policies[0].Spec.Ingress[1].From = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}
		}, "ingress rule 2 lets anyone reach the operations port"},
		{"every port open", "kustomize build", func(b *bundle) {
			b.policies[0].Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
		}, "ingress rule 1 lets anyone reach the operations port"},
		{"no HTTPS out", "default values", func(b *bundle) {
			b.policies[0].Spec.Egress = b.policies[0].Spec.Egress[:2]
		}, "egress must allow HTTPS (TCP 443)"},
		{"egress wide open", "kustomize build", func(b *bundle) {
			b.policies[0].Spec.Egress = append(b.policies[0].Spec.Egress, networkingv1.NetworkPolicyEgressRule{})
		}, "egress rule 4 lets the pods reach anything"},
		{"ingress only", "kustomize build", func(b *bundle) {
			b.policies[0].Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		}, "policyTypes must include Egress"},
		{"no PodDisruptionBudget", "default values", func(b *bundle) {
			b.budgets = nil
		}, "want one PodDisruptionBudget selecting conclave's pods, found 0"},
		{"budget blocks drains", "kustomize build", func(b *bundle) {
			three := intstr.FromInt32(3)
			b.budgets[0].Spec.MinAvailable = &three
		}, "minAvailable 3 with 3 replicas blocks every node drain"},
		{"budget selects other pods", "kustomize build", func(b *bundle) {
			b.budgets[0].Spec.Selector.MatchLabels = map[string]string{"app.kubernetes.io/name": "other"}
		}, "want one PodDisruptionBudget selecting conclave's pods, found 0"},
		{"undefined Secret", "created Secret", func(b *bundle) {
			b.secrets = map[string]bool{}
		}, `envFrom names Secret "conclave", which is not defined`},
		{"template key missing", "kustomize build", func(b *bundle) {
			cm := b.configMaps["conclave-templates"]
			cm.Data = nil
			b.configMaps["conclave-templates"] = cm
		}, `maps key "facilitator__default.tmpl", which ConfigMap conclave-templates does not have`},
		{"one replica", "default values", func(b *bundle) {
			one := int32(1)
			b.deployments[0].Spec.Replicas = &one
		}, "want several replicas"},
		{"ops port open to every namespace", "default values", func(b *bundle) {
			b.policies[0].Spec.Ingress[1].From = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
		}, "ingress rule 2 lets every namespace reach the operations port 9090"},
		{"egress CIDR that is not one", inCluster, func(b *bundle) {
			b.policies[0].Spec.Egress[1].To[0].IPBlock.CIDR = "10.0.0.0/33"
		}, `egress rule 2: ipBlock "10.0.0.0/33" is not a CIDR`},
		{"in-cluster model blocked", inCluster, func(b *bundle) {
			b.policies[0].Spec.Egress = slices.DeleteFunc(b.policies[0].Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
				return allowsPort(corev1.Container{}, r.Ports, 11434, corev1.ProtocolTCP)
			})
		}, "egress does not allow llm.base_url (TCP 11434)"},
		{"Sentinel blocked", inCluster, func(b *bundle) {
			b.policies[0].Spec.Egress[1].Ports = b.policies[0].Spec.Egress[1].Ports[:1]
		}, "egress does not allow memory.redis_url (TCP 26379)"},
		{"ServiceMonitor on the public port", inCluster, func(b *bundle) {
			b.serviceMonitors[0].Spec.Endpoints[0].Port = "http"
		}, `ServiceMonitor conclave: scrapes port "http", which reaches container port 8080, not the ops port 9090`},
		{"ServiceMonitor selecting another Service", inCluster, func(b *bundle) {
			b.serviceMonitors[0].Spec.Selector.MatchLabels = map[string]string{"app.kubernetes.io/name": "other"}
		}, "ServiceMonitor conclave: does not select the Service conclave"},
		{"PrometheusRule without its ServiceMonitor", inCluster, func(b *bundle) {
			b.serviceMonitors = nil
		}, "want a ServiceMonitor and a PrometheusRule only when metrics are enabled; found 0 and 1"},
		{"alert on a metric conclave does not export", inCluster, func(b *bundle) {
			setExpr(b, "ConclaveNoticeRate", `sum(rate(conclave_turns_failed_total{job="conclave"}[15m])) > 0`)
		}, "ConclaveNoticeRate reads conclave_turns_failed_total, which conclave does not export"},
		{"alert over every release", inCluster, func(b *bundle) {
			setExpr(b, "ConclaveOutboxBacklog", "max(conclave_posts_pending) > 20")
		}, `ConclaveOutboxBacklog reads conclave_posts_pending without job="conclave"`},
		{"alert that does not parse", inCluster, func(b *bundle) {
			setExpr(b, "ConclaveOutboxBacklog", `max(conclave_posts_pending{job="conclave"} > 20`)
		}, "ConclaveOutboxBacklog: unbalanced brackets"},
		{"no budget alert", inCluster, func(b *bundle) {
			g := &b.rules[0].Spec.Groups[0]
			g.Rules = slices.DeleteFunc(g.Rules, func(r monitoringv1.Rule) bool { return strings.HasPrefix(r.Alert, "ConclaveBudget") })
		}, "no alert on budget use (conclave_budget_used_ratio)"},
		{"Ingress to the ops port", inCluster, func(b *bundle) {
			b.ingresses[0].Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name = "ops"
		}, "path / reaches container port 9090, not the wallet page's 8080"},
		{"Ingress for every host", inCluster, func(b *bundle) {
			b.ingresses[0].Spec.Rules[0].Host = ""
		}, "Ingress conclave: a rule without a host"},
		{"Ingress nobody asked for", "default values", func(b *bundle) {
			b.ingresses = loaded(t, inCluster).ingresses
		}, "want an Ingress only when ingress.enabled; found 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := loaded(t, tt.source)
			tt.edit(b)
			wantProblem(t, b.check(), tt.want)
		})
	}
}

// inCluster is the chart case with every option on.
const inCluster = "in-cluster endpoints"

// setExpr sets the expression of the PrometheusRule's alert.
func setExpr(b *bundle, alert, expr string) {
	for i := range b.rules[0].Spec.Groups[0].Rules {
		if r := &b.rules[0].Spec.Groups[0].Rules[i]; r.Alert == alert {
			r.Expr = intstr.FromString(expr)
		}
	}
}

func TestGitSyncChecks(t *testing.T) {
	// sidecar returns the git-sync container of the bundle's pod.
	sidecar := func(b *bundle) *corev1.Container {
		spec, _ := pod(b)
		return &spec.InitContainers[0]
	}
	tests := []struct {
		name string
		edit func(b *bundle)
		want string
	}{
		{"templates.dir beside the link", func(b *bundle) {
			_, c := pod(b)
			for i := range c.Env {
				if c.Env[i].Name == "CONCLAVE_TEMPLATES_DIR" {
					c.Env[i].Value = "/git/templates"
				}
			}
		}, "templates.dir /git/templates is not git-sync's link /git/repo"},
		{"templates.dir unset", func(b *bundle) {
			_, c := pod(b)
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "CONCLAVE_TEMPLATES_DIR" })
		}, "templates.dir is not set (CONCLAVE_TEMPLATES_DIR=/git/repo)"},
		{"volume not shared", func(b *bundle) {
			_, c := pod(b)
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "git" })
		}, "conclave does not mount git-sync's volume git"},
		{"another link", func(b *bundle) {
			gs := sidecar(b)
			gs.Args[1] = "--link=current"
		}, "is not git-sync's link /git/current"},
		{"root outside the volume", func(b *bundle) {
			gs := sidecar(b)
			gs.Args[0] = "--root=/data"
		}, "its --root /data is not in a volume it can write"},
		{"one-shot init container", func(b *bundle) {
			sidecar(b).RestartPolicy = nil
		}, "an init container that stops after its first sync"},
		{"no startup probe", func(b *bundle) {
			sidecar(b).StartupProbe = nil
		}, "needs a startup probe"},
		{"writable for conclave", func(b *bundle) {
			_, c := pod(b)
			for i := range c.VolumeMounts {
				c.VolumeMounts[i].ReadOnly = false
			}
		}, "conclave mounts git-sync's volume git writable"},
		{"sidecar as root", func(b *bundle) {
			root := int64(0)
			sidecar(b).SecurityContext.RunAsUser = &root
		}, "container git-sync: must not run as root"},
		{"no sidecar", func(b *bundle) {
			spec, _ := pod(b)
			spec.InitContainers = nil
		}, "no git-sync sidecar"},
	}
	for _, source := range []string{"helm template ../../deploy/helm/conclave (git-sync)", "components/git-sync"} {
		for _, tt := range tests {
			t.Run(source+"/"+tt.name, func(t *testing.T) {
				b := loaded(t, source)
				tt.edit(b)
				wantProblem(t, b.check(), tt.want)
			})
		}
	}
	t.Run("no repository", func(t *testing.T) {
		b := loaded(t, "(git-sync)")
		gs := sidecar(b)
		gs.Env = slices.DeleteFunc(gs.Env, func(e corev1.EnvVar) bool { return e.Name == "GITSYNC_REPO" })
		wantProblem(t, b.check(), "no repository to sync (--repo or GITSYNC_REPO)")
	})
	t.Run("sidecar where none belongs", func(t *testing.T) {
		b := loaded(t, "(git-sync)")
		b.gitSync = false
		wantProblem(t, b.check(), "has a git-sync sidecar")
	})
}

// TestChartValues: values the chart refuses, with the reason.
func TestChartValues(t *testing.T) {
	chart := filepath.Join(repoRoot, "deploy", "helm", "conclave")
	tests := []struct {
		name, values, want string
	}{
		{"misspelt key", "replicas: 2\n", "additional properties 'replicas' not allowed"},
		{"misspelt nested key", "gitSync: {enable: true}\n", "additional properties 'enable' not allowed"},
		{"git-sync without a repository", "gitSync: {enabled: true}\n", "gitSync.enabled needs gitSync.repo"},
		{"templates from two places", "gitSync: {enabled: true, repo: https://git.example/p}\ntemplates: {expert/system.tmpl: hi}\n", "with gitSync.enabled the templates come from the repository"},
		{"two Secrets", "secret: {create: true, existingSecret: mine}\n", "set either existingSecret or create, not both"},
		{"git-sync v3", "gitSync: {image: {tag: v3.6.9}}\n", "at '/gitSync/image/tag': 'v3.6.9' does not match"},
		{"subPath leaving the checkout", "gitSync: {subPath: ../etc}\n", "at '/gitSync/subPath': '../etc' does not match"},
		{"too many replicas for Slack", "replicaCount: 11\n", "at '/replicaCount'"},
		{"template outside the layout", "templates: {notes.md: hi}\n", "'notes.md' does not match pattern"},
		{"credentials in the repository URL", "gitSync: {enabled: true, repo: \"https://bot:ghp_s3cret@github.com/acme/p\"}\n", "gitSync.repo holds credentials in its URL"},
		{"a token as the URL's user", "gitSync: {repo: \"https://ghp_s3cret@github.com/acme/p\"}\n", "put GITSYNC_USERNAME and GITSYNC_PASSWORD (a token) in a Secret"},
		{"a password in an SSH URL", "gitSync: {enabled: true, repo: \"ssh://git:ghp_s3cret@github.com/acme/p\"}\n", "gitSync.repo holds credentials"},
		{"egress CIDRs without ports", "networkPolicy: {egress: {model: {ports: [], cidrs: [10.0.0.0/8]}}}\n", "networkPolicy.egress.model has cidrs but no ports"},
		{"egress CIDR without a prefix", "networkPolicy: {egress: {otel: {ports: [4318], cidrs: [10.1.2.3]}}}\n", "at '/networkPolicy/egress/otel/cidrs/0'"},
		{"misspelt egress endpoint", "networkPolicy: {egress: {ollama: {ports: [11434], cidrs: []}}}\n", "additional properties 'ollama' not allowed"},
		{"Ingress without a host", "ingress: {enabled: true}\n", "ingress.enabled needs ingress.host"},
		{"a ratio over one", "metrics: {prometheusRule: {noticeRatio: 5}}\n", "at '/metrics/prometheusRule/noticeRatio'"},
		{"misspelt metrics key", "metrics: {serviceMonitors: {enabled: true}}\n", "additional properties 'serviceMonitors' not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := renderChart(chart, chartCase{name: tt.name, values: tt.values})
			wantProblem(t, problems, tt.want)
			if p := strings.Join(problems, "\n"); strings.Contains(p, "s3cret") {
				t.Errorf("the refusal repeats the credential:\n%s", p)
			}
		})
	}
	// Repositories without credentials render.
	for _, repo := range []string{"https://github.com/acme/p", "git@github.com:acme/p", "ssh://git@github.com/acme/p"} {
		t.Run("accepted "+repo, func(t *testing.T) {
			if _, problems := renderChart(chart, chartCase{values: "gitSync: {enabled: true, repo: \"" + repo + "\"}\n"}); len(problems) > 0 {
				t.Errorf("refused: %s", strings.Join(problems, "\n"))
			}
		})
	}
}

// TestStrictDecoding: a misspelt field or an unknown kind is an error
// naming it, not an object quietly missing a setting.
func TestStrictDecoding(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"misspelt field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: conclave}\nspec: {replica: 3}\n", `unknown field "replica"`},
		{"wrong type", "apiVersion: v1\nkind: Service\nmetadata: {name: conclave}\nspec: {ports: {name: http}}\n", "cannot unmarshal object into Go struct field ServiceSpec.spec.ports"},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: conclave}\n", "unexpected kind v1 Pod"},
		{"no kind", "metadata: {name: conclave}\n", "a document without apiVersion and kind"},
		{"misspelt ServiceMonitor field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: conclave}\nspec: {endpoint: [{port: ops}]}\n", `unknown field "endpoint"`},
		{"misspelt PrometheusRule field", "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: conclave}\nspec: {groups: [{name: g, rules: [{alert: A, expression: up}]}]}\n", `unknown field "expression"`},
		{"misspelt Ingress field", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: conclave}\nspec: {rule: []}\n", `unknown field "rule"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, newBundle("test").decodeAll("test.yaml", []byte(tt.doc)), tt.want)
		})
	}
}
