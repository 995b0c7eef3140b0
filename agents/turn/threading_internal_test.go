package turn

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseThreading(t *testing.T) {
	tests := []struct {
		name, raw string
		want      ThreadingReply
		outcome   string
	}{
		{"direct", `{"session": "C45653", "message": "on it"}`, ThreadingReply{"C45653", "on it"}, ThreadingOK},
		{"fenced", "```json\n{\"session\": \"C1\", \"message\": \"\"}\n```", ThreadingReply{Session: "C1"}, ThreadingOK},
		{"bare fence", "```\n{\"session\": \"C1\"}\n```", ThreadingReply{Session: "C1"}, ThreadingOK},
		{"prose around", "Sure! Here it is:\n{\"session\": \"C1\", \"message\": \"hi\"}\nHope this helps.", ThreadingReply{"C1", "hi"}, ThreadingOK},
		{"prose before a fence", "Here is the JSON:\n```json\n{\"session\": \"C1\"}\n```", ThreadingReply{Session: "C1"}, ThreadingOK},
		{"braces inside strings", `{"session": "C1", "message": "use {x} and }"}`, ThreadingReply{"C1", "use {x} and }"}, ThreadingOK},
		{"trailing comma", `{"session": "C1", "message": "hi",}`, ThreadingReply{"C1", "hi"}, ThreadingRepaired},
		{"single quotes", `{'session': 'C1'}`, ThreadingReply{Session: "C1"}, ThreadingRepaired},
		{"truncated", `{"session": "C45653", "message": "Looking at the cla`, ThreadingReply{"C45653", "Looking at the cla"}, ThreadingRepaired},
		{"truncated in a fence", "```json\n{\"session\": \"C2\", \"message\": \"x", ThreadingReply{"C2", "x"}, ThreadingRepaired},
		{"number session", `{"session": 45653, "message": null}`, ThreadingReply{Session: "45653"}, ThreadingOK},
		{"exponent session", `{"session": 1e3}`, ThreadingReply{Session: "1000"}, ThreadingOK},
		{"null session", `{"session": null, "message": "who?"}`, ThreadingReply{Message: "who?"}, ThreadingOK},
		{"extra keys", `{"session": "C1", "confidence": 0.9}`, ThreadingReply{Session: "C1"}, ThreadingOK},
		{"array root", `[{"session": "C1"}]`, ThreadingReply{Session: "C1"}, ThreadingOK},
		{"bool session", `{"session": true}`, ThreadingReply{}, ThreadingFailed},
		{"object message", `{"session": "C1", "message": {"text": "x"}}`, ThreadingReply{}, ThreadingFailed},
		{"plain text", "I cannot help with that.", ThreadingReply{}, ThreadingFailed},
		{"empty", "", ThreadingReply{}, ThreadingFailed},
		{"string root", `"C1"`, ThreadingReply{}, ThreadingFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, outcome, err := ParseThreading(tt.raw)
			if outcome != tt.outcome {
				t.Fatalf("outcome %q (err %v), want %q", outcome, err, tt.outcome)
			}
			if (err != nil) != (tt.outcome == ThreadingFailed) {
				t.Errorf("err = %v with outcome %q", err, outcome)
			}
			if got != tt.want {
				t.Errorf("reply %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseThreading(f *testing.F) {
	for _, s := range []string{
		`{"session": "C1", "message": "x"}`, "```json\n{\"session\": 1}\n```", `{"session": "C1",`,
		"text {\"a\": [1, {\"b\": \"}\"}]} more", `{'session': None}`, "{{{{", `"\u0000"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, outcome, err := ParseThreading(raw)
		switch outcome {
		case ThreadingOK, ThreadingRepaired:
			if err != nil {
				t.Fatalf("outcome %q with error %v", outcome, err)
			}
		case ThreadingFailed:
			if err == nil || r != (ThreadingReply{}) {
				t.Fatalf("failed outcome with reply %+v, err %v", r, err)
			}
		default:
			t.Fatalf("unknown outcome %q", outcome)
		}
		if !utf8.ValidString(raw) {
			return
		}
		if outcome == ThreadingOK && strings.TrimSpace(raw) != "" {
			if _, err := decodeThreading(strings.TrimSpace(raw)); err == nil && outcome != ThreadingOK {
				t.Fatal("valid JSON not read as ok")
			}
		}
	})
}

func TestMatchSession(t *testing.T) {
	existing := []string{"C45653", "claim-7781", "ACME Corp", "acme-corp", "Dupont SA", "C45654"}
	tests := []struct {
		key, want, kind string
	}{
		{"C45653", "C45653", MatchExact},
		{"c45653", "C45653", MatchCase},
		{"acme corp", "ACME Corp", MatchCase},
		{"Claim 7781", "claim-7781", MatchFuzzy},
		{"C-45653", "C45653", MatchFuzzy},
		{"C45655", "", ""},
		{"C4565", "", ""},
		{"Dupond SA", "Dupont SA", MatchFuzzy},
		{"Acme_Corp", "ACME Corp", MatchFuzzy}, // tie at 1.0: alphabetical
		{"something else", "", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, kind, _ := MatchSession(tt.key, existing, 0.75)
			if got != tt.want || kind != tt.kind {
				t.Errorf("MatchSession(%q) = %q (%s), want %q (%s)", tt.key, got, kind, tt.want, tt.kind)
			}
		})
	}
}
