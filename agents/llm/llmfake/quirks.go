package llmfake

import (
	"fmt"
	"net/http"
	"strings"
)

// The quirk corpus: the ways popular models (GPT-4o-mini, Llama 3.x,
// Qwen3, DeepSeek-R1, local servers) were seen to write, each a named
// distortion of what a reply means to say. Tests draw replies from it by
// name (Quirked), and a checker can draw from all of them (Quirks).

// Scene is what a scripted reply means to say, for a quirk to distort.
// A quirk uses the fields it needs; the others may be empty.
type Scene struct {
	Text string // the reply's words
	Call string // the full ENS name of an agent the reply means to call
	Name string // that agent's display name
	Key  string // a threading reply's memory key
	Tool string // a tool the reply means to call
	Args string // the tool call's arguments, as JSON
}

// Quirk is one way models write.
type Quirk struct {
	Name string
	// Seen says who writes it, and what a careful reader does about it.
	Seen string
	// Reply is the reply written with the quirk.
	Reply func(Scene) Reply
}

// Names of the quirks.
const (
	QuirkThink            = "think"              // <think>…</think> before the reply
	QuirkThinking         = "thinking"           // <thinking>…</thinking>
	QuirkReasoning        = "reasoning"          // <reasoning>…</reasoning>
	QuirkUnterminated     = "unterminated-think" // <think>… cut by the length limit
	QuirkReasoningContent = "reasoning-content"  // a reasoning_content field beside the content
	QuirkEmptyThink       = "empty-think"        // Qwen3's <think></think>
	QuirkPythonTag        = "python-tag"         // Llama's <|python_tag|>{…} text tool call
	QuirkEndUpper         = "end-upper"          // :END:
	QuirkEndBold          = "end-bold"           // **:end:**
	QuirkEndCode          = "end-code"           // `:end:`
	QuirkEndQuoted        = "end-quoted"         // ":end:"
	QuirkEndOwnLine       = "end-own-line"       // :end: alone on a line, a signature after it
	QuirkEndInSentence    = "end-in-sentence"    // "no :end: yet": text, not the token
	QuirkDisplayName      = "display-name"       // @Claudine, …
	QuirkAddressed        = "addressed"          // Claudine, …
	QuirkENSPrefix        = "ens-prefix"         // claudine.acme, …
	QuirkSlackItalics     = "slack-italics"      // _claudine…eth_
	QuirkWrongBase        = "wrong-base"         // claudine.acme.137.wrong.eth
	QuirkUnknownENS       = "unknown-eth"        // @someone.eth
	QuirkPlaceholderEcho  = "placeholder-echo"   // the threading template's placeholders sent back
	QuirkKeyInPhrase      = "key-in-phrase"      // "customer C45653"
	QuirkKeyCapitalised   = "key-capitalised"    // "Session"
	QuirkKeySessionKey    = "session-key"        // "session_key"
	QuirkKeyNamedKey      = "key"                // "key"
	QuirkCutThreading     = "cut-threading"      // a threading reply cut by the length limit
	QuirkEmptyLength      = "empty-length"       // nothing, finish_reason length
	QuirkEmptyFiltered    = "empty-filtered"     // nothing, finish_reason content_filter
	QuirkFilteredCut      = "filtered-cut"       // part of the reply, finish_reason content_filter
	QuirkSilence          = "silence"            // a stream that goes silent after its first piece
	QuirkRefusesFormat    = "refuses-response-format"
	QuirkMalformedArgs    = "malformed-args" // tool-call arguments that are not quite JSON
)

// trap is reasoning that would call, end and answer if anything read it.
func trap(s Scene) string {
	call := cmpOr(s.Call, "somebody.acme.1.example.eth")
	return fmt.Sprintf("The user wants help. Maybe I should ask %s? Then :end:.\n"+
		`Draft: {"session": "TRAP-1", "message": "trap"}`, call)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// threadingJSON is a threading reply with the key under field.
func threadingJSON(field, key, message string) string {
	return fmt.Sprintf(`{%q: %q, "message": %q}`, field, key, message)
}

// otherBase is name under another base domain: its first three labels
// kept.
func otherBase(name string) string {
	labels := strings.Split(name, ".")
	if len(labels) < 3 {
		return name + ".wrong.eth"
	}
	return strings.Join(labels[:3], ".") + ".wrong.eth"
}

// prefixOf is the first two labels of an ENS name.
func prefixOf(name string) string {
	labels := strings.Split(name, ".")
	return strings.Join(labels[:min(2, len(labels))], ".")
}

func half(s string) string { return s[:len(s)/2] }

func refusedFormat() Reply {
	return Error(http.StatusBadRequest, "Unsupported parameter: 'response_format' is not supported with this model.")
}

// quirks is the corpus, in a fixed order.
var quirks = []Quirk{
	{QuirkThink, "DeepSeek-R1, Qwen3: reasoning before the reply; removed, kept in the trace",
		func(s Scene) Reply { return Text("<think>\n" + trap(s) + "\n</think>\n\n" + s.Text) }},
	{QuirkThinking, "Claude-style prompts on local models; removed like <think>",
		func(s Scene) Reply { return Text("<thinking>" + trap(s) + "</thinking>\n" + s.Text) }},
	{QuirkReasoning, "some fine-tunes; removed like <think>",
		func(s Scene) Reply { return Text("<REASONING>" + trap(s) + "</REASONING> " + s.Text) }},
	{QuirkUnterminated, "a reasoning model cut by max_tokens while thinking: nothing is left",
		func(s Scene) Reply { return Reply{Content: "<think>\n" + trap(s), FinishReason: "length"} }},
	{QuirkReasoningContent, "DeepSeek's API, vLLM's reasoning parser: a separate field",
		func(s Scene) Reply { return Reply{Content: s.Text, ReasoningContent: trap(s)} }},
	{QuirkEmptyThink, "Qwen3 with thinking off: an empty block on every reply",
		func(s Scene) Reply { return Text("<think>\n\n</think>\n\n" + s.Text) }},
	{QuirkPythonTag, "Llama 3.x on servers without a tool parser: a tool call as text",
		func(s Scene) Reply {
			return Text(fmt.Sprintf(`<|python_tag|>{"name": %q, "parameters": %s}<|eom_id|>`, s.Tool, cmpOr(s.Args, "{}")))
		}},
	{QuirkEndUpper, "small models: the token in capitals",
		func(s Scene) Reply { return Text(s.Text + "\n\n:END:") }},
	{QuirkEndBold, "markdown-happy models: the token in bold",
		func(s Scene) Reply { return Text(s.Text + " **:end:**") }},
	{QuirkEndCode, "the token in backticks",
		func(s Scene) Reply { return Text(s.Text + " `:end:`") }},
	{QuirkEndQuoted, "the token in quotes",
		func(s Scene) Reply { return Text(s.Text + ` ":end:"`) }},
	{QuirkEndOwnLine, "the token alone on a line, a signature after it",
		func(s Scene) Reply { return Text(s.Text + "\n:end:\n🧭") }},
	{QuirkEndInSentence, "the token talked about inside a sentence: text, not an end",
		func(s Scene) Reply { return Text("There is no :end: yet. " + s.Text) }},
	{QuirkDisplayName, "every model: an agent called by its display name",
		func(s Scene) Reply { return Text("@" + s.Name + ", " + s.Text) }},
	{QuirkAddressed, "every model: an agent addressed by its display name",
		func(s Scene) Reply { return Text(s.Name + ", " + s.Text) }},
	{QuirkENSPrefix, "small models: the first labels of the ENS name",
		func(s Scene) Reply { return Text(prefixOf(s.Call) + ", " + s.Text) }},
	{QuirkSlackItalics, "models writing Slack markup: the name in italics",
		func(s Scene) Reply { return Text("_" + s.Call + "_ " + s.Text) }},
	{QuirkWrongBase, "small models: the name under a base that does not exist",
		func(s Scene) Reply { return Text(otherBase(s.Call) + ", " + s.Text) }},
	{QuirkUnknownENS, "an invented agent",
		func(s Scene) Reply { return Text("@nobody-here.eth, " + s.Text) }},
	{QuirkPlaceholderEcho, "small models: the threading template sent back as it was",
		func(Scene) Reply { return Text(`{"session": "<key or empty>", "message": "<text to post or empty>"}`) }},
	{QuirkKeyInPhrase, "the key inside a phrase",
		func(s Scene) Reply { return Text(threadingJSON("session", "customer "+s.Key, "")) }},
	{QuirkKeyCapitalised, "the field capitalised",
		func(s Scene) Reply { return Text(threadingJSON("Session", s.Key, "")) }},
	{QuirkKeySessionKey, "the field named session_key",
		func(s Scene) Reply { return Text(threadingJSON("session_key", s.Key, "")) }},
	{QuirkKeyNamedKey, "the field named key",
		func(s Scene) Reply { return Text(threadingJSON("key", s.Key, "")) }},
	{QuirkCutThreading, "a threading reply cut by max_tokens inside the key",
		func(s Scene) Reply { return Reply{Content: `{"session": "` + half(s.Key), FinishReason: "length"} }},
	{QuirkEmptyLength, "a reasoning model that spent max_tokens thinking on a separate channel",
		func(Scene) Reply { return Reply{FinishReason: "length"} }},
	{QuirkEmptyFiltered, "Azure's content filter before the first word",
		func(Scene) Reply { return Reply{FinishReason: "content_filter"} }},
	{QuirkFilteredCut, "Azure's content filter mid-reply",
		func(s Scene) Reply { return Reply{Content: half(s.Text), FinishReason: "content_filter"} }},
	{QuirkSilence, "a local server that stalls mid-stream (a plain request gets the reply)",
		func(s Scene) Reply {
			return Reply{Content: s.Text, Chunks: []string{half(s.Text), s.Text[len(s.Text)/2:]}, Pace: make(chan struct{})}
		}},
	{QuirkRefusesFormat, "servers without JSON mode: 400 naming response_format",
		func(Scene) Reply { return refusedFormat() }},
	{QuirkMalformedArgs, "small models: tool arguments without their closing brace",
		func(s Scene) Reply {
			args := strings.TrimSuffix(strings.TrimSpace(cmpOr(s.Args, "{}")), "}")
			return Calls(Call(s.Tool, args))
		}},
}

// Quirks returns the corpus, in a fixed order.
func Quirks() []Quirk { return append([]Quirk(nil), quirks...) }

// Quirked is the reply written with the named quirk; an unknown name
// panics (a test's typo).
func Quirked(name string, s Scene) Reply {
	for _, q := range quirks {
		if q.Name == name {
			return q.Reply(s)
		}
	}
	panic("llmfake: no quirk named " + name)
}
