package agents

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/conclavehq/conclave/internal/clip"
)

// traceCutMark ends a trace field that was cut to fit a trace entry.
const traceCutMark = " …[cut %d bytes]"

// capTraceEntry encodes tr in at most limit bytes (limit <= 0: no bound),
// cutting its largest text fields — requests as sent, replies, tool
// arguments and results — each with a mark saying how much went, the
// largest first, until it fits; if that is not enough, they are emptied.
// A store's per-conversation bound then holds for every entry, the newest
// included. tr is changed.
func capTraceEntry(tr *Trace, limit int) ([]byte, error) {
	body, err := json.Marshal(tr)
	if err != nil || limit <= 0 || len(body) <= limit {
		return body, err
	}
	for range 64 {
		f := largestTraceField(tr)
		text := f.get()
		if text == "" {
			break
		}
		keep := max(0, len(text)-(len(body)-limit)-64)
		mark := fmt.Sprintf(traceCutMark, len(text)-keep)
		if keep == 0 {
			f.set(strings.TrimSpace(mark)) // clip.Bytes takes 0 as no limit
		} else {
			f.set(clip.Bytes(text, keep, mark))
		}
		if body, err = json.Marshal(tr); err != nil || len(body) <= limit {
			return body, err
		}
	}
	for _, f := range traceFields(tr) {
		f.set("")
	}
	return json.Marshal(tr)
}

// traceField is one text field of a trace that may be long.
type traceField struct {
	get func() string
	set func(string)
}

// traceFields are the long text fields of tr. A request is kept as the
// JSON it was sent as; once cut, it is kept as a JSON string of the text.
func traceFields(tr *Trace) []traceField {
	str := func(p *string) traceField {
		return traceField{get: func() string { return *p }, set: func(s string) { *p = s }}
	}
	var out []traceField
	for i := range tr.Calls {
		c := &tr.Calls[i]
		out = append(out, traceField{
			get: func() string {
				var text string
				if json.Unmarshal(c.Request, &text) == nil {
					return text // cut before: its text, not its escapes
				}
				return string(c.Request)
			},
			set: func(s string) {
				if s == "" {
					c.Request = json.RawMessage("null")
					return
				}
				c.Request, _ = json.Marshal(s) // a string always encodes
			},
		})
		if c.Response != nil {
			out = append(out, str(&c.Response.Content))
		}
	}
	for i := range tr.Tools {
		out = append(out, str(&tr.Tools[i].Arguments), str(&tr.Tools[i].Result))
	}
	return out
}

// largestTraceField is the longest of traceFields(tr); a field reading
// "" when there is none.
func largestTraceField(tr *Trace) traceField {
	best := traceField{get: func() string { return "" }, set: func(string) {}}
	n := 0
	for _, f := range traceFields(tr) {
		if l := len(f.get()); l > n {
			best, n = f, l
		}
	}
	return best
}
