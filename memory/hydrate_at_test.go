package memory_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
)

// A hydrated line may say when it was written ("at": an RFC 3339 time or
// a date); the entry keeps that time.
func TestParseJSONLAt(t *testing.T) {
	input := `{"role":"user","content":"a","at":"2025-03-03T10:15:00+02:00"}
{"role":"assistant","content":"b","at":"2025-03-04"}
{"role":"user","content":"c"}`
	got, err := memory.ParseJSONL("F.jsonl", strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{time.Date(2025, 3, 3, 8, 15, 0, 0, time.UTC), time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC), {}}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i, w := range want {
		if !got[i].At.Equal(w) || got[i].At.Location() != time.UTC {
			t.Errorf("entry %d at %v, want %v (UTC)", i, got[i].At, w)
		}
	}
}

func TestParseJSONLAtErrors(t *testing.T) {
	for _, tt := range []struct{ name, input, want string }{
		{"not a time", `{"role":"user","content":"x","at":"yesterday"}`, `F.jsonl:1: "at" "yesterday" is neither an RFC 3339 time`},
		{"a time without zone", `{"role":"user","content":"x","at":"2025-03-03T10:15:00"}`, `F.jsonl:1: "at" "2025-03-03T10:15:00" is neither`},
		{"a number", `{"role":"user","content":"x","at":1741000000}`, `F.jsonl:1: "at" must be a string`},
		{"null", `{"role":"user","content":"x","at":null}`, `F.jsonl:1: "at" must be a string`},
		{"another key still refused", `{"role":"user","content":"x","when":"2025-03-03"}`, `F.jsonl:1: unknown key "when" (want role, content and an optional at)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := memory.ParseJSONL("F.jsonl", strings.NewReader(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) || got != nil {
				t.Errorf("ParseJSONL = %d entries, %v; want an error containing %q", len(got), err, tt.want)
			}
		})
	}
}

// Hydrate keeps an entry's own time and stamps the others with the
// import's; an entry dated after the import is refused, and nothing of
// the file is appended.
func TestHydrateKeepsEntriesTimes(t *testing.T) {
	for name, open := range storeKinds {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := t.Context()
			now := time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)
			own := time.Date(2025, 3, 3, 10, 15, 0, 0, time.UTC)
			entries := []memory.SessionEntry{{Role: "user", Content: "old", At: own}, {Role: "assistant", Content: "undated"}}
			if err := memory.Hydrate(ctx, s, "x.eth", "C45653", entries, now); err != nil {
				t.Fatal(err)
			}
			got, err := s.ReadSession(ctx, "x.eth", "C45653", 0)
			if err != nil || len(got) != 2 {
				t.Fatalf("session %+v, %v", got, err)
			}
			if !got[0].At.Equal(own) || !got[1].At.Equal(now) {
				t.Errorf("entries at %v and %v, want %v (its own) and %v (the import's)", got[0].At, got[1].At, own, now)
			}

			future := []memory.SessionEntry{{Role: "user", Content: "fine"}, {Role: "user", Content: "ahead", At: now.Add(time.Hour)}}
			err = memory.Hydrate(ctx, s, "x.eth", "C99999", future, now)
			if err == nil || !strings.Contains(err.Error(), "message 2 is dated 2027-03-01T10:00:00Z, later than now") {
				t.Errorf("Hydrate of a future entry: %v", err)
			}
			if got, _ := s.ReadSession(ctx, "x.eth", "C99999", 0); len(got) != 0 {
				t.Errorf("a refused hydration appended %d entries", len(got))
			}
		})
	}
}
