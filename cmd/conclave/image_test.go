package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestImageBinary builds the binary with the Dockerfile's own build
// command (read from the Dockerfile, so the two cannot drift: the same
// flags, CGO_ENABLED=0, the version stamp), checks that it is static, and
// runs `--version` on it.
func TestImageBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary; skipped with -short")
	}
	dockerfile := readFile(t, "../../Dockerfile")
	m := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*) -o /out/conclave (\./cmd/conclave)$`).FindStringSubmatch(dockerfile)
	if m == nil {
		t.Fatal("the Dockerfile has no `RUN CGO_ENABLED=0 go build … -o /out/conclave ./cmd/conclave` line")
	}
	for _, arg := range []string{"ARG VERSION", "ARG COMMIT"} {
		if !strings.Contains(dockerfile, "\n"+arg) {
			t.Errorf("the Dockerfile does not declare %s", arg)
		}
	}
	bin := filepath.Join(t.TempDir(), "conclave")
	cmd := exec.Command("sh", "-c", m[1]+` -o "$OUT" `+m[2])
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7-image", "COMMIT=0123456789abcdef", "OUT="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", m[1], err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked; the distroless static image cannot run it")
		}
	}

	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^conclave v9\.8\.7-image \(commit 0123456789abcdef, go1\.\d+`).Match(out) {
		t.Errorf("--version = %q, want the stamped version and commit and the Go version", out)
	}
}
