package fakeslack

import (
	"encoding/json"
	"net/url"
)

// Update is one chat.update Slack accepted.
type Update struct {
	Seq      int64
	Channel  string
	TS       string // the message updated
	Text     string
	Blocks   json.RawMessage // as sent; nil when none
	Metadata *Metadata       // nil when not sent
	form     url.Values
}

// Form is everything the update sent, token removed.
func (u Update) Form() url.Values { return u.form }

// MarkdownTexts returns the text of each markdown block of the update.
func (u Update) MarkdownTexts() []string { return Post{Blocks: u.Blocks}.MarkdownTexts() }

// chatUpdate replaces the text, blocks and (when sent) metadata of one of
// the app's messages, as chat.update does, and delivers message_changed
// when posts are echoed.
func (s *webAPI) chatUpdate(form url.Values) answer {
	ch, ts := form.Get("channel"), form.Get("ts")
	if e := s.checkChannelLocked(ch); e != "" {
		return answer{err: e}
	}
	m := s.findLocked(ch, ts)
	switch {
	case m == nil:
		return answer{err: "message_not_found"}
	case m.botID != s.opts.BotID || m.user != s.opts.BotUserID:
		return answer{err: "cant_update_message"}
	case s.streamOpenLocked(m):
		return answer{err: "cant_update_message"} // a stream is stopped first
	}
	text, blocks := form.Get("text"), form.Get("blocks")
	if text == "" && blocks == "" {
		return answer{err: "no_text"}
	}
	edited := *m
	edited.text = text
	edited.blocks = nil
	if blocks != "" {
		if e := checkBlocks(blocks); e != "" {
			return answer{err: e}
		}
		edited.blocks = json.RawMessage(blocks)
	}
	if meta := form.Get("metadata"); meta != "" {
		if json.Unmarshal([]byte(meta), &Metadata{}) != nil {
			return answer{err: "invalid_metadata_format"}
		}
		edited.metadata = json.RawMessage(meta)
	}
	prev := s.messageJSONLocked(m, false)
	s.storeLocked(ch, &edited)
	if s.opts.EchoPosts {
		evTS := s.nextTSLocked()
		cur := s.messageJSONLocked(&edited, false)
		cur["edited"] = map[string]any{"user": edited.user, "ts": evTS}
		s.socket.sendEventLocked(map[string]any{
			"type": "message", "subtype": "message_changed", "hidden": true,
			"channel": ch, "channel_type": channelType(ch), "ts": evTS, "event_ts": evTS,
			"message": cur, "previous_message": prev,
		}, evTS, 0)
	}
	return answer{body: map[string]any{"channel": ch, "ts": ts, "text": text}}
}

// Updates returns every chat.update Slack accepted, in order.
func (s *Record) Updates() []Update {
	var out []Update
	for _, c := range s.CallsTo("chat.update") {
		if c.Status != 200 || c.Error != "" {
			continue
		}
		u := Update{Seq: c.Seq, Channel: c.Form.Get("channel"), TS: c.Form.Get("ts"), Text: c.Form.Get("text"), form: c.Form}
		if b := c.Form.Get("blocks"); b != "" {
			u.Blocks = json.RawMessage(b)
		}
		if m := c.Form.Get("metadata"); m != "" {
			u.Metadata = &Metadata{}
			_ = json.Unmarshal([]byte(m), u.Metadata)
		}
		out = append(out, u)
	}
	return out
}

// Current returns a message as it reads now, updates applied: its ts,
// thread, text, blocks and metadata.
func (s *Record) Current(channel, ts string) (Post, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(channel, ts)
	if m == nil {
		return Post{}, false
	}
	p := Post{Channel: channel, TS: m.ts, ThreadTS: m.threadTS, Text: m.text, Blocks: m.blocks, Username: m.username}
	if m.metadata != nil {
		p.Metadata = &Metadata{}
		_ = json.Unmarshal(m.metadata, p.Metadata)
	}
	return p, true
}
