package fakeslack

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Slack's agent methods: native streaming (chat.startStream, appendStream,
// stopStream) and the assistant thread's status and suggested prompts,
// each with the checks Slack documents — the scopes, the required
// fields, 12,000 characters of markdown per call, a stream that must
// still be open — and refusals a test asks for: a channel type where
// streaming is refused, a stream Slack ends.

// DefaultStreamExpiry is how long after chat.startStream the fake ends a
// stream that was not stopped (Slack's window is about five minutes).
const DefaultStreamExpiry = 5 * time.Minute

// maxLoadingMessages and maxSuggestedPrompts are Slack's limits.
const (
	maxLoadingMessages  = 10
	maxSuggestedPrompts = 4
)

// methodScopes are the bot scopes a method needs (any one of them); the
// fake checks them for the agent methods only.
var methodScopes = map[string][]string{
	"chat.startStream":                      {"chat:write"},
	"chat.appendStream":                     {"chat:write"},
	"chat.stopStream":                       {"chat:write"},
	"assistant.threads.setStatus":           {"chat:write", "assistant:write"},
	"assistant.threads.setSuggestedPrompts": {"assistant:write"},
}

// missingScopeLocked answers missing_scope when the token lacks every
// scope method needs, or returns false.
func (s *state) missingScopeLocked(method string) (answer, bool) {
	need := methodScopes[method]
	for _, sc := range need {
		if slices.Contains(s.opts.Scopes, sc) {
			return answer{}, false
		}
	}
	return answer{err: "missing_scope"}, len(need) > 0
}

func (s *state) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// stream is the streaming state of a message started by chat.startStream.
type stream struct {
	started   time.Time
	recipient string
	ended     bool // stopped, expired or ended by the test
}

// streamOpenLocked reports whether m is a message still streaming,
// ending it once past the expiry.
func (s *state) streamOpenLocked(m *stored) bool {
	if m == nil || m.stream == nil || m.stream.ended {
		return false
	}
	if s.now().Sub(m.stream.started) >= s.opts.StreamExpiry {
		m.stream.ended = true
		return false
	}
	return true
}

// checkMarkdownText checks one call's markdown_text against Slack's limit.
func checkMarkdownText(text string) string {
	if len([]rune(text)) > markdownLimit {
		return "msg_too_long"
	}
	return ""
}

func (s *webAPI) chatStartStream(form url.Values) answer {
	ch := form.Get("channel")
	if e := s.checkChannelLocked(ch); e != "" {
		return answer{err: e}
	}
	if s.refusedStreams[channelType(ch)] {
		return answer{err: "channel_type_not_supported"}
	}
	text := form.Get("markdown_text")
	if e := checkMarkdownText(text); e != "" {
		return answer{err: e}
	}
	user, team := form.Get("recipient_user_id"), form.Get("recipient_team_id")
	if channelType(ch) != "im" && (user == "" || team == "") {
		return answer{err: "invalid_arguments"} // both are required outside a DM
	}
	thread := form.Get("thread_ts")
	if thread != "" && s.findLocked(ch, thread) == nil {
		return answer{err: "invalid_thread_ts"}
	}
	ts := s.nextTSLocked()
	m := &stored{
		ts: ts, threadTS: thread, user: s.opts.BotUserID, botID: s.opts.BotID,
		username: form.Get("username"), text: text,
		stream: &stream{started: s.now(), recipient: user},
	}
	if m.username != "" {
		m.subtype = "bot_message"
	}
	m.blocks = markdownBlocks(text, "")
	s.storeLocked(ch, m)
	return answer{body: map[string]any{"channel": ch, "ts": ts}}
}

// openStreamLocked checks a call on an open stream: the channel, the
// ts, the text (required when needText) and the stream's state. It
// returns the message, or Slack's error.
func (s *webAPI) openStreamLocked(form url.Values, needText bool) (*stored, string) {
	ch, ts, text := form.Get("channel"), form.Get("ts"), form.Get("markdown_text")
	if e := s.checkChannelLocked(ch); e != "" {
		return nil, e
	}
	if ts == "" || needText && text == "" {
		return nil, "invalid_arguments"
	}
	if e := checkMarkdownText(text); e != "" {
		return nil, e
	}
	m := s.findLocked(ch, ts)
	if m == nil {
		return nil, "message_not_found"
	}
	if !s.streamOpenLocked(m) {
		return nil, "message_not_in_streaming_state"
	}
	return m, ""
}

func (s *webAPI) chatAppendStream(form url.Values) answer {
	m, e := s.openStreamLocked(form, true)
	if e != "" {
		return answer{err: e}
	}
	ch := form.Get("channel")
	s.replaceLocked(ch, m, m.text+form.Get("markdown_text"), "", nil)
	return answer{body: map[string]any{"channel": ch, "ts": m.ts}}
}

func (s *webAPI) chatStopStream(form url.Values) answer {
	m, e := s.openStreamLocked(form, false)
	if e != "" {
		return answer{err: e}
	}
	ch, ts, text := form.Get("channel"), m.ts, form.Get("markdown_text")
	blocks := form.Get("blocks")
	if blocks != "" {
		if e := checkBlocks(blocks); e != "" {
			return answer{err: e}
		}
	}
	var meta json.RawMessage
	if raw := form.Get("metadata"); raw != "" {
		if json.Unmarshal([]byte(raw), &Metadata{}) != nil {
			return answer{err: "invalid_metadata_format"}
		}
		meta = json.RawMessage(raw)
	}
	s.replaceLocked(ch, m, m.text+text, blocks, meta)
	s.findLocked(ch, ts).stream.ended = true
	return answer{body: map[string]any{"channel": ch, "ts": ts}}
}

// replaceLocked stores a new version of a streamed message: its markdown
// text, then the extra blocks, the metadata when given.
func (s *state) replaceLocked(ch string, m *stored, text, extra string, meta json.RawMessage) {
	next := *m
	st := *m.stream
	next.stream = &st
	next.text = text
	next.blocks = markdownBlocks(text, extra)
	if meta != nil {
		next.metadata = meta
	}
	s.storeLocked(ch, &next)
}

// markdownBlocks is a streamed message's blocks: one markdown block with
// its text, then extra (a JSON array, or "").
func markdownBlocks(text, extra string) json.RawMessage {
	blocks := []any{}
	if text != "" {
		blocks = append(blocks, map[string]any{"type": "markdown", "text": text})
	}
	var more []any
	if extra != "" && json.Unmarshal([]byte(extra), &more) == nil {
		blocks = append(blocks, more...)
	}
	raw, _ := json.Marshal(blocks)
	return raw
}

func (s *webAPI) assistantThreadsSetStatus(form url.Values) answer {
	ch, thread := form.Get("channel_id"), form.Get("thread_ts")
	if ch == "" || thread == "" || !form.Has("status") {
		return answer{err: "invalid_arguments"}
	}
	if e := s.checkChannelLocked(ch); e != "" {
		return answer{err: e}
	}
	if s.findLocked(ch, thread) == nil {
		return answer{err: "invalid_thread_ts"}
	}
	if lm := form.Get("loading_messages"); lm != "" && len(splitList(lm)) > maxLoadingMessages {
		return answer{err: "invalid_arguments"}
	}
	return answer{body: map[string]any{}}
}

func (s *webAPI) assistantThreadsSetSuggestedPrompts(form url.Values) answer {
	ch, thread := form.Get("channel_id"), form.Get("thread_ts")
	if ch == "" || thread == "" {
		return answer{err: "invalid_arguments"}
	}
	if e := s.checkChannelLocked(ch); e != "" {
		return answer{err: e}
	}
	var prompts []SuggestedPrompt
	if json.Unmarshal([]byte(form.Get("prompts")), &prompts) != nil || len(prompts) == 0 || len(prompts) > maxSuggestedPrompts {
		return answer{err: "invalid_arguments"}
	}
	for _, p := range prompts {
		if p.Title == "" || p.Message == "" {
			return answer{err: "invalid_arguments"}
		}
	}
	return answer{body: map[string]any{}}
}

// splitList reads a list as slack-go sends it: a JSON array, or values
// joined by commas.
func splitList(v string) []string {
	var list []string
	if json.Unmarshal([]byte(v), &list) == nil {
		return list
	}
	return strings.Split(v, ",")
}

// RefuseStreams makes chat.startStream answer channel_type_not_supported
// in channels of the given types ("channel", "group", "im"), as some
// workspaces do outside direct messages.
func (s *Faults) RefuseStreams(types ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range types {
		s.refusedStreams[t] = true
	}
}

// EndStream ends a stream as Slack does on its own: later appends and
// the stop answer message_not_in_streaming_state.
func (s *Faults) EndStream(channel, ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.findLocked(channel, ts); m != nil && m.stream != nil {
		m.stream.ended = true
	}
}

// Streaming reports whether a message is a stream still open.
func (s *Record) Streaming(channel, ts string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamOpenLocked(s.findLocked(channel, ts))
}

// Status is one assistant.threads.setStatus Slack accepted.
type Status struct {
	Seq             int64
	Channel         string
	ThreadTS        string
	Status          string // "" clears it
	LoadingMessages []string
	Username        string
}

// Statuses returns every thread status Slack accepted, in order.
func (s *Record) Statuses() []Status {
	var out []Status
	for _, c := range s.CallsTo("assistant.threads.setStatus") {
		if c.Status != 200 || c.Error != "" {
			continue
		}
		st := Status{
			Seq: c.Seq, Channel: c.Form.Get("channel_id"), ThreadTS: c.Form.Get("thread_ts"),
			Status: c.Form.Get("status"), Username: c.Form.Get("username"),
		}
		if lm := c.Form.Get("loading_messages"); lm != "" {
			st.LoadingMessages = splitList(lm)
		}
		out = append(out, st)
	}
	return out
}

// SuggestedPrompt is one prompt of assistant.threads.setSuggestedPrompts.
type SuggestedPrompt struct {
	Title   string `json:"title"`
	Message string `json:"message"`
}

// Suggestions is one assistant.threads.setSuggestedPrompts Slack accepted.
type Suggestions struct {
	Seq      int64
	Channel  string
	ThreadTS string
	Title    string
	Prompts  []SuggestedPrompt
}

// SuggestedPrompts returns every set of suggested prompts Slack
// accepted, in order.
func (s *Record) SuggestedPrompts() []Suggestions {
	var out []Suggestions
	for _, c := range s.CallsTo("assistant.threads.setSuggestedPrompts") {
		if c.Status != 200 || c.Error != "" {
			continue
		}
		sg := Suggestions{Seq: c.Seq, Channel: c.Form.Get("channel_id"), ThreadTS: c.Form.Get("thread_ts"), Title: c.Form.Get("title")}
		_ = json.Unmarshal([]byte(c.Form.Get("prompts")), &sg.Prompts)
		out = append(out, sg)
	}
	return out
}
