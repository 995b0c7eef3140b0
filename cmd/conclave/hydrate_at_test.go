package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// memory hydrate keeps each line's own "at": the entries are dated when
// they were written, not on the import day; a line dated in the future
// refuses the file, and nothing is written.
func TestMemoryHydrateKeepsAt(t *testing.T) {
	db := redistest.New(t)
	cfgDir := writeFiles(t, map[string]string{
		"config.toml": cliConfig + "\n[memory]\nkey_prefix = \"" + db.Prefix + "\"\n",
		"dated.jsonl": `{"role":"user","content":"C45653 moved to Lyon.","at":"2025-03-03T10:15:00Z"}` + "\n" +
			`{"role":"assistant","content":"Noted.","at":"2025-03-04"}` + "\n",
		"future.jsonl": `{"role":"user","content":"From the future.","at":"2999-01-01"}` + "\n",
	})
	environ := map[string]string{"CONCLAVE_CONFIG": filepath.Join(cfgDir, "config.toml"), "REDIS_URL": db.URL}
	store := db.Store(t, memory.Options{})
	const claudine = "claudine.acme.137.protocol6022.eth"

	code, _, errOut := cli(t, environ, "memory", "hydrate", "--agent", claudine, "--session", "C45653", "--file", filepath.Join(cfgDir, "dated.jsonl"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, err := store.ReadSession(t.Context(), claudine, "C45653", 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("session %+v, %v", got, err)
	}
	for i, want := range []time.Time{time.Date(2025, 3, 3, 10, 15, 0, 0, time.UTC), time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)} {
		if !got[i].At.Equal(want) {
			t.Errorf("entry %d dated %v, want its own %v", i, got[i].At, want)
		}
	}

	code, _, errOut = cli(t, environ, "memory", "hydrate", "--agent", claudine, "--session", "C99999", "--file", filepath.Join(cfgDir, "future.jsonl"))
	if code != 1 || !strings.Contains(errOut, "message 1 is dated 2999-01-01T00:00:00Z, later than now") || !strings.Contains(errOut, "nothing was appended") {
		t.Errorf("a future line: exit %d: %s", code, errOut)
	}
	if got, _ := store.ReadSession(t.Context(), claudine, "C99999", 0); len(got) != 0 {
		t.Errorf("a refused file wrote %d entries", len(got))
	}
}
