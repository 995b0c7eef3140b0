package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/bot"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

// dmChannels declares C1, the channel direct messages may talk with.
const dmChannels = "\n[[channels]]\nid = \"C1\"\nagents = []\n"

// prompts writes n suggested prompts.
func prompts(n int) string {
	var list []string
	for i := range n {
		list = append(list, fmt.Sprintf("{ title = \"t%d\", message = \"m%d\" }", i, i))
	}
	return "suggested_prompts = [" + strings.Join(list, ", ") + "]\n"
}

// TestConfigDirectMessages: slack.dm_channel must name a [[channels]]
// entry; suggested prompts are at most four, each with a title and a
// message, and need dm_channel. Each mistake names its key.
func TestConfigDirectMessages(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want string
	}{
		{"unknown channel", "[slack]\ndm_channel = \"C2\"\n" + dmChannels, `slack.dm_channel: "C2" is not the id of a [[channels]] entry`},
		{"no channels", "[slack]\ndm_channel = \"C1\"\n", `slack.dm_channel: "C1" is not the id of a [[channels]] entry`},
		{"five prompts", "[slack]\ndm_channel = \"C1\"\n" + prompts(5) + dmChannels, "slack.suggested_prompts: 5 prompts; Slack shows at most 4"},
		{"prompts without dm_channel", "[slack]\n" + prompts(1), "slack.suggested_prompts: set without slack.dm_channel"},
		{"empty title", "[slack]\ndm_channel = \"C1\"\nsuggested_prompts = [{ title = \" \", message = \"m\" }]\n" + dmChannels, "slack.suggested_prompts[0].title: must not be empty"},
		{"no message", "[slack]\ndm_channel = \"C1\"\nsuggested_prompts = [{ title = \"t\" }]\n" + dmChannels, "slack.suggested_prompts[0].message: must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			if err := decodeConfig("c.toml", []byte(tt.toml), &cfg); err != nil {
				t.Fatalf("decode: %v", err)
			}
			cfg.applyEnv(noEnv)
			err := cfg.validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}

	cfg := defaultConfig()
	if err := decodeConfig("c.toml", []byte("[slack]\ndm_channel = \" C1 \"\n"+prompts(4)+dmChannels), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.applyEnv(noEnv)
	if err := cfg.validate(); err != nil {
		t.Fatalf("four prompts and a configured channel: %v", err)
	}
	want := []bot.SuggestedPrompt{{Title: "t0", Message: "m0"}, {Title: "t1", Message: "m1"}, {Title: "t2", Message: "m2"}, {Title: "t3", Message: "m3"}}
	if cfg.Slack.DMChannel != "C1" || !slices.Equal(cfg.Slack.suggestedPrompts(), want) {
		t.Errorf("dm_channel %q, prompts %+v; want C1 and %+v", cfg.Slack.DMChannel, cfg.Slack.suggestedPrompts(), want)
	}
}

// TestRunRefusesUnknownDMChannel: conclave does not start with a
// dm_channel that names no [[channels]] entry, and says why.
func TestRunRefusesUnknownDMChannel(t *testing.T) {
	r := newRig(t, fakeslack.Options{})
	path := r.config(t, "")
	rewrite(t, path, "[slack]\n", "[slack]\ndm_channel = \"C0999\"\n")
	var logs strings.Builder
	code := runMain(t.Context(), []string{"run", "--config", path}, env{
		getenv: noEnv, environ: func() []string { return nil },
		stdout: &logs, stderr: &logs, stdin: strings.NewReader(""),
	})
	if code == 0 || !strings.Contains(logs.String(), `slack.dm_channel: "C0999" is not the id of a [[channels]] entry`) {
		t.Errorf("exit %d, want a refusal naming slack.dm_channel:\n%s", code, logs.String())
	}
}
