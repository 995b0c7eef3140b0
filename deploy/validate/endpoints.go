package main

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// endpointConfig is the part of config.toml that names where conclave
// connects: the model, its profiles, MCP servers over HTTP, the OTLP
// collector and Redis. conclave itself checks the whole file
// (checkContents); this reads only the URLs.
type endpointConfig struct {
	LLM struct {
		BaseURL  string `toml:"base_url"`
		Profiles map[string]struct {
			BaseURL string `toml:"base_url"`
		} `toml:"profiles"`
	} `toml:"llm"`
	MCP struct {
		Servers []struct {
			Name string `toml:"name"`
			URL  string `toml:"url"`
		} `toml:"servers"`
	} `toml:"mcp"`
	OTel struct {
		Endpoint string `toml:"endpoint"`
	} `toml:"otel"`
	Memory struct {
		RedisURL string `toml:"redis_url"`
	} `toml:"memory"`
}

// defaultModelURL is llm.base_url when nothing sets it.
const defaultModelURL = "https://api.openai.com/v1"

// configuredEndpoints lists the URLs the pod's configuration connects to,
// each with the setting it comes from: config.toml (every ConfigMap key of
// that name) overridden by the container's literal variables, as conclave
// reads them.
func (b *bundle) configuredEndpoints(c corev1.Container) (map[string]string, error) {
	var cfg endpointConfig
	for name, cm := range b.configMaps {
		if text, ok := cm.Data["config.toml"]; ok {
			if _, err := toml.Decode(text, &cfg); err != nil {
				return nil, fmt.Errorf("ConfigMap %s: config.toml: %w", name, err)
			}
		}
	}
	urls := map[string]string{
		"llm.base_url":     firstSet(envOf(c, "CONCLAVE_LLM_BASE_URL"), envOf(c, "OPENAI_BASE_URL"), cfg.LLM.BaseURL, defaultModelURL),
		"otel.endpoint":    firstSet(envOf(c, "CONCLAVE_OTEL_ENDPOINT"), cfg.OTel.Endpoint),
		"memory.redis_url": firstSet(envOf(c, "CONCLAVE_MEMORY_REDIS_URL"), envOf(c, "REDIS_URL"), cfg.Memory.RedisURL),
	}
	for name, p := range cfg.LLM.Profiles {
		urls["llm.profiles."+name+".base_url"] = p.BaseURL
	}
	for _, s := range cfg.MCP.Servers {
		urls["mcp.servers "+s.Name+" url"] = s.URL
	}
	for k, v := range urls {
		if v == "" {
			delete(urls, k)
		}
	}
	return urls, nil
}

// envOf is the literal value of the container's variable, or "".
func envOf(c corev1.Container, name string) string {
	v, _ := env(c, name)
	return v
}

// firstSet is the first non-empty value.
func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// endpointPorts are the TCP ports a URL connects to: its port, else its
// scheme's; a Sentinel or Cluster URL's addr= hosts too.
func endpointPorts(raw string) ([]int32, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	def := map[string]string{
		"http": "80", "https": "443", "redis": "6379", "rediss": "6379",
		"redis+sentinel": "26379", "rediss+sentinel": "26379",
		"redis+cluster": "6379", "rediss+cluster": "6379",
	}[u.Scheme]
	if def == "" || u.Host == "" {
		return nil, fmt.Errorf("not a network URL")
	}
	hosts := append([]string{u.Host}, u.Query()["addr"]...)
	var ports []int32
	for _, h := range hosts {
		p := def
		if _, hp, err := net.SplitHostPort(h); err == nil {
			p = hp
		}
		n := portNumber(p)
		if n == 0 || n > 65535 {
			return nil, fmt.Errorf("bad port %q", p)
		}
		ports = append(ports, int32(n)) // #nosec G115 -- checked to fit above
	}
	return ports, nil
}

// checkEndpoints checks the policy's egress lets conclave reach every
// endpoint its configuration names, on its port.
func (b *bundle) checkEndpoints(p networkingv1.NetworkPolicy, c corev1.Container) []string {
	urls, err := b.configuredEndpoints(c)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, key := range slices.Sorted(maps.Keys(urls)) {
		ports, err := endpointPorts(urls[key])
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		for _, port := range ports {
			allowed := false
			for _, r := range p.Spec.Egress {
				allowed = allowed || allowsPort(c, r.Ports, port, corev1.ProtocolTCP)
			}
			if !allowed {
				problems = append(problems, fmt.Sprintf("egress does not allow %s (TCP %d); add the port to networkPolicy.egress", key, port))
			}
		}
	}
	return problems
}
