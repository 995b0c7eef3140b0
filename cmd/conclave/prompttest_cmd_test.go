package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// promptRepo is a config repository for `templates test`: a configuration
// (the claims desk: a facilitator, an expert, a human agent), one
// template and the tests given; it returns the config file's path and the
// templates directory.
func promptRepo(t *testing.T, tests map[string]string) (config, dir string) {
	t.Helper()
	files := map[string]string{
		"templates/facilitator/default.tmpl": "The latest message: \"{{.LatestRequest.Content}}\".\nCall an expert by its full ENS name, or answer.\n",
	}
	for name, body := range tests {
		files["templates/tests/"+name] = body
	}
	root := writeFiles(t, files)
	dir = filepath.Join(root, "templates")
	config = filepath.Join(root, "config.toml")
	body := `[llm]
base_url = "http://127.0.0.1:9/v1"   # never called: the model is scripted
model = "m"

[templates]
dir = "` + filepath.ToSlash(dir) + `"

[[agents]]
ens = "elen.acme.137.protocol6022.eth"
name = "Elen"
role = "facilitator"

[[agents]]
ens = "claudine.acme.137.protocol6022.eth"
name = "Claudine"
role = "expert"
attributes = { expertise = "CRM" }

[[agents]]
ens = "arnaud.acme.137.protocol6022.eth"
name = "Arnaud"
role = "human"

[[channels]]
id = "C0001"
agents = ["elen.acme.137.protocol6022.eth", "claudine.acme.137.protocol6022.eth"]
`
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config, dir
}

const claimsChat = `# Ada asks; Elen calls Claudine, who picks a key and answers.
> Ada: Is claim CLM-1 of customer C45653 covered?
< elen: claudine.acme.137.protocol6022.eth, what cover has C45653?
< Claudine: {"session": "C45653", "message": ""}
< claudine.acme.137.protocol6022.eth: C45653 has the gold cover since 2021.
< elen: 🧭 CLM-1 is covered under gold.
= claudine: gold cover
= Elen: is covered
`

// The authoring loop: -update writes the golden requests, a run compares
// them, and an edited template fails with a diff naming the golden file
// and the changed line.
func TestTemplatesTestLoop(t *testing.T) {
	config, dir := promptRepo(t, map[string]string{"claims.chat": claimsChat})

	code, stdout, stderr := cli(t, nil, "templates", "test", "--config", config, "-update")
	if code != 0 || !strings.HasSuffix(stdout, "\n1 passed, 0 failed\n") {
		t.Fatalf("-update: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	golden := filepath.Join(dir, "tests", "claims.golden")
	names, err := filepath.Glob(filepath.Join(golden, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"001-elen-default.txt", "002-claudine-context-not-found.txt", "003-claudine-context-found.txt", "004-elen-default.txt"}
	if len(names) != len(want) {
		t.Fatalf("golden files %v, want %v", names, want)
	}
	for i, name := range names {
		if filepath.Base(name) != want[i] {
			t.Errorf("golden file %d = %s, want %s", i, filepath.Base(name), want[i])
		}
	}
	first, err := os.ReadFile(filepath.Join(golden, want[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"agent: elen.acme.137.protocol6022.eth\nrole: facilitator\nprompt: default\n", "===== system =====\n",
		"===== user =====\nAda (person): Is claim CLM-1 of customer C45653 covered?\n", "Call an expert by its full ENS name, or answer."} {
		if !strings.Contains(string(first), s) {
			t.Errorf("%s lacks %q:\n%s", want[0], s, first)
		}
	}

	code, stdout, stderr = cli(t, nil, "templates", "test", "--config", config)
	if code != 0 || stdout != "PASS claims (4 request(s))\n1 passed, 0 failed\n" {
		t.Fatalf("a run after -update: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	tmpl := filepath.Join(dir, "facilitator", "default.tmpl")
	edited := "The latest message: \"{{.LatestRequest.Content}}\".\nCall one expert by its full ENS name, or answer.\n"
	if err := os.WriteFile(tmpl, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = cli(t, nil, "templates", "test", "--config", config, dir)
	if code != 1 || !strings.HasSuffix(stdout, "\n0 passed, 1 failed\n") {
		t.Fatalf("after an edit: exit %d, want 1\nstdout:\n%s", code, stdout)
	}
	for _, s := range []string{
		"FAIL claims (4 request(s))",
		filepath.Join(golden, "001-elen-default.txt") + ": the request differs (run with -update to accept it):",
		"--- " + filepath.Join(golden, "001-elen-default.txt") + "\n",
		// The template's lines are joined when rendered; the golden file
		// keeps one sentence a line, so the edit is a one-line diff.
		"\n The latest message: \"Is claim CLM-1 of customer C45653 covered?\".\n" +
			"-  Call an expert by its full ENS name, or answer.\n" +
			"+  Call one expert by its full ENS name, or answer.\n",
		"004-elen-default.txt: the request differs",
		"conversation:\n    > Ada: Is claim CLM-1 of customer C45653 covered?\n",
	} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	if strings.Contains(stdout, "002-claudine") {
		t.Errorf("the expert's requests did not change, yet they are reported:\n%s", stdout)
	}
}

// A human agent speaks in the script; the engine waits for nobody.
func TestTemplatesTestHumanAgent(t *testing.T) {
	// Arnaud is not an agent of the channel: naming him reaches no one,
	// so Elen is told at once (SPEC §14.7) and answers that first.
	config, _ := promptRepo(t, map[string]string{"human.chat": `> Ada: Is claim CLM-1 covered?
< elen: arnaud.acme.137.protocol6022.eth, can you confirm CLM-1?
< elen: Let us wait for Arnaud.
> Arnaud in thread: Confirmed, CLM-1 is covered.
< elen: 🧭 Arnaud confirms: CLM-1 is covered.
= elen: Arnaud confirms
`})
	code, stdout, stderr := cli(t, nil, "templates", "test", "--config", config, "-update", "-v")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, s := range []string{"PASS human (3 request(s), golden files written)", "    > Arnaud in thread: Confirmed, CLM-1 is covered.\n    Elen: 🧭 Arnaud confirms"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
}

// Each way a test fails says where and why.
func TestTemplatesTestFailures(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   []string
	}{
		{"a line that does not parse", "> Ada: hello\nhello there\n> Ada Is it covered?\n", []string{
			`claims.chat:2: expected "> Name: text", "> Name in thread: text", "< agent: reply", "= agent: text", "? agent: contains \"text\"", "# comment" or a blank line; got "hello there"`,
			`claims.chat:3: expected a colon after the name, as in "> Name: text"; got "> Ada Is it covered?"`,
		}},
		{"a reply in thread first", "> Ada in thread: hello\n", []string{
			`claims.chat:1: a reply in thread before any message: the first person's line starts the thread ("> Ada: text")`}},
		{"a reply before any person", "< elen: hello\n> Ada: hi\n", []string{
			`claims.chat:1: a scripted reply before the first person's line: it belongs to the person's line above it`}},
		{"a reply no request asked for", "> Ada: hello\n< elen: Hello.\n< claudine: I was never called.\n", []string{
			`claims.chat:3: a reply is scripted for Claudine, but Claudine sent no request for it after line 1`}},
		{"a request with no reply", "> Ada: Is C45653 covered?\n< elen: claudine.acme.137.protocol6022.eth, what cover has C45653?\n", []string{
			`claims.chat:1: no scripted reply for Claudine's context-not-found request (request 2, from claudine.acme.137.protocol6022.eth): script it with "< claudine: …" after line 1`}},
		{"an unmet expectation", "> Ada: hello\n< elen: Hello.\n= elen: goodbye\n", []string{
			`claims.chat:3: no post by Elen after line 1 contains "goodbye"; Elen posted "Hello."`}},
		{"an unknown agent", "> Ada: hello\n< victor: hi\n", []string{
			`claims.chat:2: no agent named "victor"; the agents are Elen (elen.acme.137.protocol6022.eth, facilitator), Claudine`}},
		{"an agent speaking as a person", "> Elen: hello\n", []string{
			`claims.chat:1: Elen is an agent (facilitator), not a person: script its model reply with "< Elen: reply"`}},
		{"a reply for a human agent", "> Ada: hello\n< arnaud: hi\n", []string{
			`claims.chat:2: Arnaud is a human agent: it calls no model and posts nothing itself; it speaks with "> Arnaud in thread: text"`}},
		{"no person's line", "# nothing\n", []string{`claims.chat: no person's line ("> Name: text"): nothing to run`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config, _ := promptRepo(t, map[string]string{"claims.chat": tt.script})
			code, stdout, stderr := cli(t, nil, "templates", "test", "--config", config, "-update")
			if code != 1 || !strings.HasSuffix(stdout, "\n0 passed, 1 failed\n") {
				t.Errorf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, s := range tt.want {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
		})
	}
}

// A golden file gone stale, or missing, fails the run and is named.
func TestTemplatesTestGoldenFiles(t *testing.T) {
	config, dir := promptRepo(t, map[string]string{"claims.chat": claimsChat})
	if code, stdout, _ := cli(t, nil, "templates", "test", "--config", config, "-update"); code != 0 {
		t.Fatalf("-update: exit %d\n%s", code, stdout)
	}
	golden := filepath.Join(dir, "tests", "claims.golden")
	stale := filepath.Join(golden, "005-elen-conclude.txt")
	if err := os.WriteFile(stale, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(golden, "002-claudine-context-not-found.txt")); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := cli(t, nil, "templates", "test", "--config", config)
	for _, s := range []string{
		stale + ": no request matches it any more (run with -update to remove it)",
		filepath.Join(golden, "002-claudine-context-not-found.txt") + ": no such golden file: the request is new (run with -update to write it)",
	} {
		if code != 1 || !strings.Contains(stdout, s) {
			t.Errorf("exit %d, stdout lacks %q:\n%s", code, s, stdout)
		}
	}
	if code, stdout, _ := cli(t, nil, "templates", "test", "--config", config, "-update"); code != 0 {
		t.Fatalf("-update: exit %d\n%s", code, stdout)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("-update left the stale golden file (%v)", err)
	}
	if code, stdout, _ := cli(t, nil, "templates", "test", "--config", config); code != 0 {
		t.Errorf("after -update: exit %d\n%s", code, stdout)
	}
}

// Usage and configuration errors exit 2.
func TestTemplatesTestUsage(t *testing.T) {
	config, dir := promptRepo(t, nil)
	bare := filepath.Join(dir, "bare.toml")
	if err := os.WriteFile(bare, []byte("[llm]\nmodel = \"m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no tests", []string{"--config", config}, "holds no tests/*.chat (write a conversation there, see docs/authoring.md)"},
		{"two directories", []string{"--config", config, dir, dir}, "unexpected argument"},
		{"a configuration that does not load", []string{"--config", filepath.Join(dir, "missing.toml"), dir}, "missing.toml"},
		{"an unknown flag", []string{"--config", config, "--frobnicate"}, "flag provided but not defined: -frobnicate"},
		{"no channel", []string{"--config", bare, dir}, "no channel: pass --channel or declare one in [[channels]]"},
		{"a channel without agents", []string{"--config", config, "--channel", "C0404"}, `channel "C0404" has no agents: declare them in its [[channels]] entry`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := cli(t, nil, append([]string{"templates", "test"}, tt.args...)...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want 2 and %q in stderr\nstdout:\n%s\nstderr:\n%s", code, tt.want, stdout, stderr)
			}
		})
	}
}

// The example repository's test (docs/authoring.md shows its output)
// passes: a prompt change that alters it shows in review as a change of
// its golden files.
func TestTemplatesTestShippedExample(t *testing.T) {
	code, stdout, stderr := cli(t, nil, "templates", "test", "--config", "../../config.example.toml", "../../templates/testdata/examples")
	if code != 0 || stdout != "PASS claims-desk (11 request(s))\n1 passed, 0 failed\n" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

func TestTemplatesTestHelp(t *testing.T) {
	code, stdout, _ := cli(t, nil, "templates", "test", "--help")
	for _, s := range []string{"Usage: conclave templates test [flags]", "-update", "An argument after the flags names the templates directory"} {
		if code != 0 || !strings.Contains(stdout, s) {
			t.Errorf("exit %d, help lacks %q:\n%s", code, s, stdout)
		}
	}
}
