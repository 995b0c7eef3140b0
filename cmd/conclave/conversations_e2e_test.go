package main

import (
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// The conversation tests run the built-in prompts through the real wiring,
// the fake Slack, the fake model and Redis, and assert on what the model
// receives (SPEC §12.3): a follow-up after a conclusion is answered on its
// own, an acknowledgement closes the thread again without a conclusion,
// an expert that cannot answer wakes the facilitator at once, an expert
// choosing a key sees the keys it has, and the facilitator knows its team.

// slowClocks turns the inactivity conclusion and the call timeout far
// away: whatever happens in these tests happens at once, not by a timer.
const slowClocks = "\n[conversation]\ntimeout = \"1h\"\ncall_timeout = \"1h\"\n"

// claudineSection declares Claudine, an expert with a mission and an
// expertise, and more settings lines.
func claudineSection(more ...string) string {
	return agentSection(claudineENS, "Claudine", "expert") +
		"attributes = { Mission = \"Give verified customer facts\", expertise = \"customer records\" }\n" +
		strings.Join(more, "\n") + "\n"
}

// requestsOf lists the requests the model received for key ("Elen/default").
func requestsOf(r *rig, m *castModel, key string) []llmfake.Request {
	var out []llmfake.Request
	for _, req := range r.llm.Requests() {
		if m.keyOf(req) == key {
			out = append(out, req)
		}
	}
	return out
}

// TestFollowUpAfterConclusion: a person asks, the facilitator has enough
// (🧭 :end:, which posts nothing but the conclusion), concludes; then the
// person asks a follow-up in the same thread, the facilitator sends it to
// Claudine, Claudine answers, and the facilitator ends again. Its default
// and conclude prompts quote the follow-up as the request to answer and
// Claudine's reply as material, never the first request or the expert's
// reply as the request, and the thread concludes again with one new
// answer (an expert took a turn: no silent close).
func TestFollowUpAfterConclusion(t *testing.T) {
	// The facilitator ends with its signature or without: the same, as an
	// expert took a turn since the follow-up.
	for _, end := range []string{"🧭 :end:", ":end:"} {
		t.Run(end, func(t *testing.T) {
			db := redistest.New(t)
			r := newRig(t, fakeslack.Options{EchoPosts: true})
			model := newCast(map[string][]string{
				"Elen/default":               {"🧭 :end:", "🧭 " + claudineENS + ", is customer C45653's side mirror covered?", end},
				"Elen/conclude":              {"🧭 Your windscreen is covered.", "🧭 The mirror is covered too."},
				"Claudine/context-not-found": {`{"session": "C45653", "message": ""}`},
				"Claudine/context-found":     {"📚 C45653's policy covers mirrors."},
			}, "Elen", "Claudine")
			r.llm.Handle(model.reply)
			p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+slowClocks+claudineSection()+channelSection(elenENS, claudineENS)), nil)

			root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "Is my windscreen covered?"})
			r.waitPosts(t, p, 1)
			r.waitDone(t, p, root.TS, true)
			r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "And the side mirror?"})
			r.waitPosts(t, p, 4)
			r.waitDone(t, p, root.TS, true)

			checkPosts(t, r.slack, "Elen: 🧭 Your windscreen is covered.",
				"Elen: 🧭 "+claudineENS+", is customer C45653's side mirror covered?",
				"Claudine: 📚 C45653's policy covers mirrors.",
				"Elen: 🧭 The mirror is covered too.")
			checkCalls(t, model, "Elen/default", "Elen/conclude", "Elen/default", "Claudine/context-not-found", "Claudine/context-found", "Elen/default", "Elen/conclude")
			const followUp = `The request to answer, from Ada: "And the side mirror?".`
			const material = `The latest message, from Claudine (` + claudineENS + `): "📚 C45653's policy covers mirrors.", is material for the answer, not a new request.`
			const first = `from Ada: "Is my windscreen covered?".`
			defaults, concludes := requestsOf(r, model, "Elen/default"), requestsOf(r, model, "Elen/conclude")
			if len(defaults) != 3 || len(concludes) != 2 {
				t.Fatalf("%d default and %d conclude requests, want 3 and 2", len(defaults), len(concludes))
			}
			// The follow-up's first default: it began the exchange.
			if got := lastPrompt(defaults[1]); !strings.Contains(got, followUp) {
				t.Errorf("the follow-up's first default prompt does not work from it:\n%s", got)
			}
			for what, req := range map[string]llmfake.Request{"the default after Claudine": defaults[2], "the follow-up's conclude": concludes[1]} {
				got := lastPrompt(req)
				if !strings.Contains(got, followUp) || !strings.Contains(got, material) || strings.Contains(got, "The request to answer, "+first) {
					t.Errorf("%s prompt does not answer the follow-up with Claudine's reply as material:\n%s", what, got)
				}
				if !strings.Contains(got, `It began with a request `+first) {
					t.Errorf("%s prompt does not say how the thread got here:\n%s", what, got)
				}
			}
			if got := lastPrompt(concludes[1]); !strings.Contains(got, "without repeating that answer") || strings.Contains(got, "The thread has") {
				t.Errorf("the follow-up's conclude prompt (no count after :end:, which would count the prompt and the reply):\n%s", got)
			}
			// The earlier exchange is context: the first conclusion is in the
			// history of the follow-up's turns.
			if h := strings.Join(history(defaults[1]), "\n"); !strings.Contains(h, "assistant: 🧭 Your windscreen is covered.") {
				t.Errorf("the follow-up's default history:\n%s", h)
			}
			// The facilitator knows its team: each agent with role, mission and
			// expertise, the mission read from a capitalised key.
			if sys := defaults[0].Messages[0].Content; !strings.Contains(sys, "Claudine, "+claudineENS+", expert; mission: Give verified customer facts; expertise: customer records.") {
				t.Errorf("the facilitator's system prompt does not list Claudine's mission and expertise:\n%s", sys)
			}
		})
	}
}

// TestThanksAfterConclusionClosesSilently: after a conclusion, a person's
// "thanks" reopens the thread; the facilitator's default (told to answer
// an acknowledgement with :end: alone) replies :end: alone, or with its
// signature, which runs conclude (SPEC §14.2); conclude, told the same,
// replies the same way: ✅ back, nothing posted.
func TestThanksAfterConclusionClosesSilently(t *testing.T) {
	for _, end := range []string{":end:", "🧭 :end:"} {
		t.Run(end, func(t *testing.T) {
			db := redistest.New(t)
			r := newRig(t, fakeslack.Options{EchoPosts: true})
			model := newCast(map[string][]string{
				"Elen/default":  {"🧭 :end:", end},
				"Elen/conclude": {"🧭 Your windscreen is covered.", end},
			}, "Elen")
			r.llm.Handle(model.reply)
			p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+slowClocks), nil)
			store := db.Store(t, memory.Options{})

			root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "Is my windscreen covered?"})
			r.waitPosts(t, p, 1)
			r.waitDone(t, p, root.TS, true)
			thanks := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, ThreadTS: root.TS, Text: "thanks!"})
			if st := waitRouted(waitCtx(t), t, store, root.TS, thanks.TS); st.Status == "" {
				t.Fatal("no state")
			}
			// Once the facilitator's reply to "thanks" was handled the thread is
			// concluded again and ✅ is back.
			ctx := waitCtx(t)
			for len(model.callLog()) < 4 || !storedConcluded(t, store, root.TS) {
				select {
				case <-ctx.Done():
					t.Fatalf("the thread did not close again; calls %v\n%s", model.callLog(), p.logs)
				case <-time.After(10 * time.Millisecond):
				}
			}
			r.waitDone(t, p, root.TS, true)
			checkCalls(t, model, "Elen/default", "Elen/conclude", "Elen/default", "Elen/conclude")
			checkPosts(t, r.slack, "Elen: 🧭 Your windscreen is covered.")
			defaults := requestsOf(r, model, "Elen/default")
			if len(defaults) != 2 {
				t.Fatalf("%d default requests, want 2", len(defaults))
			}
			if got := lastPrompt(defaults[1]); !strings.Contains(got, `The request to answer, from Ada: "thanks!".`) ||
				!strings.Contains(got, ":end: alone") {
				t.Errorf("the default prompt after the thanks:\n%s", got)
			}
			concludes := requestsOf(r, model, "Elen/conclude")
			if len(concludes) != 2 {
				t.Fatalf("%d conclude requests, want 2", len(concludes))
			}
			if got := lastPrompt(concludes[1]); !strings.Contains(got, `The request to answer, from Ada: "thanks!".`) ||
				!strings.Contains(got, "only thanks or acknowledges") || !strings.Contains(got, ":end: alone") {
				t.Errorf("the conclude prompt after the thanks:\n%s", got)
			}
		})
	}
}

// TestFacilitatorKnowsKeyFormats: an expert's key_format attribute, or
// else its session_pattern, is shown in the facilitator's team list and in
// the expert's own threading prompt.
func TestFacilitatorKnowsKeyFormats(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Elen/default":               {"🧭 " + claudineENS + ", what about claim CLM-123456?", "🧭 :end:"},
		"Elen/conclude":              {"🧭 Done."},
		"Claudine/context-not-found": {`{"session": "CLM-123456", "message": ""}`},
		"Claudine/context-found":     {"📚 Open."},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	claudine := agentSection(claudineENS, "Claudine", "expert") +
		"attributes = { expertise = \"claims\", key_format = \"claim number, e.g. CLM-123456\" }\n"
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+slowClocks+claudine+channelSection(elenENS, claudineENS)), nil)

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "What about claim CLM-123456?"})
	r.waitPosts(t, p, 3)
	defaults := requestsOf(r, model, "Elen/default")
	if len(defaults) == 0 {
		t.Fatal("no default request")
	}
	if sys := defaults[0].Messages[0].Content; !strings.Contains(sys, "Claudine, "+claudineENS+", expert; expertise: claims. Its memory keys: claim number, e.g. CLM-123456.") {
		t.Errorf("the facilitator's team list lacks Claudine's key format:\n%s", sys)
	}
	threadings := requestsOf(r, model, "Claudine/context-not-found")
	if len(threadings) != 1 {
		t.Fatalf("%d threading requests", len(threadings))
	}
	if got := lastPrompt(threadings[0]); !strings.Contains(got, "Your memory keys have this form: claim number, e.g. CLM-123456.") ||
		!strings.Contains(got, "or from the result of one of your tools") {
		t.Errorf("the threading prompt:\n%s", got)
	}
}

// TestExpertsThatCannotAnswerWakeTheFacilitator: the facilitator calls an
// expert that cannot answer — its policy refuses the new session its key
// needs, or its threading reply is empty — and its next request comes at
// once (the call and inactivity timeouts are an hour away), with a history
// line saying who could not answer and why.
func TestExpertsThatCannotAnswerWakeTheFacilitator(t *testing.T) {
	tests := []struct {
		name, settings, threading, note string
	}{
		{"policy never", `session_policy = "never"`, `{"session": "C99999", "message": ""}`,
			"(" + claudineENS + ` could not answer: it has no memory for "C99999" and may not start one)`},
		{"empty unbound reply", "", `{"session": "", "message": ""}`,
			"(" + claudineENS + " could not answer: it found no memory key in the messages that name it)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := redistest.New(t)
			r := newRig(t, fakeslack.Options{EchoPosts: true})
			model := newCast(map[string][]string{
				"Elen/default":               {"🧭 " + claudineENS + ", what do we know about customer C99999?", "🧭 Claudine cannot help; who handles C99999?"},
				"Claudine/context-not-found": {tt.threading},
			}, "Elen", "Claudine")
			r.llm.Handle(model.reply)
			p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+slowClocks+claudineSection(tt.settings)+channelSection(elenENS, claudineENS)), nil)

			r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "What do we know about customer C99999?"})
			r.waitPosts(t, p, 2)
			checkCalls(t, model, "Elen/default", "Claudine/context-not-found", "Elen/default")
			checkPosts(t, r.slack,
				"Elen: 🧭 "+claudineENS+", what do we know about customer C99999?",
				"Elen: 🧭 Claudine cannot help; who handles C99999?")
			defaults := requestsOf(r, model, "Elen/default")
			if len(defaults) != 2 {
				t.Fatalf("%d default requests, want 2", len(defaults))
			}
			next := defaults[1]
			if h := history(next); len(h) == 0 || h[len(h)-1] != "user: "+tt.note {
				t.Errorf("the facilitator's next history:\n%s\nwant it to end with %q", strings.Join(h, "\n"), tt.note)
			}
		})
	}
}

// TestThreadingOffersKnownKeys: in a first conversation the expert binds
// C45653; in a second, its threading prompt lists that key, so that the
// customer is remembered under one key; the second message writes it
// another way (c-45653), as a known key is bound only when the messages
// write it (SPEC §14.2).
func TestThreadingOffersKnownKeys(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Claudine/context-not-found": {`{"session": "C45653", "message": ""}`, `{"session": "C45653", "message": ""}`},
		"Claudine/context-found":     {"📚 C45653 moved to Lyon.", "📚 Still in Lyon."},
		"Elen/default":               {"🧭 Noted.", "🧭 Noted again."},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+slowClocks+claudineSection()+channelSection(elenENS, claudineENS)), nil)

	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", where does customer C45653 live?"})
	r.waitPosts(t, p, 2)
	r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", and customer c-45653's claims?"})
	r.waitPosts(t, p, 4)
	threadings := requestsOf(r, model, "Claudine/context-not-found")
	if len(threadings) != 2 {
		t.Fatalf("%d threading requests", len(threadings))
	}
	if got := lastPrompt(threadings[0]); strings.Contains(got, "Keys you already have") {
		t.Errorf("the first threading prompt offers keys the expert does not have:\n%s", got)
	}
	if got := lastPrompt(threadings[1]); !strings.Contains(got, "Keys you already have, most recently used first: C45653.") {
		t.Errorf("the second threading prompt does not offer the known key:\n%s", got)
	}
	checkPosts(t, r.slack, "Claudine: 📚 C45653 moved to Lyon.", "Elen: 🧭 Noted.", "Claudine: 📚 Still in Lyon.", "Elen: 🧭 Noted again.")
}

// storedConcluded reports whether the stored state of thread's
// conversation says concluded.
func storedConcluded(t *testing.T, store memory.Store, thread string) bool {
	t.Helper()
	st := waitRouted(waitCtx(t), t, store, thread, thread)
	return st.Status == "concluded"
}
