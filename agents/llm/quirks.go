package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/kaptinlin/jsonrepair"
	openai "github.com/sashabaranov/go-openai"
)

// How models actually write (SPEC §14.7): a reply is cleaned here, before
// anything reads it, so that no reader (the engine's mention matching,
// :end:, the threading JSON, Slack) ever sees reasoning or a tool call
// written as text.

// reasoningTags are the blocks in which reasoning models think aloud
// (DeepSeek-R1 and Qwen3 write <think>, others <thinking> or
// <reasoning>).
var reasoningTags = []string{"think", "thinking", "reasoning"}

// splitReasoning removes the reasoning blocks from content and returns
// what is left and the blocks' text, joined by blank lines. A block whose
// closing tag never comes (a reply cut by the length limit) runs to the
// end; a closing tag with no opening one before it (an endpoint whose
// chat template put the opening tag in the prompt) ends a block that
// began with the reply.
func splitReasoning(content string) (reply, reasoning string) {
	var thought []string
	if tag, at := firstTag(content, false); at >= 0 {
		if open, _ := firstTag(content[:at], true); open == "" {
			thought = append(thought, content[:at])
			content = content[at+len(tag)+3:]
		}
	}
	for {
		tag, at := firstTag(content, true)
		if at < 0 {
			break
		}
		body := content[at+len(tag)+2:]
		end := indexFold(body, "</"+tag+">")
		if end < 0 {
			thought = append(thought, body)
			content = content[:at]
			break
		}
		thought = append(thought, body[:end])
		content = content[:at] + body[end+len(tag)+3:]
	}
	if len(thought) == 0 {
		return content, ""
	}
	for i, t := range thought {
		thought[i] = strings.TrimSpace(t)
	}
	return strings.TrimSpace(content), strings.TrimSpace(strings.Join(thought, "\n\n"))
}

// firstTag finds the first opening (open) or closing reasoning tag of s,
// in any case: the tag's name and its byte offset, or -1.
func firstTag(s string, open bool) (string, int) {
	best, at := "", -1
	for _, tag := range reasoningTags {
		t := "<" + tag + ">"
		if !open {
			t = "</" + tag + ">"
		}
		if i := indexFold(s, t); i >= 0 && (at < 0 || i < at) {
			best, at = tag, i
		}
	}
	return best, at
}

// indexFold is strings.Index ignoring ASCII case; sub is lowercase ASCII.
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return -1
		}
		i += j
		if i+len(sub) <= len(s) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// visibleSoFar is what a stream shows of the content written so far: the
// reasoning removed, an open block hidden, and nothing of a tag still
// being written (a "<thi" or "<|python" at the end).
func visibleSoFar(content string) string {
	reply, _ := splitReasoning(content)
	if i := textCallStart(reply); i >= 0 {
		reply = reply[:i]
	}
	if i := strings.LastIndexByte(reply, '<'); i >= 0 {
		tail := strings.ToLower(reply[i:])
		for _, m := range append([]string{pythonTag, toolCallOpen}, "<think>", "<thinking>", "<reasoning>") {
			if len(tail) < len(m) && strings.HasPrefix(m, tail) {
				return strings.TrimSpace(reply[:i])
			}
		}
	}
	return reply
}

// Markers of tool calls written as text: Llama 3.x's <|python_tag|>
// (ended by <|eom_id|> or <|eot_id|>, or the reply's end) and the
// <tool_call>…</tool_call> blocks of Hermes-style templates.
const (
	pythonTag     = "<|python_tag|>"
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

var llamaEnds = []string{"<|eom_id|>", "<|eot_id|>"}

// textCallStart is the offset of the first text tool call in s, or -1.
func textCallStart(s string) int {
	i, j := strings.Index(s, pythonTag), indexFold(s, toolCallOpen)
	switch {
	case i < 0:
		return j
	case j < 0 || i < j:
		return i
	}
	return j
}

// cutTextCalls removes the tool calls written as text from content and
// returns what is left and the calls it could read (each a JSON object
// with "name" and "parameters" or "arguments"; several may follow one
// tag, separated by ";" or new lines). What cannot be read is dropped
// all the same: a call is never posted.
func cutTextCalls(content string) (string, []ToolCall) {
	var calls []ToolCall
	for {
		at := textCallStart(content)
		if at < 0 {
			break
		}
		var body, after string
		if strings.HasPrefix(content[at:], pythonTag) {
			body = content[at+len(pythonTag):]
			for _, end := range llamaEnds {
				if k := strings.Index(body, end); k >= 0 {
					body, after = body[:k], body[k+len(end):]+after
					break
				}
			}
		} else {
			body = content[at+len(toolCallOpen):]
			if k := indexFold(body, toolCallClose); k >= 0 {
				body, after = body[:k], body[k+len(toolCallClose):]
			}
		}
		calls = append(calls, readTextCalls(body)...)
		content = content[:at] + after
	}
	for _, end := range llamaEnds {
		content = strings.ReplaceAll(content, end, "")
	}
	return strings.TrimSpace(content), calls
}

// readTextCalls reads the JSON objects of one text tool call, separated
// by blanks, ";" or ",".
func readTextCalls(body string) []ToolCall {
	var calls []ToolCall
	for {
		body = strings.TrimLeft(body, " \t\r\n;,")
		if body == "" {
			return calls
		}
		dec := json.NewDecoder(strings.NewReader(body))
		var c struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
			Arguments  json.RawMessage `json:"arguments"`
		}
		if dec.Decode(&c) != nil {
			return calls
		}
		body = body[dec.InputOffset():]
		args := c.Parameters
		if len(args) == 0 {
			args = c.Arguments
		}
		var s string
		if json.Unmarshal(args, &s) == nil { // arguments as a JSON string
			args = json.RawMessage(s)
		}
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		if name := strings.TrimSpace(c.Name); name != "" {
			calls = append(calls, ToolCall{Name: name, Arguments: string(args)})
		}
	}
}

// repairArguments makes a tool call's arguments valid JSON when jsonrepair
// can (a missing brace, single quotes, a trailing comma); blank arguments
// become {}. Arguments it cannot repair are left for the tool to refuse.
func repairArguments(args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	if json.Valid([]byte(args)) {
		return args
	}
	if fixed, err := jsonrepair.Repair(args); err == nil && json.Valid([]byte(fixed)) {
		return fixed
	}
	return args
}

// tidyReply cleans a successful reply's first choice in place: reasoning
// out of the content (returned, with a reasoning_content field's), tool
// calls written as text read as calls when the request offered tools and
// dropped otherwise, tool-call arguments repaired.
func tidyReply(reply *openai.ChatCompletionResponse, tools bool) (reasoning string) {
	if len(reply.Choices) == 0 {
		return ""
	}
	msg := &reply.Choices[0].Message
	content, thought := splitReasoning(msg.Content)
	content, calls := cutTextCalls(content)
	msg.Content = content
	if tools {
		for i, c := range calls {
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{
				ID: fmt.Sprintf("text_call_%d", i+1), Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments},
			})
		}
		if len(calls) > 0 && reply.Choices[0].FinishReason == openai.FinishReasonStop {
			reply.Choices[0].FinishReason = openai.FinishReasonToolCalls
		}
	}
	for i := range msg.ToolCalls {
		msg.ToolCalls[i].Function.Arguments = repairArguments(msg.ToolCalls[i].Function.Arguments)
	}
	parts := make([]string, 0, 2)
	for _, p := range []string{msg.ReasoningContent, thought} {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	msg.ReasoningContent = ""
	return strings.Join(parts, "\n\n")
}

// callProfile is the profile a call is built with: without JSON mode once
// the endpoint refused response_format.
func (ep *endpoint) callProfile() Profile {
	p := ep.profile
	if ep.noResponseFormat.Load() {
		p.JSONMode = false
	}
	return p
}

// dropResponseFormat handles an endpoint that refuses response_format (a
// 400 or 422 naming it, or JSON mode): the call goes again at once
// without it, and the endpoint is remembered (a WARN says so, once). It
// reports whether the call is to go again.
func (c *Client) dropResponseFormat(ctx context.Context, ep *endpoint, call *openai.ChatCompletionRequest, out outcome) bool {
	if call.ResponseFormat == nil || out.reason != ReasonRejected ||
		out.status != http.StatusBadRequest && out.status != http.StatusUnprocessableEntity {
		return false
	}
	msg := strings.ToLower(out.msg)
	if !strings.Contains(msg, "response_format") && !strings.Contains(msg, "response format") &&
		!strings.Contains(msg, "json_object") && !strings.Contains(msg, "json mode") {
		return false
	}
	call.ResponseFormat = nil
	if ep.noResponseFormat.CompareAndSwap(false, true) {
		c.log.LogAttrs(ctx, slog.LevelWarn, "llm: the endpoint refuses response_format; JSON requests go without it from now on (set json_mode = false to stop this warning)",
			slog.String(logProfile, ep.profile.Name), slog.String(logModel, call.Model),
			slog.Int(logStatus, out.status), slog.String(logError, ep.redact.clean(out.msg)))
	}
	return true
}
