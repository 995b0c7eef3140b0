package fakeslack

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stored is a message the fake knows, for replies, reactions and edits.
type stored struct {
	ts       string
	threadTS string
	user     string
	botID    string
	username string
	text     string
	subtype  string
	files    []File
	metadata json.RawMessage
	blocks   json.RawMessage
	stream   *stream // set for a message started by chat.startStream
}

// answer is a Web API method's reply: a JSON object, or an ok:false error.
type answer struct {
	body map[string]any
	err  string
}

type method func(s *webAPI, form url.Values) answer

var methods = map[string]method{
	"apps.connections.open": (*webAPI).appsConnectionsOpen,
	"auth.test":             (*webAPI).authTest,
	"chat.postMessage":      (*webAPI).chatPostMessage,
	"chat.postEphemeral":    (*webAPI).chatPostEphemeral,
	"chat.update":           (*webAPI).chatUpdate,
	"reactions.add":         (*webAPI).reactionsAdd,
	"reactions.remove":      (*webAPI).reactionsRemove,
	"conversations.replies": (*webAPI).conversationsReplies,
	"conversations.info":    (*webAPI).conversationsInfo,
	"users.info":            (*webAPI).usersInfo,
	"users.conversations":   (*webAPI).usersConversations,
	"views.publish":         (*webAPI).viewsPublish,

	"chat.startStream":                      (*webAPI).chatStartStream,
	"chat.appendStream":                     (*webAPI).chatAppendStream,
	"chat.stopStream":                       (*webAPI).chatStopStream,
	"assistant.threads.setStatus":           (*webAPI).assistantThreadsSetStatus,
	"assistant.threads.setSuggestedPrompts": (*webAPI).assistantThreadsSetSuggestedPrompts,
}

func (s *webAPI) serveAPI(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/api/")
	form, token := readRequest(r)
	auth := ""
	switch token {
	case BotToken:
		auth = "bot"
	case AppToken:
		auth = "app"
	}

	s.mu.Lock()
	hold := s.delays[name]
	s.mu.Unlock()
	if hold != nil {
		hold(r.Context())
	}
	s.mu.Lock()
	call := Call{Seq: s.nextSeqLocked(), At: time.Now(), Method: name, Form: form, Auth: auth, Status: http.StatusOK}
	var a answer
	if f, failing := s.faults.takeFailureLocked(name, form); failing && f.Hang {
		call.Status, call.Error = 0, "hung"
		s.calls = append(s.calls, call)
		s.notifyLocked()
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	} else if failing {
		if f.Status != 0 && f.Status != http.StatusOK {
			call.Status = f.Status
			a = answer{err: cmp.Or(f.Error, "internal_error")}
			if f.Status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
				a = answer{err: "ratelimited"}
			}
		} else {
			a = answer{err: f.Error}
		}
	} else if m, ok := methods[name]; !ok {
		a = answer{err: "unknown_method"}
	} else if (name == "apps.connections.open") != (auth == "app") || auth == "" {
		a = answer{err: "invalid_auth"}
	} else if missing, ok := s.missingScopeLocked(name); ok {
		a = missing
	} else {
		a = m(s, form)
	}
	call.Error = a.err
	s.calls = append(s.calls, call)
	s.notifyLocked()
	scopes := strings.Join(s.opts.Scopes, ",")
	s.mu.Unlock()

	body := a.body
	if a.err != "" {
		body = map[string]any{"ok": false, "error": a.err}
	} else {
		body["ok"] = true
	}
	if auth == "bot" {
		w.Header().Set("X-OAuth-Scopes", scopes)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(call.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// readRequest reads a form or JSON body (and the query) into url.Values,
// returning the token from the form or the Authorization header.
func readRequest(r *http.Request) (url.Values, string) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	form := url.Values{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var body map[string]any
		data, _ := io.ReadAll(r.Body)
		if json.Unmarshal(data, &body) == nil {
			for k, v := range body {
				if str, ok := v.(string); ok {
					form.Set(k, str)
				} else {
					raw, _ := json.Marshal(v)
					form.Set(k, string(raw))
				}
			}
		}
	} else if r.ParseForm() == nil {
		form = r.Form
	}
	if t := form.Get("token"); t != "" {
		token = t
	}
	form.Del("token")
	return form, token
}

// takeFailureLocked returns the first failure queued for method that
// applies to a call with form, counting the call against it; failures
// whose While is over are dropped.
func (s *Faults) takeFailureLocked(method string, form url.Values) (Failure, bool) {
	q := s.failures[method]
	defer func() { s.failures[method] = q }()
	for i := 0; i < len(q); i++ {
		f := q[i]
		if f.While != nil && !f.While() {
			q = slices.Delete(q, i, i+1)
			i--
			continue
		}
		if f.Match != nil && !f.Match(form) {
			continue
		}
		if f.While == nil {
			if q[i].Times--; q[i].Times <= 0 {
				q = slices.Delete(q, i, i+1)
			}
		}
		return f, true
	}
	return Failure{}, false
}

func (s *webAPI) appsConnectionsOpen(url.Values) answer {
	return answer{body: map[string]any{"url": s.socket.openConnectionLocked()}}
}

func (s *webAPI) authTest(url.Values) answer {
	return answer{body: map[string]any{
		"url": "https://fake.slack.com/", "team": "Fake", "user": s.opts.BotName,
		"team_id": s.opts.TeamID, "user_id": s.opts.BotUserID, "bot_id": s.opts.BotID,
	}}
}

// markdownLimit is Slack's cumulative limit on markdown block text.
const markdownLimit = 12000

func (s *webAPI) chatPostMessage(form url.Values) answer {
	ch := form.Get("channel")
	if e := s.checkChannelLocked(ch); e != "" {
		return answer{err: e}
	}
	text, blocks := form.Get("text"), form.Get("blocks")
	if text == "" && blocks == "" {
		return answer{err: "no_text"}
	}
	if len([]rune(text)) > 40000 {
		return answer{err: "msg_too_long"}
	}
	p := Post{
		Seq: s.seq, At: time.Now(), Channel: ch, ThreadTS: form.Get("thread_ts"), Text: text,
		Username: form.Get("username"), IconURL: form.Get("icon_url"), IconEmoji: form.Get("icon_emoji"),
		UnfurlLinks: form.Get("unfurl_links"), UnfurlMedia: form.Get("unfurl_media"),
		Parse: form.Get("parse"), LinkNames: form.Get("link_names"), Form: form,
	}
	if blocks != "" {
		if e := checkBlocks(blocks); e != "" {
			return answer{err: e}
		}
		p.Blocks = json.RawMessage(blocks)
	}
	if m := form.Get("metadata"); m != "" {
		p.Metadata = &Metadata{}
		if json.Unmarshal([]byte(m), p.Metadata) != nil {
			return answer{err: "invalid_metadata_format"}
		}
	}
	p.TS = s.nextTSLocked()
	s.posts = append(s.posts, p)
	msg := &stored{
		ts: p.TS, threadTS: p.ThreadTS, user: s.opts.BotUserID, botID: s.opts.BotID,
		username: p.Username, text: text, blocks: p.Blocks,
	}
	if p.Username != "" {
		msg.subtype = "bot_message"
	}
	if p.Metadata != nil {
		msg.metadata = json.RawMessage(form.Get("metadata"))
	}
	s.storeLocked(ch, msg)
	view := s.messageJSONLocked(msg, true)
	if s.opts.EchoPosts {
		ev := s.messageJSONLocked(msg, true)
		ev["channel"] = ch
		ev["channel_type"] = channelType(ch)
		ev["event_ts"] = p.TS
		ev["team"] = s.opts.TeamID
		ev["bot_profile"] = map[string]any{
			"id": s.opts.BotID, "app_id": s.opts.AppID, "name": s.opts.BotName, "team_id": s.opts.TeamID,
		}
		if p.IconURL != "" {
			ev["icons"] = map[string]any{"image_48": p.IconURL}
		}
		s.socket.sendEventLocked(ev, p.TS, 0)
	}
	return answer{body: map[string]any{"channel": ch, "ts": p.TS, "message": view}}
}

// checkChannelLocked says why conclave could not post in a channel, or "".
func (s *state) checkChannelLocked(ch string) string {
	// A user id posts in the app's direct message with that user.
	if ch == "" || !strings.ContainsAny(ch[:1], "CGDUW") {
		return "channel_not_found"
	}
	if c, ok := s.channels[ch]; ok && c.IsMember != nil && !*c.IsMember {
		return "not_in_channel"
	}
	return ""
}

func (s *webAPI) chatPostEphemeral(form url.Values) answer {
	ch, user := form.Get("channel"), form.Get("user")
	if e := s.checkChannelLocked(ch); e != "" {
		return answer{err: e}
	}
	if user == "" {
		return answer{err: "user_not_found"}
	}
	if form.Get("text") == "" && form.Get("blocks") == "" {
		return answer{err: "no_text"}
	}
	e := Ephemeral{
		Seq: s.seq, At: time.Now(), Channel: ch, User: user, ThreadTS: form.Get("thread_ts"),
		Text: form.Get("text"),
	}
	if b := form.Get("blocks"); b != "" {
		e.Blocks = json.RawMessage(b)
	}
	s.ephemerals = append(s.ephemerals, e)
	return answer{body: map[string]any{"message_ts": s.nextTSLocked()}}
}

func (s *webAPI) reactionsAdd(form url.Values) answer {
	key, name, e := s.reactionTargetLocked(form)
	if e != "" {
		return answer{err: e}
	}
	if slices.Contains(s.reactions[key], name) {
		return answer{err: "already_reacted"}
	}
	s.reactions[key] = append(s.reactions[key], name)
	return answer{body: map[string]any{}}
}

func (s *webAPI) reactionsRemove(form url.Values) answer {
	key, name, e := s.reactionTargetLocked(form)
	if e != "" {
		return answer{err: e}
	}
	i := slices.Index(s.reactions[key], name)
	if i < 0 {
		return answer{err: "no_reaction"}
	}
	s.reactions[key] = slices.Delete(s.reactions[key], i, i+1)
	return answer{body: map[string]any{}}
}

func (s *webAPI) reactionTargetLocked(form url.Values) (key, name, errCode string) {
	ch, ts, name := form.Get("channel"), form.Get("timestamp"), form.Get("name")
	if name == "" {
		return "", "", "invalid_name"
	}
	if s.findLocked(ch, ts) == nil {
		return "", "", "message_not_found"
	}
	return ch + "/" + ts, name, ""
}

func (s *webAPI) conversationsReplies(form url.Values) answer {
	ch, ts := form.Get("channel"), form.Get("ts")
	root := s.findLocked(ch, ts)
	if root == nil {
		return answer{err: "thread_not_found"}
	}
	withMeta := form.Get("include_all_metadata") == "1" || form.Get("include_all_metadata") == "true"
	thread := []*stored{root}
	for _, m := range s.messages[ch] {
		if m.threadTS == ts && m.ts != ts {
			thread = append(thread, m)
		}
	}
	limit, _ := strconv.Atoi(form.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	offset := 0
	if c := form.Get("cursor"); c != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(c, "off:"))
		if err != nil || n < 0 || n > len(thread) {
			return answer{err: "invalid_cursor"}
		}
		offset = n
	}
	end := min(offset+limit, len(thread))
	msgs := make([]any, 0, end-offset)
	for _, m := range thread[offset:end] {
		j := s.messageJSONLocked(m, withMeta)
		if m == root && len(thread) > 1 {
			j["thread_ts"] = m.ts
			j["reply_count"] = len(thread) - 1
		}
		msgs = append(msgs, j)
	}
	body := map[string]any{"messages": msgs, "has_more": end < len(thread)}
	if end < len(thread) {
		body["response_metadata"] = map[string]any{"next_cursor": fmt.Sprintf("off:%d", end)}
	}
	return answer{body: body}
}

func (s *webAPI) conversationsInfo(form url.Values) answer {
	c, ok := s.channels[form.Get("channel")]
	if !ok {
		return answer{err: "channel_not_found"}
	}
	return answer{body: map[string]any{"channel": map[string]any{
		"id": c.ID, "name": c.Name, "is_channel": !c.IsPrivate, "is_group": c.IsPrivate,
		"is_private": c.IsPrivate, "is_member": c.IsMember == nil || *c.IsMember,
		"purpose": map[string]any{"value": c.Purpose, "creator": "", "last_set": 0},
		"topic":   map[string]any{"value": c.Topic, "creator": "", "last_set": 0},
	}}}
}

func (s *webAPI) usersInfo(form url.Values) answer {
	u, ok := s.users[form.Get("user")]
	if !ok {
		return answer{err: "user_not_found"}
	}
	return answer{body: map[string]any{"user": map[string]any{
		"id": u.ID, "team_id": s.opts.TeamID, "name": u.Name, "real_name": u.RealName, "is_bot": u.IsBot,
		"is_admin": u.IsAdmin, "is_owner": u.IsOwner,
		"profile": map[string]any{
			"display_name": u.DisplayName, "real_name": u.RealName,
			"display_name_normalized": u.DisplayName, "real_name_normalized": u.RealName,
		},
	}}}
}

// serveResponseURL records what a slash command's handler posts to its
// response_url.
func (s *webAPI) serveResponseURL(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var msg struct {
		Text            string `json:"text"`
		ResponseType    string `json:"response_type"`
		ReplaceOriginal bool   `json:"replace_original"`
	}
	if json.Unmarshal(data, &msg) != nil {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.responses = append(s.responses, CommandResponse{
		Seq: s.nextSeqLocked(), At: time.Now(), Key: strings.TrimPrefix(r.URL.Path, "/respond/"),
		Text: msg.Text, ResponseType: msg.ResponseType, ReplaceOriginal: msg.ReplaceOriginal, Body: data,
	})
	s.notifyLocked()
	s.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

// searchLocked finds where the message ts of a channel is, or would go
// (messages are kept in ts order).
func (s *state) searchLocked(ch, ts string) (int, bool) {
	return slices.BinarySearchFunc(s.messages[ch], ts, func(x *stored, ts string) int { return strings.Compare(x.ts, ts) })
}

// storeLocked adds a message to its channel, replacing one with the same ts.
func (s *state) storeLocked(ch string, m *stored) {
	i, found := s.searchLocked(ch, m.ts)
	if found {
		s.messages[ch][i] = m
		return
	}
	s.messages[ch] = slices.Insert(s.messages[ch], i, m)
}

func (s *state) findLocked(ch, ts string) *stored {
	i, found := s.searchLocked(ch, ts)
	if !found {
		return nil
	}
	return s.messages[ch][i]
}

func (s *state) deleteLocked(ch, ts string) {
	if i, found := s.searchLocked(ch, ts); found {
		s.messages[ch] = slices.Delete(s.messages[ch], i, i+1)
	}
}

// messageJSONLocked renders a stored message as Slack's API shows it.
func (s *state) messageJSONLocked(m *stored, withMeta bool) map[string]any {
	j := map[string]any{"type": "message", "ts": m.ts, "text": m.text}
	set := func(k, v string) {
		if v != "" {
			j[k] = v
		}
	}
	set("thread_ts", m.threadTS)
	set("user", m.user)
	set("bot_id", m.botID)
	set("username", m.username)
	set("subtype", m.subtype)
	if len(m.files) > 0 {
		j["files"] = filesJSON(m.files)
	}
	if withMeta && m.metadata != nil {
		j["metadata"] = m.metadata
	}
	if m.blocks != nil {
		j["blocks"] = m.blocks
	}
	return j
}

func filesJSON(files []File) []any {
	out := make([]any, 0, len(files))
	for _, f := range files {
		out = append(out, map[string]any{"id": f.ID, "name": f.Name, "title": f.Title, "mimetype": "application/octet-stream"})
	}
	return out
}

// channelType is the channel_type Slack gives events in a channel.
func channelType(ch string) string {
	switch {
	case strings.HasPrefix(ch, "G"):
		return "group"
	case strings.HasPrefix(ch, "D"):
		return "im"
	default:
		return "channel"
	}
}

func formatTS(sec, micro int64) string {
	return fmt.Sprintf("%d.%06d", sec, micro)
}

// checkBlocks checks a message's blocks as Slack does: a JSON array, each
// markdown block's text a string, their text together within
// markdownLimit runes, each context_actions block as
// validContextActions says. It returns Slack's error, or "" when they pass.
func checkBlocks(blocks string) string {
	var parsed []struct {
		Type     string            `json:"type"`
		Text     any               `json:"text"`
		BlockID  string            `json:"block_id"`
		Elements []json.RawMessage `json:"elements"`
	}
	if json.Unmarshal([]byte(blocks), &parsed) != nil {
		return "invalid_blocks"
	}
	md := 0
	for _, b := range parsed {
		if b.Type == "context_actions" && !validContextActions(b.BlockID, b.Elements) {
			return "invalid_blocks"
		}
		if b.Type == "markdown" {
			t, ok := b.Text.(string)
			if !ok {
				return "invalid_blocks"
			}
			md += len([]rune(t))
		}
	}
	if md > markdownLimit {
		return "msg_blocks_too_long"
	}
	return ""
}

// feedbackButtons is a feedback_buttons element as Slack's block kit
// reference describes it.
type feedbackButtons struct {
	Type     string          `json:"type"`
	ActionID string          `json:"action_id"`
	Positive *feedbackButton `json:"positive_button"`
	Negative *feedbackButton `json:"negative_button"`
}

type feedbackButton struct {
	Text *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"text"`
	Value              string `json:"value"`
	AccessibilityLabel string `json:"accessibility_label"`
}

func (b *feedbackButton) valid() bool {
	return b != nil && b.Text != nil && b.Text.Type == "plain_text" && b.Text.Text != "" &&
		b.Value != "" && len(b.Value) <= 2000 && len(b.AccessibilityLabel) <= 75
}

// validContextActions checks a context_actions block: a block id of at
// most 255 characters, one to five elements, each feedback buttons with
// an action id and both buttons (plain-text text, a value) or an icon
// button.
func validContextActions(blockID string, elements []json.RawMessage) bool {
	if len(blockID) > 255 || len(elements) == 0 || len(elements) > 5 {
		return false
	}
	for _, raw := range elements {
		var e feedbackButtons
		if json.Unmarshal(raw, &e) != nil {
			return false
		}
		switch e.Type {
		case "feedback_buttons":
			if e.ActionID == "" || len(e.ActionID) > 255 || !e.Positive.valid() || !e.Negative.valid() {
				return false
			}
		case "icon_button":
		default:
			return false
		}
	}
	return true
}
