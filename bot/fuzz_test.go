package bot

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conclavehq/conclave/agents"
)

// Seeds for the decoder: every shape the table test knows, plus oddities.
var decodeSeeds = []string{
	string(callback(`{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"hi &amp; <@U2>","ts":"1700000100.200000","event_ts":"1700000100.200000"}`)),
	string(callback(`{"type":"message","subtype":"thread_broadcast","channel":"C1","user":"U1","text":"x","ts":"2.000001","thread_ts":"1.000001"}`)),
	string(callback(`{"type":"message","subtype":"file_share","channel":"C1","user":"U1","text":"t","ts":"2.000001","files":[{"id":"F1","name":"a.pdf"},{}]}`)),
	string(callback(`{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"B2","username":"Jira","text":"t","ts":"2.000001"}`)),
	string(callback(`{"type":"message","subtype":"message_changed","channel":"C1","message":{"user":"U1","text":"new","ts":"1.1","thread_ts":"1.0"},"previous_message":{"user":"U1","text":"old","ts":"1.1"}}`)),
	string(callback(`{"type":"message","subtype":"message_deleted","channel":"C1","deleted_ts":"1.1","previous_message":{"user":"UBOT","bot_id":"BBOT","ts":"1.1"}}`)),
	string(callback(`{"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":"1.000001"}`)),
	string(callback(`{"type":"message","subtype":"channel_join","channel":"C1","user":"U1","ts":"1.000001"}`)),
	string(callback(`{"type":"message","channel":"C1","user":"UBOT","text":"own","ts":"1.000001"}`)),
	string(callback(`{"type":"message","subtype":"message_changed","channel":"C1","message":{"message":{"message":null}}}`)),
	string(callback(`{"type":"reaction_added"}`)),
	string(callback(`null`)),
	`{"type":"app_rate_limited"}`,
	`{"type":"event_callback","event":[]}`,
	`{}`,
	`[`,
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		ev, skip, err := decodeMessage(payload, testSelf)
		if err != nil || skip != "" {
			if ev != (agents.Event{}) {
				t.Errorf("a skipped or failed event came back filled: %+v", ev)
			}
			return
		}
		if ev.Channel == "" || ev.TS == "" {
			t.Errorf("event without channel or ts: %+v", ev)
		}
		if strings.HasPrefix(ev.Channel, "D") {
			t.Errorf("direct message let through: %+v", ev)
		}
		if ev.ThreadTS == ev.TS {
			t.Errorf("a root kept its own ts as thread: %+v", ev)
		}
		if ev.Kind != agents.EventMessage && ev.Kind != agents.EventEdited && ev.Kind != agents.EventDeleted {
			t.Errorf("unknown kind %d", ev.Kind)
		}
		if ev.Kind != agents.EventDeleted && (ev.BotID == testSelf.BotID || ev.UserID == testSelf.UserID) {
			t.Errorf("conclave's own post let through: %+v", ev)
		}
		if ev.Kind != agents.EventDeleted && !contentSubtypes[ev.Subtype] {
			t.Errorf("noise subtype %q let through", ev.Subtype)
		}
	})
}

func FuzzNormalizeText(f *testing.F) {
	for _, s := range []string{
		"hi <@U1>!", "<@U2|bob>", "<#C1|general> <#C2>", "<https://x.example/?a=1&amp;b=2|A &amp; B>",
		"<http://example.com|example.com>", "<!here> <!subteam^S1|@team> <!date^1^{x}|d>", "a &amp;lt; b",
		"x <y", "a <b <@U1>", "a <b\nc> d", "<>", "<|>", "<@>", "<#|>", "<!>", "&&amp;&lt;<&gt;>",
		"> quote\n```\n<code> & more\n```", "{{ .Field }}", "\x00\xff<\xfe|\x80>",
		"[a [b]](http://x)", "[s][1]\n\n[1]: http://x", "- ```\n  x\n  ```\n[s](http://x)", "~~~\n```\n~~~\n[s](http://x)",
		"`[a](b)` <@U1> <@W2|x>\n```\n<@U1>\n```",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := normalizeText(s, testNames)
		if !strings.ContainsAny(s, "<&") && out != s {
			t.Errorf("text without markup changed: %q → %q", s, out)
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Errorf("normalising %q gave invalid UTF-8 %q", s, out)
		}
		escaped := escapeSlack(s)
		if strings.Contains(escaped, "<") {
			t.Errorf("escaped text %q holds '<'", escaped)
		}
		if back := normalizeText(escaped, testNames); back != s {
			t.Errorf("escape then normalise: %q → %q → %q", s, escaped, back)
		}
		named := spellOutLinks(nameUsers(s, testNames))
		lines := strings.Split(named, "\n")
		for i, prose := range proseLines(lines) {
			if prose && (strings.Contains(lines[i], "](") || strings.Contains(lines[i], "]:") || userMention.MatchString(lines[i])) {
				t.Errorf("outbound text %q keeps link or mention markup in line %q", s, lines[i])
			}
		}
		if safe := escapeSlack(named); strings.Contains(safe, "<") {
			t.Errorf("outbound text %q holds '<'", safe)
		}
		md := escapeMarkdown(named)
		checkNoSlackToken(t, md)
		if fallback := escapeLeftovers(md); strings.Contains(fallback, "<") {
			t.Errorf("fallback %q holds '<'", fallback)
		}
	})
}

func FuzzSplitText(f *testing.F) {
	f.Add("short", uint16(0))
	f.Add(strings.Repeat("A sentence. ", 100), uint16(50))
	f.Add(strings.Repeat("para\n\n", 80)+strings.Repeat("x", 500), uint16(30))
	f.Add("```go\n"+strings.Repeat("code line\n", 100)+"```\ntail", uint16(10))
	f.Add(strings.Repeat("&amp;é", 200), uint16(7))
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		limit := 100 + int(n)%1000
		parts := splitText(s, limit)
		checkParts(t, s, parts, limit)
		// A cut in a long line may start a part with ``` (and so a code
		// block); the content check holds for text without backticks.
		if !strings.Contains(s, "`") {
			if got, want := contentOf(strings.Join(parts, "\n")), contentOf(s); got != want {
				t.Errorf("the parts lost or changed text:\n got %q\nwant %q", got, want)
			}
		}
	})
}
