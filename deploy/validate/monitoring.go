package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// metricName finds conclave's series in a PromQL expression.
var metricName = regexp.MustCompile(`\bconclave_[a-z0-9_]+`)

// metricLiteral finds a metric's name as the Go source registers it, and
// histogramLiteral a histogram's.
var (
	metricLiteral    = regexp.MustCompile(`"(conclave_[a-z0-9_]+)"`)
	histogramLiteral = regexp.MustCompile(`HistogramOpts\{\s*Name:\s*"(conclave_[a-z0-9_]+)"`)
)

// knownMetrics is every conclave_ name the repository's Go source (not
// its tests, not deploy/) writes as a string, with the _bucket, _count and
// _sum series of those it registers as histograms: the series conclave can
// export.
func knownMetrics(root string) (map[string]bool, error) {
	known := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error { // #nosec G703 -- the repository given on the command line, walked for its own source
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "deploy" || strings.HasPrefix(d.Name(), ".") && path != root):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		data, err := os.ReadFile(path) // #nosec G304 G122 -- the repository's own source, walked from its root
		if err != nil {
			return err
		}
		for _, m := range metricLiteral.FindAllSubmatch(data, -1) {
			known[string(m[1])] = true
		}
		for _, m := range histogramLiteral.FindAllSubmatch(data, -1) {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				known[string(m[1])+suffix] = true
			}
		}
		return nil
	})
	return known, err
}

// unknownMetrics lists the conclave_ series expr reads that conclave does
// not export.
func unknownMetrics(expr string, known map[string]bool) []string {
	var unknown []string
	for _, name := range metricName.FindAllString(expr, -1) {
		if !known[name] && !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	return unknown
}

// metricSelector finds a conclave_ series and its label matchers.
var metricSelector = regexp.MustCompile(`\b(conclave_[a-z0-9_]+)(\{[^}]*\})?`)

// unscoped lists the conclave_ series of expr that do not select the
// matchers want (job="…", namespace="…"): an alert or panel that would
// mix another release's replicas in.
func unscoped(expr string, want ...string) []string {
	var bare []string
	for _, m := range metricSelector.FindAllStringSubmatch(expr, -1) {
		for _, w := range want {
			if !strings.Contains(m[2], w) {
				bare = append(bare, m[1])
				break
			}
		}
	}
	return bare
}

// balanced reports whether the brackets of a PromQL expression pair up
// (outside its quoted strings).
func balanced(expr string) bool {
	var stack []rune
	quoted := false
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for _, r := range expr {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !quoted
}

// requiredAlerts are what the PrometheusRule must watch (SPEC §14.8), by
// the series each reads.
var requiredAlerts = []struct{ what, series string }{
	{"ready replicas", "kube_deployment_status_replicas_ready"},
	{"the notice rate", "conclave_turn_failures_total"},
	{"the model error rate", "conclave_llm_request_duration_seconds_count"},
	{"the outbox backlog", "conclave_posts_pending"},
	{"budget use", "conclave_budget_used_ratio"},
}

// checkMonitoring checks the ServiceMonitors and PrometheusRules against
// conclave's Service svc and container c: a ServiceMonitor selects svc and
// scrapes /metrics on a Service port that reaches the ops listener; every
// rule's expression pairs its brackets, reads series conclave exports,
// scoped to this release's job and namespace, and the rules watch
// requiredAlerts.
func (b *bundle) checkMonitoring(svc corev1.Service, c corev1.Container, bad func(string, ...any)) {
	if b.monitoring != (len(b.serviceMonitors) > 0) || b.monitoring != (len(b.rules) > 0) {
		bad("want a ServiceMonitor and a PrometheusRule only when metrics are enabled; found %d and %d", len(b.serviceMonitors), len(b.rules))
	}
	for _, sm := range b.serviceMonitors {
		b.checkServiceMonitor(sm, svc, c, func(format string, args ...any) {
			bad("ServiceMonitor %s: %s", sm.Name, fmt.Sprintf(format, args...))
		})
	}
	job := fmt.Sprintf("job=%q", svc.Name)
	for _, pr := range b.rules {
		var exprs []string
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				name := r.Alert + r.Record
				expr := r.Expr.String()
				exprs = append(exprs, expr)
				switch {
				case name == "":
					bad("PrometheusRule %s: a rule without alert or record", pr.Name)
				case strings.TrimSpace(expr) == "":
					bad("PrometheusRule %s: %s has no expr", pr.Name, name)
				case !balanced(expr):
					bad("PrometheusRule %s: %s: unbalanced brackets in %q", pr.Name, name, expr)
				}
				if u := unknownMetrics(expr, b.metrics); len(u) > 0 {
					bad("PrometheusRule %s: %s reads %s, which conclave does not export", pr.Name, name, strings.Join(u, ", "))
				}
				if u := unscoped(expr, job); len(u) > 0 {
					bad("PrometheusRule %s: %s reads %s without %s (this release's replicas only)", pr.Name, name, strings.Join(u, ", "), job)
				}
			}
		}
		for _, want := range requiredAlerts {
			if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, want.series) }) {
				bad("PrometheusRule %s: no alert on %s (%s)", pr.Name, want.what, want.series)
			}
		}
	}
}

// checkServiceMonitor checks one ServiceMonitor scrapes conclave's ops
// port, and only that.
func (b *bundle) checkServiceMonitor(sm monitoringv1.ServiceMonitor, svc corev1.Service, c corev1.Container, bad func(string, ...any)) {
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	switch {
	case err != nil:
		bad("%v", err)
	case sel.Empty():
		bad("selects every Service of the namespace")
	case !sel.Matches(labels.Set(svc.Labels)):
		bad("does not select the Service %s", svc.Name)
	}
	if len(sm.Spec.Endpoints) == 0 {
		bad("has no endpoints")
	}
	ops := opsPort(c)
	for _, e := range sm.Spec.Endpoints {
		if e.Path != "" && e.Path != "/metrics" {
			bad("scrapes %s; conclave serves /metrics", e.Path)
		}
		target := serviceTarget(svc, c, e.Port)
		switch {
		case target == 0:
			bad("port %q is not a port of the Service %s", e.Port, svc.Name)
		case target != ops:
			bad("scrapes port %q, which reaches container port %d, not the ops port %d", e.Port, target, ops)
		}
	}
}

// serviceTarget is the container port the Service's port named name
// reaches, or 0.
func serviceTarget(svc corev1.Service, c corev1.Container, name string) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			t := p.TargetPort
			if t.Type == intstr.Int && t.IntVal == 0 {
				t = intstr.FromInt32(p.Port)
			}
			return port(c, t)
		}
	}
	return 0
}
