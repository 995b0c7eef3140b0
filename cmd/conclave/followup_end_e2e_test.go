package main

import (
	"strings"
	"testing"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

// TestFollowUpTheThreadAnswers: after a conclusion, a person's follow-up
// that the thread already answers gets the facilitator's :end:, with its
// signature or without, and no other agent takes a turn; :end: always
// concludes (SPEC §14.2), so conclude's answer to the follow-up is posted
// and the root has its ✅ again. Real wiring, the fake Slack, the fake
// model and Redis.
func TestFollowUpTheThreadAnswers(t *testing.T) {
	for _, end := range []string{"🧭 :end:", ":end:"} {
		t.Run(end, func(t *testing.T) {
			db := redistest.New(t)
			r := newRig(t, fakeslack.Options{EchoPosts: true})
			model := newCast(map[string][]string{
				"Elen/default":  {"🧭 :end:", end},
				"Elen/conclude": {"🧭 Your windscreen is covered; the deductible is €150.", "🧭 The deductible is €150."},
			}, "Elen")
			r.llm.Handle(model.reply)
			p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+slowClocks), nil)

			root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "Is my windscreen covered?"})
			r.waitPosts(t, p, 1)
			r.waitDone(t, p, root.TS, true)
			r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "what was the deductible again?"})
			r.waitPosts(t, p, 2)
			r.waitDone(t, p, root.TS, true)

			checkPosts(t, r.slack, "Elen: 🧭 Your windscreen is covered; the deductible is €150.", "Elen: 🧭 The deductible is €150.")
			checkCalls(t, model, "Elen/default", "Elen/conclude", "Elen/default", "Elen/conclude")
			concludes := requestsOf(r, model, "Elen/conclude")
			if len(concludes) != 2 {
				t.Fatalf("%d conclude requests, want 2", len(concludes))
			}
			if got := lastPrompt(concludes[1]); !strings.Contains(got, `The request to answer, from Ada: "what was the deductible again?".`) {
				t.Errorf("the follow-up's conclude prompt does not answer it:\n%s", got)
			}
		})
	}
}
