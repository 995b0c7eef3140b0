package main

import (
	"slices"
	"testing"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

// TestRunShowsWhoWorks: with slack.status (the default), the thread says
// who works while turns run — Elen thinking, then Claudine asked — and
// the status is cleared once the answers are posted.
func TestRunShowsWhoWorks(t *testing.T) {
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	model := newCast(map[string][]string{
		"Elen/default":               {"🧭 " + claudineENS + ", is customer C45653's side mirror covered?", "🧭 :end:"},
		"Elen/conclude":              {"🧭 The mirror is covered."},
		"Claudine/context-not-found": {`{"session": "C45653", "message": ""}`},
		"Claudine/context-found":     {"📚 C45653's policy covers mirrors."},
	}, "Elen", "Claudine")
	r.llm.Handle(model.reply)
	p := start(t, r.config(t, redisSection(db.URL, db.Prefix)+slowClocks+claudineSection()+channelSection(elenENS, claudineENS)), nil)

	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: "Is my side mirror covered?"})
	r.waitPosts(t, p, 3)
	r.waitDone(t, p, root.TS, true)

	st := r.slack.Statuses()
	asked := slices.IndexFunc(st, func(s fakeslack.Status) bool { return slices.Contains(s.LoadingMessages, "Asking Claudine…") })
	thinking := slices.IndexFunc(st, func(s fakeslack.Status) bool { return slices.Contains(s.LoadingMessages, "Elen is thinking…") })
	if thinking < 0 || asked < 0 || st[asked].ThreadTS != root.TS || st[asked].Status == "" {
		t.Fatalf("statuses %+v: want Elen thinking and Claudine asked, in the thread\n%s", st, p.logs)
	}
	posts := r.slack.Posts()
	claudine := slices.IndexFunc(posts, func(p fakeslack.Post) bool { return p.Username == "Claudine" })
	if claudine < 0 || st[asked].Seq > posts[claudine].Seq {
		t.Errorf("Claudine asked (status %d) after her answer (post %d)", st[asked].Seq, posts[claudine].Seq)
	}
	// Cleared at the end: the last status of the thread is empty, set
	// after the last post.
	for {
		st = r.slack.Statuses()
		if last := st[len(st)-1]; last.Status == "" && last.Seq > posts[len(posts)-1].Seq {
			break
		}
		if _, err := r.slack.WaitCalls(waitCtx(t), "assistant.threads.setStatus", len(r.slack.CallsTo("assistant.threads.setStatus"))+1); err != nil {
			t.Fatalf("the status was not cleared: %+v\n%s", st, p.logs)
		}
	}
}
