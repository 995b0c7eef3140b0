package main

import (
	"context"
	"encoding/json"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// TestMemoryManageCommands drives memory list, show and forget against a
// real Redis, on sessions a turn wrote through the store with its trace.
func TestMemoryManageCommands(t *testing.T) {
	db := redistest.New(t)
	cfgDir := writeFiles(t, map[string]string{
		// The audit lines are written whatever the level.
		"config.toml": cliConfig + "\n[log]\nlevel = \"warn\"\n\n[memory]\nkey_prefix = \"" + db.Prefix + "\"\n",
	})
	environ := map[string]string{"CONCLAVE_CONFIG": filepath.Join(cfgDir, "config.toml"), "REDIS_URL": db.URL}
	store := db.Store(t, memory.Options{})
	ctx := context.Background()
	const expert = "claudine.acme.137.protocol6022.eth"
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	turn := func(convID, key string, contents ...string) {
		t.Helper()
		var es []memory.SessionEntry
		for i, c := range contents {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			es = append(es, memory.SessionEntry{Role: role, Content: c, Author: "Ann (person)", ConversationID: convID, At: at})
		}
		l, err := store.AcquireLock(ctx, convID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Commit(ctx, l, memory.Commit{
			Conversation: memory.Conversation{ID: convID, Channel: "C1", ThreadTS: "1700000000." + convID},
			Sessions:     []memory.SessionAppend{{Namespace: expert, Key: key, Entries: es}},
			Traces:       []memory.TurnTrace{{TurnID: convID + "-t1", Body: []byte(`{"request":"` + contents[0] + `"}`)}},
			Release:      true,
		}); err != nil {
			t.Fatal(err)
		}
	}
	turn("conv-a", "C45653", "My card ends 4242.", "Noted.")
	turn("conv-b", "C45653", "I moved to Lyon.\nNew address soon.", "Thanks.")
	turn("conv-c", "C77777", "Another customer.", "Hello.")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("list", func(t *testing.T) {
		code, out, errOut := cli(t, environ, "memory", "list", "--agent", expert)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "KEY") {
			t.Fatalf("list =\n%s", out)
		}
		wantBytes := len("My card ends 4242.") + len("Noted.") + len("I moved to Lyon.\nNew address soon.") + len("Thanks.")
		if f := strings.Fields(lines[1]); len(f) != 4 || f[0] != "C45653" || f[1] != "4" || f[2] != strconv.Itoa(wantBytes) || f[3] != "2030-01-02T03:04:05Z" {
			t.Errorf("first row = %q, want C45653, 4 entries, %d bytes, 2030-01-02T03:04:05Z", lines[1], wantBytes)
		}
		if !strings.HasPrefix(lines[2], "C77777 ") {
			t.Errorf("second row = %q, want C77777", lines[2])
		}
		if !strings.Contains(errOut, "memory sessions listed") || !strings.Contains(errOut, me.Username) {
			t.Errorf("the log does not say who listed: %q", errOut)
		}
		code, out, _ = cli(t, environ, "memory", "list", "--agent", expert, "--prefix", "C7", "--json")
		var row struct {
			Key     string `json:"key"`
			Entries int    `json:"entries"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &row) != nil || row.Key != "C77777" || row.Entries != 2 {
			t.Errorf("list --prefix C7 --json: exit %d, %q", code, out)
		}
	})
	t.Run("show", func(t *testing.T) {
		code, out, errOut := cli(t, environ, "memory", "show", "--agent", expert, "C45653")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{
			`session "C45653" of ` + expert + ": 4 entries",
			"[2030-01-02T03:04:05Z] user · Ann (person) · conversation conv-a\n  My card ends 4242.\n",
			"  I moved to Lyon.\n  New address soon.\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(errOut, "memory session shown") || !strings.Contains(errOut, me.Username) {
			t.Errorf("the log does not say who looked: %q", errOut)
		}
	})
	t.Run("forget", func(t *testing.T) {
		code, out, errOut := cli(t, environ, "memory", "forget", "C45653", "--agent", expert)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if !strings.Contains(out, `forgot session "C45653" of `+expert+": 4 entries, and the traces of 2 conversation(s)") {
			t.Errorf("stdout = %q", out)
		}
		if !strings.Contains(errOut, "memory session forgotten") || !strings.Contains(errOut, me.Username) || !strings.Contains(errOut, "C45653") {
			t.Errorf("the log does not say who forgot what: %q", errOut)
		}
		// The expert's next conversation on that key reads an empty session.
		if got, err := store.ReadSession(ctx, expert, "C45653", 0); err != nil || len(got) != 0 {
			t.Errorf("session after forget = %+v, %v", got, err)
		}
		for _, id := range []string{"conv-a", "conv-b"} {
			if tr, err := store.Traces(ctx, id); err != nil || len(tr.Turns) != 0 {
				t.Errorf("traces of %s after forget: %d turns, %v", id, len(tr.Turns), err)
			}
		}
		if tr, err := store.Traces(ctx, "conv-c"); err != nil || len(tr.Turns) != 1 {
			t.Errorf("another customer's traces: %d turns, %v; want kept", len(tr.Turns), err)
		}
		if got, _ := store.ReadSession(ctx, expert, "C77777", 0); len(got) != 2 {
			t.Errorf("another customer's session holds %d entries, want 2", len(got))
		}
		_, out, _ = cli(t, environ, "memory", "list", "--agent", expert)
		if strings.Contains(out, "C45653") {
			t.Errorf("list after forget still shows the key:\n%s", out)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"memory", "show", "--agent", expert, "C00000"}, 1,
				`memory show: ` + expert + ` has no memory session "C00000" (conclave memory list --agent ` + expert + ` lists them)`},
			{[]string{"memory", "forget", "--agent", expert, "C45653"}, 1,
				`memory forget: ` + expert + ` has no memory session "C45653"`},
			{[]string{"memory", "list", "--agent", "nobody.acme.137.protocol6022.eth"}, 1,
				"memory list: unknown agent nobody.acme.137.protocol6022.eth: the configuration declares no such agent and its memory holds no session"},
			{[]string{"memory", "forget", "--agent", "claudine", "C77777"}, 1, "memory forget: --agent:"},
			{[]string{"memory", "forget", "--agent", expert}, 2, "memory forget needs the session KEY"},
			{[]string{"memory", "show", "C1"}, 2, "memory show needs --agent"},
			{[]string{"memory", "forget", "--agent", expert, "C77777", "C45653"}, 2, `unexpected argument "C45653"`},
		} {
			code, _, errOut := cli(t, environ, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.want)
			}
		}
		if got, _ := store.ReadSession(ctx, expert, "C77777", 0); len(got) != 2 {
			t.Errorf("bad commands changed another session: %d entries", len(got))
		}
	})
	t.Run("refused on the in-process store", func(t *testing.T) {
		noRedis := map[string]string{"CONCLAVE_CONFIG": environ["CONCLAVE_CONFIG"]}
		code, _, errOut := cli(t, noRedis, "memory", "list", "--agent", expert)
		if code != 1 || !strings.Contains(errOut, "memory.redis_url is not set") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
}
