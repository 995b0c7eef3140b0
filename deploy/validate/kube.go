package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// conclaveContainer is the name of conclave's container in every pod.
const conclaveContainer = "conclave"

// bundle is one set of Kubernetes objects, decoded into their API types:
// the manifests as written, a kustomize build or a chart rendering.
type bundle struct {
	source string // named in every problem
	// gitSync: the templates come from a git-sync sidecar.
	gitSync bool
	// externalSecret is a Secret the pods may name without the bundle
	// defining it (the chart's existing Secret).
	externalSecret string
	// monitoring: a ServiceMonitor and a PrometheusRule are expected;
	// ingress: an Ingress for the wallet page.
	monitoring, ingress bool
	// metrics are the series conclave exports (knownMetrics).
	metrics map[string]bool

	deployments []appsv1.Deployment
	secrets     map[string]bool
	configMaps  map[string]corev1.ConfigMap
	services    []corev1.Service
	budgets     []policyv1.PodDisruptionBudget
	policies    []networkingv1.NetworkPolicy
	ingresses   []networkingv1.Ingress

	serviceMonitors []monitoringv1.ServiceMonitor
	rules           []monitoringv1.PrometheusRule
}

func newBundle(source string) *bundle {
	return &bundle{source: source, secrets: map[string]bool{}, configMaps: map[string]corev1.ConfigMap{}}
}

// loadManifests decodes every document of dir/*.yaml as written.
func loadManifests(dir string) (*bundle, []string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, []string{fmt.Sprintf("%s: no manifests (%v)", dir, err)}
	}
	b := newBundle(dir)
	var problems []string
	for _, f := range files {
		data, err := os.ReadFile(f) // #nosec G304 G703 -- the repository's own manifests, found by a fixed glob
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		problems = append(problems, b.decodeAll(f, data)...)
	}
	return b, problems
}

// decodeAll decodes each YAML document of data (from source) into b.
func (b *bundle) decodeAll(source string, data []byte) []string {
	var problems []string
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return problems
		}
		if err != nil {
			return append(problems, fmt.Sprintf("%s: %v", source, err))
		}
		if err := b.decode(doc); err != nil {
			problems = append(problems, fmt.Sprintf("%s: document %d: %v", source, i, err))
		}
	}
}

// decode decodes one YAML document strictly into the type its kind
// names; a document with no content is skipped.
func (b *bundle) decode(doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	switch head.APIVersion + "/" + head.Kind {
	case "/":
		var anything any
		if err := yaml.Unmarshal(doc, &anything); err != nil || anything != nil {
			return fmt.Errorf("a document without apiVersion and kind")
		}
		return nil
	case "apps/v1/Deployment":
		return strict(doc, func(d appsv1.Deployment) { b.deployments = append(b.deployments, d) })
	case "v1/Secret":
		return strict(doc, func(s corev1.Secret) { b.secrets[s.Name] = true })
	case "v1/ConfigMap":
		return strict(doc, func(c corev1.ConfigMap) { b.configMaps[c.Name] = c })
	case "v1/Service":
		return strict(doc, func(s corev1.Service) { b.services = append(b.services, s) })
	case "policy/v1/PodDisruptionBudget":
		return strict(doc, func(p policyv1.PodDisruptionBudget) { b.budgets = append(b.budgets, p) })
	case "networking.k8s.io/v1/NetworkPolicy":
		return strict(doc, func(p networkingv1.NetworkPolicy) { b.policies = append(b.policies, p) })
	case "networking.k8s.io/v1/Ingress":
		return strict(doc, func(i networkingv1.Ingress) { b.ingresses = append(b.ingresses, i) })
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return strict(doc, func(m monitoringv1.ServiceMonitor) { b.serviceMonitors = append(b.serviceMonitors, m) })
	case "monitoring.coreos.com/v1/PrometheusRule":
		return strict(doc, func(r monitoringv1.PrometheusRule) { b.rules = append(b.rules, r) })
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		return nil // kustomizeBase builds it
	default:
		return fmt.Errorf("unexpected kind %s %s", head.APIVersion, head.Kind)
	}
}

// strict decodes doc into a T, refusing unknown fields, and hands it to
// add.
func strict[T any](doc []byte, add func(T)) error {
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		return err
	}
	add(v)
	return nil
}

// check checks the bundle's objects; every problem names the bundle.
func (b *bundle) check() []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, b.source+": "+fmt.Sprintf(format, args...))
	}
	if len(b.deployments) != 1 {
		bad("want one Deployment, found %d", len(b.deployments))
		return problems
	}
	d := b.deployments[0]
	for _, p := range b.checkDeployment(d) {
		bad("Deployment %s: %s", d.Name, p)
	}
	pod := d.Spec.Template
	c := container(pod.Spec, conclaveContainer)
	if c == nil {
		return problems
	}
	matching := func(kind, name string, sel *metav1.LabelSelector) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		switch {
		case err != nil:
			bad("%s %s: %v", kind, name, err)
		case sel == nil || s.Empty():
			bad("%s %s selects every pod of the namespace", kind, name)
		default:
			return s.Matches(labels.Set(pod.Labels))
		}
		return false
	}
	var policies, budgets, services int
	var conclaveService corev1.Service
	for _, p := range b.policies {
		if matching("NetworkPolicy", p.Name, &p.Spec.PodSelector) {
			policies++
			for _, msg := range append(checkNetworkPolicy(p, *c), b.checkEndpoints(p, *c)...) {
				bad("NetworkPolicy %s: %s", p.Name, msg)
			}
		}
	}
	if policies != 1 {
		bad("want one NetworkPolicy selecting conclave's pods, found %d", policies)
	}
	for _, p := range b.budgets {
		if matching("PodDisruptionBudget", p.Name, p.Spec.Selector) {
			budgets++
			if msg := checkBudget(p, d); msg != "" {
				bad("PodDisruptionBudget %s: %s", p.Name, msg)
			}
		}
	}
	if budgets != 1 {
		bad("want one PodDisruptionBudget selecting conclave's pods, found %d", budgets)
	}
	for _, s := range b.services {
		if matching("Service", s.Name, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}) {
			services++
			conclaveService = s
			for _, p := range s.Spec.Ports {
				if p.TargetPort.Type == intstr.String && port(*c, p.TargetPort) == 0 {
					bad("Service %s: port %s targets %q, which conclave's container does not name", s.Name, p.Name, p.TargetPort.StrVal)
				}
			}
		}
	}
	if services != 1 {
		bad("want one Service selecting conclave's pods, found %d", services)
		return problems
	}
	b.checkMonitoring(conclaveService, *c, bad)
	b.checkIngress(conclaveService, *c, bad)
	return problems
}

// checkDeployment checks what conclave needs of its Deployment.
func (b *bundle) checkDeployment(d appsv1.Deployment) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		bad("want several replicas")
	}
	pod := d.Spec.Template
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || !s.Matches(labels.Set(pod.Labels)) {
		bad("the selector does not match the pod labels")
	}
	spec := pod.Spec
	problems = append(problems, checkPodSecurity(spec)...)
	c := container(spec, conclaveContainer)
	if c == nil || len(spec.Containers) != 1 {
		bad("want one container, named %s", conclaveContainer)
		return problems
	}
	problems = append(problems, checkProbes(*c)...)
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil && !b.secrets[ef.SecretRef.Name] && ef.SecretRef.Name != b.externalSecret {
			bad("envFrom names Secret %q, which is not defined", ef.SecretRef.Name)
		}
	}
	if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil }) {
		bad("the tokens must come from a Secret (envFrom)")
	}
	for _, cc := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, ef := range cc.EnvFrom {
			if ef.ConfigMapRef != nil {
				if _, ok := b.configMaps[ef.ConfigMapRef.Name]; !ok {
					bad("container %s: envFrom names ConfigMap %q, which is not defined", cc.Name, ef.ConfigMapRef.Name)
				}
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm, ok := b.configMaps[v.ConfigMap.Name]
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
	found, gitSync := checkGitSync(b, spec)
	switch {
	case b.gitSync && !found:
		bad("no git-sync sidecar (an image %s…)", gitSyncImage)
	case b.gitSync:
		problems = append(problems, gitSync...)
	case found:
		bad("has a git-sync sidecar, but its templates should not come from git")
	}
	return problems
}

// checkPodSecurity checks the pod runs without a service-account token,
// as non-root with the runtime's seccomp profile, and that every container
// has a read-only root file system, no capabilities and no way to gain
// privileges.
func checkPodSecurity(spec corev1.PodSpec) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		bad("the pod must not mount a service-account token (automountServiceAccountToken: false)")
	}
	pod := spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	if pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot {
		bad("must run as non-root (securityContext.runAsNonRoot)")
	}
	if pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad("the pod must use the RuntimeDefault seccomp profile")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		bad("the pod must not share the host's namespaces")
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("container %s: allowPrivilegeEscalation must be false", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			bad("container %s: the root file system must be read-only", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			bad("container %s: must drop every capability and add none", c.Name)
		}
		if (sc.RunAsUser != nil && *sc.RunAsUser == 0) || (sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot) || (sc.Privileged != nil && *sc.Privileged) {
			bad("container %s: must not run as root or privileged", c.Name)
		}
	}
	return problems
}

// checkProbes checks the probes GET /healthz and /readyz on the
// operations listener, which must be a listener of its own.
func checkProbes(c corev1.Container) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	ops := opsPort(c)
	if ops == 0 {
		bad("the operations endpoints must have a listener of their own (CONCLAVE_HTTP_OPS_ADDR with a port conclave's container declares)")
	}
	probe := func(what string, p *corev1.Probe, path string) {
		switch {
		case p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path:
			bad("%s probe must GET %s", what, path)
		case ops != 0 && port(c, p.HTTPGet.Port) != ops:
			bad("%s probe must ask the operations port %d, not %s", what, ops, p.HTTPGet.Port.String())
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	return problems
}

// checkNetworkPolicy checks the policy lets in the public port from
// anywhere and the operations port only from named peers, and lets out
// DNS, Redis and HTTPS.
func checkNetworkPolicy(p networkingv1.NetworkPolicy, c corev1.Container) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, t := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress} {
		if !slices.Contains(p.Spec.PolicyTypes, t) {
			bad("policyTypes must include %s", t)
		}
	}
	public, ops := publicPort(c), opsPort(c)
	publicOpen, opsAllowed := false, false
	for i, rule := range p.Spec.Ingress {
		if allowsPort(c, rule.Ports, public, corev1.ProtocolTCP) && len(rule.From) == 0 {
			publicOpen = true
		}
		if ops == 0 || !allowsPort(c, rule.Ports, ops, corev1.ProtocolTCP) {
			continue
		}
		opsAllowed = true
		switch {
		case len(rule.From) == 0 || slices.ContainsFunc(rule.From, anywhere):
			bad("ingress rule %d lets anyone reach the operations port %d (/metrics, /readyz, pprof); name the peers (from:)", i+1, ops)
		case slices.ContainsFunc(rule.From, everyNamespace):
			bad("ingress rule %d lets every namespace reach the operations port %d; keep it to the release's namespace (podSelector) and name the monitoring namespace", i+1, ops)
		}
	}
	for i, rule := range p.Spec.Ingress {
		problems = append(problems, badCIDRs(fmt.Sprintf("ingress rule %d", i+1), rule.From)...)
	}
	for i, rule := range p.Spec.Egress {
		problems = append(problems, badCIDRs(fmt.Sprintf("egress rule %d", i+1), rule.To)...)
	}
	if !publicOpen {
		bad("ingress must let anyone reach the public port %d (the wallet page)", public)
	}
	if ops != 0 && !opsAllowed {
		bad("ingress must let the cluster's monitoring reach the operations port %d", ops)
	}
	for _, want := range []struct {
		port  int32
		proto corev1.Protocol
		what  string
	}{{53, corev1.ProtocolUDP, "DNS"}, {6379, corev1.ProtocolTCP, "Redis"}, {443, corev1.ProtocolTCP, "HTTPS"}} {
		if !slices.ContainsFunc(p.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
			return allowsPort(c, r.Ports, want.port, want.proto)
		}) {
			bad("egress must allow %s (%s %d)", want.what, want.proto, want.port)
		}
	}
	for i, rule := range p.Spec.Egress {
		if len(rule.Ports) == 0 && (len(rule.To) == 0 || slices.ContainsFunc(rule.To, anywhere)) {
			bad("egress rule %d lets the pods reach anything; name ports", i+1)
		}
	}
	return problems
}

// everyNamespace reports whether a peer is every pod of every namespace
// (an empty namespaceSelector, no podSelector narrowing it).
func everyNamespace(peer networkingv1.NetworkPolicyPeer) bool {
	if peer.NamespaceSelector == nil {
		return false
	}
	ns, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
	if err != nil || !ns.Empty() {
		return false
	}
	if peer.PodSelector == nil {
		return true
	}
	pods, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
	return err == nil && pods.Empty()
}

// badCIDRs lists the peers' ipBlocks that the API server would refuse:
// a CIDR that does not parse, or an except outside it.
func badCIDRs(where string, peers []networkingv1.NetworkPolicyPeer) []string {
	var problems []string
	for _, peer := range peers {
		if peer.IPBlock == nil {
			continue
		}
		_, block, err := net.ParseCIDR(peer.IPBlock.CIDR)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: ipBlock %q is not a CIDR", where, peer.IPBlock.CIDR))
			continue
		}
		for _, ex := range peer.IPBlock.Except {
			ip, _, err := net.ParseCIDR(ex)
			if err != nil || !block.Contains(ip) {
				problems = append(problems, fmt.Sprintf("%s: except %q is not a CIDR inside %s", where, ex, peer.IPBlock.CIDR))
			}
		}
	}
	return problems
}

// anywhere reports whether a peer is every address.
func anywhere(peer networkingv1.NetworkPolicyPeer) bool {
	if peer.IPBlock == nil {
		return false
	}
	_, n, err := net.ParseCIDR(peer.IPBlock.CIDR)
	if err != nil {
		return false
	}
	ones, _ := n.Mask.Size()
	return ones == 0
}

// allowsPort reports whether a rule's ports let port/proto through: no
// ports is every port; a named port is the container's.
func allowsPort(c corev1.Container, ports []networkingv1.NetworkPolicyPort, want int32, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pr := corev1.ProtocolTCP
		if p.Protocol != nil {
			pr = *p.Protocol
		}
		if pr != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		n := port(c, *p.Port)
		if n == want || (p.EndPort != nil && n <= want && want <= *p.EndPort) {
			return true
		}
	}
	return false
}

// checkBudget checks a PodDisruptionBudget keeps a replica and lets a
// node drain go on.
func checkBudget(p policyv1.PodDisruptionBudget, d appsv1.Deployment) string {
	switch {
	case p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable == nil:
		return "needs minAvailable or maxUnavailable"
	case p.Spec.MinAvailable != nil && p.Spec.MinAvailable.Type == intstr.Int && d.Spec.Replicas != nil &&
		p.Spec.MinAvailable.IntVal >= *d.Spec.Replicas:
		return fmt.Sprintf("minAvailable %d with %d replicas blocks every node drain", p.Spec.MinAvailable.IntVal, *d.Spec.Replicas)
	case p.Spec.MinAvailable != nil && p.Spec.MinAvailable.Type == intstr.Int && p.Spec.MinAvailable.IntVal < 1:
		return "minAvailable must keep at least one replica"
	}
	return ""
}

// container returns the container of spec named name (not an init
// container), or nil.
func container(spec corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

// env returns the literal value of the container's variable name.
func env(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// port resolves a port by number or by the container's name for it; 0
// when the name is unknown.
func port(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

// listenerPort is the port of an address variable of conclave's, when the
// container declares it; def when the variable is not set.
func listenerPort(c corev1.Container, variable string, def int32) int32 {
	addr, ok := env(c, variable)
	if !ok {
		return def
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n := int32(portNumber(p)) // #nosec G115 -- portNumber parsed a port, which fits
	if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == n }) {
		return 0
	}
	return n
}

// publicPort is conclave's http.addr port (the wallet page).
func publicPort(c corev1.Container) int32 { return listenerPort(c, "CONCLAVE_HTTP_ADDR", 8080) }

// opsPort is conclave's http.ops_addr port, or 0 without one.
func opsPort(c corev1.Container) int32 { return listenerPort(c, "CONCLAVE_HTTP_OPS_ADDR", 0) }

// hasPrefixPath reports whether p is dir or inside it.
func hasPrefixPath(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
