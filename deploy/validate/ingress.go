package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// checkIngress checks each Ingress names a host and sends every path to
// conclave's Service on a port that reaches the public listener (the
// wallet page), never the ops listener.
func (b *bundle) checkIngress(svc corev1.Service, c corev1.Container, bad func(string, ...any)) {
	if b.ingress != (len(b.ingresses) > 0) {
		bad("want an Ingress only when ingress.enabled; found %d", len(b.ingresses))
	}
	public := publicPort(c)
	for _, ing := range b.ingresses {
		if ing.Spec.DefaultBackend != nil {
			bad("Ingress %s: a default backend sends every host and path to it; name the wallet page's host", ing.Name)
		}
		if len(ing.Spec.Rules) == 0 {
			bad("Ingress %s: no rules", ing.Name)
		}
		for _, r := range ing.Spec.Rules {
			if r.Host == "" {
				bad("Ingress %s: a rule without a host", ing.Name)
			}
			if r.HTTP == nil {
				bad("Ingress %s: rule for %q has no paths", ing.Name, r.Host)
				continue
			}
			for _, p := range r.HTTP.Paths {
				if msg := ingressBackend(p.Backend, svc, c, public); msg != "" {
					bad("Ingress %s: path %s %s", ing.Name, p.Path, msg)
				}
			}
		}
		for _, t := range ing.Spec.TLS {
			if t.SecretName == "" {
				bad("Ingress %s: a tls entry without secretName", ing.Name)
			}
		}
	}
}

// ingressBackend says what is wrong with a path's backend, or "".
func ingressBackend(be networkingv1.IngressBackend, svc corev1.Service, c corev1.Container, public int32) string {
	if be.Service == nil || be.Service.Name != svc.Name {
		return "does not go to the Service " + svc.Name
	}
	var target int32
	if name := be.Service.Port.Name; name != "" {
		target = serviceTarget(svc, c, name)
	} else {
		for _, p := range svc.Spec.Ports {
			if p.Port == be.Service.Port.Number {
				target = serviceTarget(svc, c, p.Name)
			}
		}
	}
	switch {
	case target == 0:
		return "names a port the Service " + svc.Name + " does not have"
	case target != public:
		return fmt.Sprintf("reaches container port %d, not the wallet page's %d", target, public)
	}
	return ""
}
