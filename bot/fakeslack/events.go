package fakeslack

import (
	"encoding/json"
	"fmt"
	"time"
)

// Message is an inbound message to send as a message event.
type Message struct {
	Channel     string // required
	ChannelType string // default from the id: C… channel, G… group, D… im
	User        string
	BotID       string // set for other apps' bot messages
	Username    string // a bot message's display name
	Text        string // in Slack's wire format (<@U…>, &amp; …)
	ThreadTS    string // for a reply
	Subtype     string // "", thread_broadcast, file_share, channel_join, …
	Files       []File
	TS          string // default: the next timestamp
	Conn        int    // connection to deliver on; 0 = routed
}

// File is a file attached to a message.
type File struct {
	ID    string
	Name  string
	Title string
}

// Delivery identifies what was sent: the envelope, the Events API event
// (empty for slash commands) and, for messages, the message ts.
type Delivery struct {
	EnvelopeID string
	EventID    string
	TS         string
}

// Key is what Acks and Deliveries group this delivery's retries under.
func (d Delivery) Key() string {
	if d.EventID != "" {
		return d.EventID
	}
	return d.EnvelopeID
}

// SendMessage stores a message and delivers it as a message event.
func (s *Server) SendMessage(m Message) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.TS == "" {
		m.TS = s.nextTSLocked()
	}
	st := &stored{
		ts: m.TS, threadTS: m.ThreadTS, user: m.User, botID: m.BotID, username: m.Username,
		text: m.Text, subtype: m.Subtype, files: m.Files,
	}
	s.storeLocked(m.Channel, st)
	ev := s.messageJSONLocked(st, false)
	ev["channel"] = m.Channel
	ev["channel_type"] = m.ChannelType
	if m.ChannelType == "" {
		ev["channel_type"] = channelType(m.Channel)
	}
	ev["event_ts"] = m.TS
	ev["team"] = s.opts.TeamID
	if m.BotID == "" {
		ev["client_msg_id"] = fmt.Sprintf("c11e0000-0000-4000-8000-%012d", s.nextIDLocked())
	}
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		if root := s.findLocked(m.Channel, m.ThreadTS); root != nil && root.user != "" {
			ev["parent_user_id"] = root.user
		}
	}
	d := s.sendEventLocked(ev, m.TS, m.Conn)
	d.TS = m.TS
	return d
}

// SendEdit changes a known message's text and delivers message_changed.
func (s *Server) SendEdit(channel, ts, text string) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(channel, ts)
	if m == nil {
		s.t.Errorf("fakeslack: SendEdit of unknown message %s/%s", channel, ts)
		return Delivery{}
	}
	prev := s.messageJSONLocked(m, false)
	edited := *m
	edited.text = text
	s.storeLocked(channel, &edited)
	evTS := s.nextTSLocked()
	cur := s.messageJSONLocked(&edited, false)
	cur["edited"] = map[string]any{"user": m.user, "ts": evTS}
	ev := map[string]any{
		"type": "message", "subtype": "message_changed", "hidden": true,
		"channel": channel, "channel_type": channelType(channel), "ts": evTS, "event_ts": evTS,
		"message": cur, "previous_message": prev,
	}
	d := s.sendEventLocked(ev, evTS, 0)
	d.TS = ts
	return d
}

// SendDelete removes a known message and delivers message_deleted.
func (s *Server) SendDelete(channel, ts string) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(channel, ts)
	if m == nil {
		s.t.Errorf("fakeslack: SendDelete of unknown message %s/%s", channel, ts)
		return Delivery{}
	}
	s.deleteLocked(channel, ts)
	evTS := s.nextTSLocked()
	ev := map[string]any{
		"type": "message", "subtype": "message_deleted", "hidden": true,
		"channel": channel, "channel_type": channelType(channel), "ts": evTS, "event_ts": evTS,
		"deleted_ts": ts, "previous_message": s.messageJSONLocked(m, false),
	}
	d := s.sendEventLocked(ev, evTS, 0)
	d.TS = ts
	return d
}

// SendEvent delivers any inner event (a map, a struct or json.RawMessage)
// inside an event_callback payload.
func (s *Server) SendEvent(inner any, conn int) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendEventLocked(inner, "", conn)
}

func (s *Socket) sendEventLocked(inner any, ts string, conn int) Delivery {
	raw, err := json.Marshal(inner)
	if err != nil {
		s.t.Errorf("fakeslack: event: %v", err)
		return Delivery{}
	}
	eventID := fmt.Sprintf("Ev%010d", s.nextIDLocked())
	payload, _ := json.Marshal(map[string]any{ // #nosec G101 -- the fake's verification token, as Slack sends one
		"token": "fake-verification-token", "team_id": s.opts.TeamID, "api_app_id": s.opts.AppID,
		"event": json.RawMessage(raw), "type": "event_callback", "event_id": eventID,
		"event_time": time.Now().Unix(), "event_context": "4-fake",
		"authorizations": []any{map[string]any{
			"enterprise_id": nil, "team_id": s.opts.TeamID, "user_id": s.opts.BotUserID,
			"is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false,
	})
	id := s.enqueueLocked("", "events_api", eventID, payload, false, conn)
	return Delivery{EnvelopeID: id, EventID: eventID, TS: ts}
}

// SlashCommand is an invocation to deliver as a slash_commands envelope.
type SlashCommand struct {
	Command     string // e.g. "/list-agents"
	Text        string
	UserID      string
	UserName    string
	ChannelID   string
	ChannelName string // "directmessage" in a DM
	Conn        int
}

// SendSlashCommand delivers a slash command. Its response_url points back
// at the fake (see CommandResponses).
func (s *Server) SendSlashCommand(c SlashCommand) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.newEnvelopeIDLocked()
	payload, _ := json.Marshal(map[string]any{ // #nosec G101 -- the fake's verification token, as Slack sends one
		"token": "fake-verification-token", "team_id": s.opts.TeamID, "team_domain": "fake",
		"channel_id": c.ChannelID, "channel_name": c.ChannelName, "user_id": c.UserID,
		"user_name": c.UserName, "command": c.Command, "text": c.Text, "api_app_id": s.opts.AppID,
		"is_enterprise_install": "false", "response_url": s.srv.URL + "/respond/" + id,
		"trigger_id": fmt.Sprintf("trigger-%d", s.nextIDLocked()),
	})
	s.enqueueLocked(id, "slash_commands", "", payload, true, c.Conn)
	return Delivery{EnvelopeID: id}
}

// SendEnvelope delivers an envelope of any type with any payload (for
// interactive payloads and malformed input).
func (s *Server) SendEnvelope(typ string, payload json.RawMessage, conn int) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.enqueueLocked("", typ, "", payload, typ != "events_api", conn)
	return Delivery{EnvelopeID: id}
}

// PressFeedback delivers, as an interactive envelope (block_actions),
// user's press of the 👍 (positive) or 👎 button of the feedback buttons in
// a message posted by conclave; false when the post has none.
func (s *Server) PressFeedback(p Post, user string, positive bool) (Delivery, bool) {
	var blocks []struct {
		Type     string            `json:"type"`
		BlockID  string            `json:"block_id"`
		Elements []feedbackButtons `json:"elements"`
	}
	if json.Unmarshal(p.Blocks, &blocks) != nil {
		return Delivery{}, false
	}
	for _, b := range blocks {
		for _, e := range b.Elements {
			if b.Type != "context_actions" || e.Type != "feedback_buttons" || e.Positive == nil || e.Negative == nil {
				continue
			}
			button := e.Negative
			if positive {
				button = e.Positive
			}
			return s.deliverAction(p, user, map[string]any{
				"type": "feedback_buttons", "action_id": e.ActionID, "block_id": b.BlockID, "value": button.Value,
				"text": button.Text,
			}), true
		}
	}
	return Delivery{}, false
}

// PressButton delivers, as an interactive envelope (block_actions), user's
// press of the button with actionID in a message posted by conclave. The
// button is looked up in the post's blocks, so only a button conclave
// really posted can be pressed; false when there is none. The payload's
// response_url points back at the fake (see CommandResponses, keyed by the
// envelope id).
func (s *Server) PressButton(p Post, user, actionID string) (Delivery, bool) {
	var blocks []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Elements []struct {
			Type     string          `json:"type"`
			ActionID string          `json:"action_id"`
			Value    string          `json:"value"`
			Style    string          `json:"style"`
			Text     json.RawMessage `json:"text"`
		} `json:"elements"`
	}
	if json.Unmarshal(p.Blocks, &blocks) != nil {
		return Delivery{}, false
	}
	for _, b := range blocks {
		for _, e := range b.Elements {
			if b.Type != "actions" || e.Type != "button" || e.ActionID != actionID {
				continue
			}
			return s.deliverAction(p, user, map[string]any{
				"type": "button", "action_id": e.ActionID, "block_id": b.BlockID, "value": e.Value,
				"style": e.Style, "text": e.Text,
			}), true
		}
	}
	return Delivery{}, false
}

// deliverAction delivers user's action on post p as a block_actions
// envelope; the payload's response_url points back at the fake.
func (s *Server) deliverAction(p Post, user string, action map[string]any) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.newEnvelopeIDLocked()
	name := s.users[user].Name
	action["action_ts"] = s.nextTSLocked()
	container := map[string]any{"type": "message", "message_ts": p.TS, "channel_id": p.Channel, "is_ephemeral": false}
	if p.ThreadTS != "" {
		container["thread_ts"] = p.ThreadTS
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "api_app_id": s.opts.AppID, "token": "fake-verification-token", // #nosec G101 -- the fake's verification token
		"user":       map[string]any{"id": user, "username": name, "name": name, "team_id": s.opts.TeamID},
		"team":       map[string]any{"id": s.opts.TeamID, "domain": "fake"},
		"container":  container,
		"channel":    map[string]any{"id": p.Channel, "name": "directmessage"},
		"message":    map[string]any{"type": "message", "ts": p.TS, "text": p.Text, "blocks": p.Blocks},
		"trigger_id": fmt.Sprintf("trigger-%d", s.nextIDLocked()), "response_url": s.srv.URL + "/respond/" + id,
		"actions": []any{action},
	})
	s.enqueueLocked(id, "interactive", "", payload, false, 0)
	return Delivery{EnvelopeID: id}
}
