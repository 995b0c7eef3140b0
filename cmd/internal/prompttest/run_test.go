package prompttest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

const elenENS = "elen.acme.137.protocol6022.eth"

// profiles has only the default profile.
type profiles struct{}

func (profiles) Profile(string) (llm.Profile, error) { return llm.Profile{Model: "m"}, nil }

// failingChat fails every post as a transient error: the post stays
// pending, so the conversation never settles.
type failingChat struct{ agents.Chat }

func (failingChat) PostReply(context.Context, agents.Reply) ([]string, error) {
	return nil, errors.New("slack is down")
}

// options runs the tests of a new directory holding files, with Elen the
// facilitator of C1 and the built-in prompts; wrap, when set, wraps the
// chat the engine posts to.
func options(t *testing.T, files map[string]string, wrap func(agents.Chat) agents.Chat) (Options, *strings.Builder) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, "tests", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lib, err := templates.Open("", templates.Options{Clock: templates.FixedClock})
	if err != nil {
		t.Fatal(err)
	}
	cast := []ens.Agent{{Name: "Elen", EnsDomain: elenENS, Role: ens.RoleFacilitator, Attributes: map[string]string{"role": "facilitator"}}}
	directory, err := ens.New(ens.Options{}, cast)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = directory.Close() })
	var out strings.Builder
	return Options{
		Dir: dir, Channel: "C1", Agents: cast, Profiles: profiles{}, Now: templates.FixedClock, Out: &out,
		Start: func(p Ports) (Wiring, error) {
			store := memory.NewInProcess(memory.Options{})
			opts := agents.DefaultOptions()
			opts.Channels = []agents.ChannelConfig{{ID: "C1", Agents: []string{elenENS}}}
			opts.Owns = p.Owns
			opts.ShutdownGrace = time.Millisecond
			chat := p.Chat
			if wrap != nil {
				chat = wrap(chat)
			}
			eng := agents.New(opts, agents.Deps{
				Inbound: store, Conversations: store, Locks: store, Sessions: store, Registry: store, Pairings: store,
				Chat: chat, Model: p.Model, Resolver: directory,
				Prompts: func() agents.Prompts { return lib.Current() }, Now: templates.FixedClock})
			return Wiring{Engine: eng, Pair: func(ctx context.Context, user, agent string) error {
				_, _, err := store.PairHuman(ctx, user, agent)
				return err
			}}, nil
		},
	}, &out
}

func TestRun(t *testing.T) {
	o, out := options(t, map[string]string{"a.chat": "> Ada: hello\n< elen: 🧭 Hello Ada.\n= elen: Hello Ada\n"}, nil)
	o.Update = true
	sum, err := Run(context.Background(), o)
	if err != nil || sum != (Summary{Passed: 1}) {
		t.Fatalf("-update: %+v, %v\n%s", sum, err, out)
	}
	golden, err := os.ReadFile(filepath.Join(o.Dir, "tests", "a.golden", "001-elen-default.txt"))
	if err != nil || !strings.HasPrefix(string(golden), "agent: "+elenENS+"\nrole: facilitator\nprompt: default\n") {
		t.Errorf("golden file: %v\n%s", err, golden)
	}
	o.Update, o.Verbose = false, true
	out.Reset()
	if sum, err := Run(context.Background(), o); err != nil || sum != (Summary{Passed: 1}) {
		t.Fatalf("compare: %+v, %v\n%s", sum, err, out)
	}
	want := "PASS a (1 request(s))\nconversation:\n    > Ada: hello\n    Elen: 🧭 Hello Ada.\n1 passed, 0 failed\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

func TestRunNoTests(t *testing.T) {
	o, _ := options(t, nil, nil)
	if _, err := Run(context.Background(), o); !errors.Is(err, ErrNoTests) || !strings.Contains(err.Error(), "holds no tests/*.chat") {
		t.Errorf("err = %v", err)
	}
}

// A step whose agents never settle (a post that keeps failing) fails
// after StepTimeout, naming its line, and the test stops there.
func TestRunStepTimeout(t *testing.T) {
	o, out := options(t, map[string]string{"stuck.chat": "> Ada: hello\n< elen: Hello.\n> Ada in thread: never sent\n"},
		func(c agents.Chat) agents.Chat { return failingChat{c} })
	o.StepTimeout = 100 * time.Millisecond
	sum, err := Run(context.Background(), o)
	if err != nil || sum != (Summary{Failed: 1}) {
		t.Fatalf("%+v, %v", sum, err)
	}
	if !strings.Contains(out.String(), "stuck.chat:1: the agents had not settled 100ms after this line") || strings.Contains(out.String(), "never sent") {
		t.Errorf("output:\n%s", out)
	}
}
