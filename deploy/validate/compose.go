package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// checkCompose loads the Compose file at path as `docker compose config`
// does (schema validation, interpolation, normalisation) and checks that
// Redis keeps an append-only file and that the conclave container is
// hardened: a read-only root file system with a tmpfs for what must be
// written, no capabilities, no privilege gain, and only the public
// listener published (the operations listener is for the compose network).
func checkCompose(path string) []string {
	project, err := loadCompose(path)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	redis, ok := project.Services["redis"]
	if !ok || !strings.Contains(strings.Join(redis.Command, " "), "--appendonly yes") {
		bad("the redis service must run with --appendonly yes")
	}
	conclave, ok := project.Services["conclave"]
	if !ok {
		bad("no conclave service")
		return problems
	}
	if _, ok := conclave.DependsOn["redis"]; !ok {
		bad("conclave must depend on redis")
	}
	if v := conclave.Environment["CONCLAVE_MEMORY_REDIS_URL"]; v == nil || !strings.HasPrefix(*v, "redis://redis:") {
		bad("conclave must use the redis service (CONCLAVE_MEMORY_REDIS_URL)")
	}
	if !conclave.ReadOnly {
		bad("conclave must run with read_only: true")
	}
	if len(conclave.Tmpfs) == 0 {
		bad("conclave needs a tmpfs for /tmp (its root file system is read-only)")
	}
	if !slices.Contains(conclave.CapDrop, "ALL") {
		bad("conclave must drop every capability (cap_drop: [ALL])")
	}
	if !slices.Contains(conclave.SecurityOpt, "no-new-privileges:true") && !slices.Contains(conclave.SecurityOpt, "no-new-privileges") {
		bad("conclave must run with security_opt: [no-new-privileges:true]")
	}
	problems = append(problems, checkComposePorts(path, conclave)...)
	return problems
}

// checkComposePorts checks that conclave publishes the public listener
// only: the operations listener (http.ops_addr) must be set, so that
// /metrics, /readyz and pprof leave the public port, and must not be
// published on the host.
func checkComposePorts(path string, conclave types.ServiceConfig) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	public := composePort(conclave, "CONCLAVE_HTTP_ADDR", "8080")
	ops := composePort(conclave, "CONCLAVE_HTTP_OPS_ADDR", "")
	if ops == "" {
		bad("conclave must serve /metrics, /readyz and pprof on an operations listener of their own (CONCLAVE_HTTP_OPS_ADDR=:9090)")
	}
	published := false
	for _, p := range conclave.Ports {
		switch p.Target {
		case portNumber(public):
			published = true
		case portNumber(ops):
			bad("conclave publishes its operations port %s on the host; keep it to the compose network (expose:)", ops)
		default:
			bad("conclave publishes port %d, which is not its public listener (%s)", p.Target, public)
		}
	}
	if !published {
		bad("conclave must publish its public listener (port %s, the wallet page)", public)
	}
	return problems
}

// composePort is the port of one of conclave's address variables in the
// service's environment; def when it is not set or names no port.
func composePort(conclave types.ServiceConfig, variable, def string) string {
	if v := conclave.Environment[variable]; v != nil {
		if _, port, err := net.SplitHostPort(*v); err == nil {
			return port
		}
	}
	return def
}

// loadCompose loads the Compose file at path as `docker compose config`
// does: schema validation, interpolation from this process's environment,
// normalisation.
func loadCompose(path string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{path}, cli.WithOsEnv, cli.WithName("conclave"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return project, nil
}

// portNumber parses a port; an invalid one is 0, which no service uses.
func portNumber(s string) uint32 {
	var n uint32
	if _, err := fmt.Sscan(s, &n); err != nil {
		return 0
	}
	return n
}

// envAssignment is a variable line of .env.example: NAME=…
var envAssignment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=`)

// checkComposeEnv checks the Compose file passes every variable that
// .env.example lists to conclave: in the service's environment, or as an
// interpolation the file makes (the build's version and commit).
func checkComposeEnv(path, envExample string) []string {
	example, err := os.ReadFile(envExample) // #nosec G304 G703 -- the repository's own file, at a fixed path
	if err != nil {
		return []string{err.Error()}
	}
	compose, err := os.ReadFile(path) // #nosec G304 G703 -- the repository's own file, at a fixed path
	if err != nil {
		return []string{err.Error()}
	}
	project, err := loadCompose(path)
	if err != nil {
		return []string{err.Error()}
	}
	environment := project.Services["conclave"].Environment
	var problems []string
	for _, line := range strings.Split(string(example), "\n") {
		m := envAssignment.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		if _, ok := environment[name]; ok || strings.Contains(string(compose), "${"+name) {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: conclave does not get %s, which %s lists (environment: %s: ${%s:-})", path, name, filepath.Base(envExample), name, name))
	}
	return problems
}
