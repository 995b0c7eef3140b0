package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

const (
	claudineENS = "claudine.acme.137.protocol6022.eth"
	victorENS   = "victor.acme.137.protocol6022.eth"
)

// claimsDesk is the configuration of the claims desk: the facilitator and
// two experts, keyed by customer and by claim.
const claimsDesk = `
[[agents]]
ens = "claudine.acme.137.protocol6022.eth"
name = "Claudine"
role = "expert"
attributes = { mission = "Knows every customer", expertise = "customers" }
session_policy = "pattern"
session_pattern = "C[0-9]{5}"

[[agents]]
ens = "victor.acme.137.protocol6022.eth"
name = "Victor"
role = "expert"
attributes = { mission = "Handles claims", expertise = "claims" }

[[channels]]
id = "C0001"
agents = ["elen.acme.137.protocol6022.eth", "claudine.acme.137.protocol6022.eth", "victor.acme.137.protocol6022.eth"]
`

// phaseOf tells a request's phase by its final message, the phase
// prompt of the built-in templates.
func phaseOf(req llmfake.Request) string {
	last := req.Messages[len(req.Messages)-1].Content
	switch {
	case strings.Contains(last, "Before answering, choose the memory key"):
		return "context-not-found"
	case strings.Contains(last, "Answer it from your memory and this thread"):
		return "context-found"
	case strings.Contains(last, "The conversation is closing"):
		return "conclude"
	case strings.Contains(last, "Decide whether the thread now holds enough"):
		return "default"
	}
	return "?"
}

// TestClaimsDeskEndToEnd runs a whole claims-desk conversation through
// Slack, the engine and Redis: the facilitator calls two experts in one
// message, both thread (one with fenced, trailing-comma JSON) and answer,
// the facilitator runs once after both, ends, and concludes. A second
// conversation shows the customer expert recalling its session.
func TestClaimsDeskEndToEnd(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Elen/default": {
			"🧭 " + claudineENS + ", what cover does customer C45653 have? And " + victorENS + ", what is the state of claim CLM-2025-00142?",
			"All facts are in. :end:",
			"🧭 Thanks, noted.",
		},
		"Claudine/context-not-found": {
			`{"session": "C45653", "message": ""}`,
			`{"session": "c45653", "message": ""}`,
		},
		"Claudine/context-found": {
			"📚 C45653 has comprehensive cover since 2021.",
			"📚 Still comprehensive cover, as established last time.",
		},
		"Victor/context-not-found": {
			"Here you go:\n```json\n{\"session\": \"CLM-2025-00142\", \"message\": \"🔍 Opening the claim file.\",}\n```",
		},
		"Victor/context-found": {"📚 Claim CLM-2025-00142 is open: windscreen, estimate 450 EUR."},
		"Elen/conclude":        {"🧭 Yes, we can pay: C45653 is fully covered and claim CLM-2025-00142 (450 EUR) is open."},
	}, "Elen", "Claudine", "Victor")
	r.llm.Handle(model.reply)
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+claimsDesk), nil)
	ctx := waitCtx(t)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson,
		Text: "Customer C45653 has a broken windscreen, claim CLM-2025-00142. Can we pay?"})
	if _, err := r.slack.WaitPosts(ctx, 6); err != nil {
		t.Fatalf("%v\nposts: %+v\n%s", err, r.slack.Posts(), p.logs)
	}
	if err := waitReaction(ctx, r.slack, testChannel, root.TS, "white_check_mark"); err != nil {
		t.Fatalf("%v\n%s", err, p.logs)
	}
	var got []string
	for _, post := range r.slack.Posts() {
		if post.ThreadTS != root.TS {
			t.Errorf("post outside the thread: %+v", post)
		}
		got = append(got, post.Username+": "+post.Text)
	}
	want := []string{
		"Elen: 🧭 " + claudineENS + ", what cover does customer C45653 have? And " + victorENS + ", what is the state of claim CLM-2025-00142?",
		"Claudine: 📚 C45653 has comprehensive cover since 2021.",
		"Victor: 🔍 Opening the claim file.",
		"Victor: 📚 Claim CLM-2025-00142 is open: windscreen, estimate 450 EUR.",
		"Elen: All facts are in.",
		"Elen: 🧭 Yes, we can pay: C45653 is fully covered and claim CLM-2025-00142 (450 EUR) is open.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("posts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	calls := model.callLog()
	wantCalls := []string{
		"Elen/default",
		"Claudine/context-not-found", "Claudine/context-found",
		"Victor/context-not-found", "Victor/context-found",
		"Elen/default", // once, after both experts answered
		"Elen/conclude",
	}
	if strings.Join(calls, " ") != strings.Join(wantCalls, " ") {
		t.Errorf("model calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(wantCalls, "\n"))
	}

	reqs := r.llm.Requests()
	t.Run("an expert sees only what names it", func(t *testing.T) {
		// Claudine's context-found request: system, the facilitator's call,
		// then the phase prompt. The person's root message does not name her.
		req := reqs[2]
		for _, m := range req.Messages[1 : len(req.Messages)-1] {
			if strings.Contains(m.Content, "Can we pay?") {
				t.Errorf("Claudine saw the root message: %q", m.Content)
			}
		}
		if !strings.Contains(req.Messages[0].Content, "The key of this conversation is C45653.") {
			t.Errorf("system prompt does not carry the bound session:\n%s", req.Messages[0].Content)
		}
	})
	t.Run("the conclusion sees the thread, the previous prompt and the :end: reply", func(t *testing.T) {
		req := reqs[6]
		n := len(req.Messages)
		if n < 4 || req.Messages[n-2].Role != "assistant" || req.Messages[n-2].Content != "All facts are in. :end:" {
			t.Fatalf("conclude messages: %+v", req.Messages)
		}
		if req.Messages[n-3].Role != "user" || phaseOfText(req.Messages[n-3].Content) != "default" {
			t.Errorf("the previous facilitator prompt is not before the :end: reply: %q", req.Messages[n-3].Content)
		}
	})

	// A second conversation: the root names Claudine, who binds the same
	// customer (written in lowercase) and is given her earlier answer.
	second := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson,
		Text: "@" + claudineENS + " is c45653 still covered?"})
	if _, err := r.slack.WaitPosts(ctx, 8); err != nil {
		t.Fatalf("%v\nposts: %+v\ncalls: %v\n%s", err, r.slack.Posts(), model.callLog(), p.logs)
	}
	all := r.slack.Posts()
	if all[6].Username != "Claudine" || all[6].ThreadTS != second.TS || all[7].Username != "Elen" {
		t.Errorf("second conversation posts: %s / %s", all[6].Username+": "+all[6].Text, all[7].Username+": "+all[7].Text)
	}
	calls = model.callLog()
	if strings.Join(calls[7:], " ") != "Claudine/context-not-found Claudine/context-found Elen/default" {
		t.Errorf("second conversation calls: %v (the expert named by the root answers first)", calls[7:])
	}
	recall := r.llm.Requests()[8]
	joined := strings.Join(history(recall), "\n")
	if !regexp.MustCompile(`assistant: \(earlier, \d{4}-\d{2}-\d{2}\) 📚 C45653 has comprehensive cover since 2021\.`).MatchString(joined) {
		t.Errorf("Claudine does not recall her session:\n%s", joined)
	}
	if strings.Contains(joined, "windscreen, estimate 450 EUR") {
		t.Errorf("Claudine saw Victor's answer, which never named her:\n%s", joined)
	}
}

func phaseOfText(s string) string {
	return phaseOf(llmfake.Request{Messages: []llmfake.Message{{Content: s}}})
}

func waitReaction(ctx context.Context, s *fakeslack.Server, channel, ts, name string) error {
	for {
		if slices.Contains(s.Reactions(channel, ts), name) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no %s reaction on %s (have %v)", name, ts, s.Reactions(channel, ts))
		case <-time.After(10 * time.Millisecond):
		}
	}
}
