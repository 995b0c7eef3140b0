package memory_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
)

func TestParseJSONL(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []memory.SessionEntry
	}{
		{"all roles", `{"role":"user","content":"Claim C45653 was filed."}
{"role":"assistant","content":"Noted."}
{"role":"system","content":"Be brief."}
`, []memory.SessionEntry{
			{Role: "user", Content: "Claim C45653 was filed."},
			{Role: "assistant", Content: "Noted."},
			{Role: "system", Content: "Be brief."},
		}},
		{"blank lines, CRLF, BOM, no final newline", "\ufeff{\"role\":\"user\",\"content\":\"a\"}\r\n\r\n  \n{\"content\":\"b\\nc\",\"role\":\"assistant\"}",
			[]memory.SessionEntry{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b\nc"}}},
		{"content kept as written", `{"role":"user","content":"  {{.Name}} <@U1> "}`,
			[]memory.SessionEntry{{Role: "user", Content: "  {{.Name}} <@U1> "}}},
		{"long line", `{"role":"user","content":"` + strings.Repeat("x", 200_000) + `"}`,
			[]memory.SessionEntry{{Role: "user", Content: strings.Repeat("x", 200_000)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := memory.ParseJSONL("F.jsonl", strings.NewReader(tt.input))
			if err != nil {
				t.Fatalf("ParseJSONL: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("ParseJSONL = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseJSONLErrors(t *testing.T) {
	const good = `{"role":"user","content":"ok"}` + "\n"
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"unknown role", good + `{"role":"bot","content":"x"}`, "F.jsonl:2: role \"bot\" is not one of user, assistant, system"},
		{"role in capitals", `{"role":"User","content":"x"}`, "F.jsonl:1: role \"User\""},
		{"bad JSON", good + good + `{"role":"user","content":"x"`, "F.jsonl:3: invalid JSON"},
		{"trailing text", `{"role":"user","content":"x"} extra`, "F.jsonl:1: invalid JSON"},
		{"empty content", `{"role":"user","content":""}`, "F.jsonl:1: empty content"},
		{"blank content", `{"role":"user","content":" \n\t "}`, "F.jsonl:1: empty content"},
		{"missing content", `{"role":"user"}`, "F.jsonl:1: missing \"content\""},
		{"missing role", `{"content":"x"}`, "F.jsonl:1: missing \"role\""},
		{"content not a string", `{"role":"user","content":42}`, "F.jsonl:1: \"content\" must be a string"},
		{"null content", `{"role":"user","content":null}`, "F.jsonl:1: \"content\" must be a string"},
		{"role not a string", `{"role":["user"],"content":"x"}`, "F.jsonl:1: \"role\" must be a string"},
		{"array", `[{"role":"user","content":"x"}]`, "F.jsonl:1: want a JSON object"},
		{"string", `"hello"`, "F.jsonl:1: want a JSON object"},
		{"null", `null`, "F.jsonl:1: want a JSON object"},
		{"unknown key", `{"role":"user","content":"x","name":"Ann"}`, "F.jsonl:1: unknown key \"name\""},
		{"empty file", "", "F.jsonl: no messages"},
		{"only blank lines", "\n \n", "F.jsonl: no messages"},
		{"every bad line reported", "x\n" + good + "y\n", "F.jsonl:1: invalid JSON: invalid character 'x' looking for beginning of value\nF.jsonl:3: invalid JSON"},
		{"many bad lines summarised", strings.Repeat("x\n", 25), "F.jsonl: 5 more errors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := memory.ParseJSONL("F.jsonl", strings.NewReader(tt.input))
			if err == nil {
				t.Fatalf("ParseJSONL = %+v, want an error", got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if got != nil {
				t.Errorf("ParseJSONL returned %d entries with an error", len(got))
			}
		})
	}
}

// storeKinds open an empty store of each implementation.
var storeKinds = map[string]func(t *testing.T) memory.Store{
	"in-process": func(t *testing.T) memory.Store { return memory.NewInProcess(memory.Options{}) },
	"redis": func(t *testing.T) memory.Store {
		s, _ := newTestRedis(t)
		return s
	},
}

func TestHydrate(t *testing.T) {
	for name, open := range storeKinds {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := t.Context()
			at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			entries, err := memory.ParseJSONL("F.jsonl", strings.NewReader(`{"role":"system","content":"s"}`+"\n"+`{"role":"user","content":"u"}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := memory.Hydrate(ctx, s, "x.eth", "C45653", entries, at); err != nil {
				t.Fatalf("Hydrate: %v", err)
			}
			got, err := s.ReadSession(ctx, "x.eth", "C45653", 0)
			if err != nil || len(got) != 2 || got[0].Role != "system" || got[1].Content != "u" || !got[1].At.Equal(at) || got[1].ConversationID != "" {
				t.Errorf("session after Hydrate = %+v, %v", got, err)
			}
			if err := memory.Hydrate(ctx, s, "x.eth", "k", nil, at); err == nil {
				t.Error("Hydrate of nothing succeeded")
			}
			if err := memory.Hydrate(ctx, s, "", "k", entries, at); err == nil {
				t.Error("Hydrate without a namespace succeeded")
			}
		})
	}
}

// TestHydrateAtomic runs two hydrations of one session at once: each lands
// whole, never interleaved with the other.
func TestHydrateAtomic(t *testing.T) {
	const n = 400
	for name, open := range storeKinds {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			var wg sync.WaitGroup
			for _, who := range []string{"A", "B"} {
				entries := make([]memory.SessionEntry, n)
				for i := range entries {
					entries[i] = memory.SessionEntry{Role: "user", Content: fmt.Sprintf("%s%d", who, i)}
				}
				wg.Go(func() {
					if err := memory.Hydrate(t.Context(), s, "x.eth", "k", entries, time.Now()); err != nil {
						t.Errorf("Hydrate: %v", err)
					}
				})
			}
			wg.Wait()
			got, err := s.ReadSession(t.Context(), "x.eth", "k", 0)
			if err != nil || len(got) != 2*n {
				t.Fatalf("ReadSession = %d entries, %v; want %d", len(got), err, 2*n)
			}
			for i, e := range got {
				first := got[0].Content[:1]
				if i >= n {
					first = got[n].Content[:1]
				}
				if want := fmt.Sprintf("%s%d", first, i%n); e.Content != want {
					t.Fatalf("entry %d = %s, want %s: the appends interleaved", i, e.Content, want)
				}
			}
		})
	}
}
