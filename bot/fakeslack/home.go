package fakeslack

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// View is one recorded views.publish: the Home tab published for a user.
type View struct {
	Seq    int64
	At     time.Time
	UserID string
	Type   string          // "home"
	Blocks json.RawMessage // as sent
}

// SectionTexts returns the mrkdwn or plain text of each section and
// header block of the view, in order.
func (v View) SectionTexts() []string {
	var blocks []struct {
		Type string `json:"type"`
		Text struct {
			Text string `json:"text"`
		} `json:"text"`
	}
	if json.Unmarshal(v.Blocks, &blocks) != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		if b.Type == "section" || b.Type == "header" {
			out = append(out, b.Text.Text)
		}
	}
	return out
}

// Views returns every successful views.publish, in order.
func (s *Record) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]View(nil), s.views...)
}

// WaitViews waits until at least n views were published and returns them all.
func (s *Record) WaitViews(ctx context.Context, n int) ([]View, error) {
	err := s.wait(ctx, func() bool { return len(s.views) >= n })
	return s.Views(), err
}

// SendAppHomeOpened delivers app_home_opened for a user opening one of
// conclave's tabs ("home" or "messages").
func (s *Server) SendAppHomeOpened(user, tab string) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.nextTSLocked()
	return s.sendEventLocked(map[string]any{
		"type": "app_home_opened", "user": user, "channel": "D" + strings.TrimPrefix(user, "U"),
		"tab": tab, "event_ts": ts,
	}, "", 0)
}

// viewsPublish records a Home tab. Slack checks the view: a home view of
// at most 100 blocks.
func (s *webAPI) viewsPublish(form url.Values) answer {
	user := form.Get("user_id")
	if _, ok := s.users[user]; !ok {
		return answer{err: "user_not_found"}
	}
	var view struct {
		Type   string          `json:"type"`
		Blocks json.RawMessage `json:"blocks"`
	}
	if json.Unmarshal([]byte(form.Get("view")), &view) != nil || view.Type != "home" {
		return answer{err: "invalid_arguments"}
	}
	var blocks []json.RawMessage
	if json.Unmarshal(view.Blocks, &blocks) != nil || len(blocks) > 100 {
		return answer{err: "invalid_arguments"}
	}
	s.views = append(s.views, View{Seq: s.seq, At: time.Now(), UserID: user, Type: view.Type, Blocks: view.Blocks})
	return answer{body: map[string]any{"view": map[string]any{"id": "V" + strconv.Itoa(len(s.views)), "type": "home"}}}
}

// usersConversations lists the channels a user is a member of
// (Channel.Members), filtered by types, one page of limit at a time.
func (s *webAPI) usersConversations(form url.Values) answer {
	user := form.Get("user")
	types := strings.Split(form.Get("types"), ",")
	if form.Get("types") == "" {
		types = []string{"public_channel"}
	}
	var ids []string
	for id, c := range s.channels {
		kind := "public_channel"
		if c.IsPrivate {
			kind = "private_channel"
		}
		if slices.Contains(c.Members, user) && slices.Contains(types, kind) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	start, _ := strconv.Atoi(form.Get("cursor"))
	limit, _ := strconv.Atoi(form.Get("limit"))
	if limit <= 0 {
		limit = 100
	}
	start = min(start, len(ids))
	end := min(start+limit, len(ids))
	list := make([]any, 0, end-start)
	for _, id := range ids[start:end] {
		c := s.channels[id]
		list = append(list, map[string]any{"id": c.ID, "name": c.Name, "is_private": c.IsPrivate,
			"is_channel": !c.IsPrivate, "is_group": c.IsPrivate})
	}
	next := ""
	if end < len(ids) {
		next = strconv.Itoa(end)
	}
	return answer{body: map[string]any{"channels": list, "response_metadata": map[string]any{"next_cursor": next}}}
}
