package prompttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/conclavehq/conclave/agents/llm"
)

// RenderRequest is the readable text of one request, as golden files keep
// it: who asks with which prompt, the settings the request sets (those it
// leaves to the profile are absent), then each message (its role, then
// its content with one sentence a line, as SplitSentences writes it), the
// tools offered and the tool rounds so far.
func RenderRequest(r llm.Request) string {
	var b strings.Builder
	field := func(name, value string) { fmt.Fprintf(&b, "%s: %s\n", name, value) }
	field("agent", r.Agent)
	field("role", r.Role)
	field("prompt", r.Prompt)
	if r.Profile != "" {
		field("profile", r.Profile)
	}
	if r.Model != "" {
		field("model", r.Model)
	}
	if r.Temperature != nil {
		field("temperature", strconv.FormatFloat(*r.Temperature, 'g', -1, 64))
	}
	if r.MaxTokens != 0 {
		field("max_tokens", strconv.Itoa(r.MaxTokens))
	}
	if r.JSON {
		field("json", "true")
	}
	section := func(title, body string) {
		fmt.Fprintf(&b, "\n===== %s =====\n%s\n", title, strings.TrimRight(body, "\n"))
	}
	for _, m := range r.Messages {
		section(m.Role, SplitSentences(m.Content))
	}
	for _, t := range r.Tools {
		section("tool "+t.Name, strings.TrimSpace(t.Description+"\n"+indentJSON(t.Parameters)))
	}
	for _, round := range r.ToolRounds {
		var calls strings.Builder
		calls.WriteString(round.Content)
		for _, c := range round.Calls {
			fmt.Fprintf(&calls, "\ncall %s %s", c.Name, indentJSON(json.RawMessage(c.Arguments)))
		}
		section("assistant (tool calls)", strings.TrimSpace(calls.String()))
		for i, res := range round.Results {
			name := ""
			if i < len(round.Calls) {
				name = " " + round.Calls[i].Name
			}
			section("tool result"+name, res)
		}
	}
	return b.String()
}

// indentJSON indents JSON text for reading; text that is not JSON is
// kept as it is.
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return string(raw)
	}
	return out.String()
}
