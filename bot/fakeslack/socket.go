package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// conn is one open Socket Mode WebSocket.
type conn struct {
	id   int
	ws   *websocket.Conn
	out  chan []byte // frames to write, in order
	done chan struct{}
	once sync.Once
	ping atomic.Bool
}

// kill closes the TCP connection without a close frame, as a network fault would.
func (c *conn) kill() {
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.NetConn().Close()
	})
}

// envelope is one Socket Mode envelope, delivered or waiting for a socket.
type envelope struct {
	id      string
	typ     string
	key     string
	payload json.RawMessage
	accepts bool
	attempt int
	reason  string
	want    int // connection asked for; 0 = route
	conn    int // connection written to; 0 = not yet
	sentAt  time.Time
}

// group is every delivery of one event: the first envelope and its retries.
type group struct {
	acked    bool
	attempts int // retries so far
	last     *envelope
}

// Socket is the Socket Mode side of the fake: tickets, connections, the
// envelopes written on them and their acknowledgements, redelivery of the
// unacknowledged, and the socket faults a test causes (Drop, Disconnect,
// SendRaw, SetPinging, Redeliver).
type Socket struct{ *state }

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// openConnectionLocked answers apps.connections.open with a single-use
// ticket URL.
func (s *Socket) openConnectionLocked() string {
	ticket := fmt.Sprintf("ticket-%d", s.nextIDLocked())
	s.tickets[ticket] = false
	return "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/link/?ticket=" + ticket + "&app_id=" + s.opts.AppID
}

func (s *Socket) serveSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	spent, ok := s.tickets[ticket]
	if ok && !spent {
		s.tickets[ticket] = true
	}
	closed := s.closed
	s.mu.Unlock()
	if !ok || spent || closed {
		http.Error(w, "invalid or spent ticket", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws, out: make(chan []byte, 4096), done: make(chan struct{})}
	c.ping.Store(s.opts.PingInterval > 0)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.kill()
		return
	}
	s.connSeq++
	c.id = s.connSeq
	s.conns[c.id] = c
	hello, _ := json.Marshal(map[string]any{
		"type":            "hello",
		"num_connections": len(s.conns),
		"debug_info": map[string]any{
			"host": "fakeslack", "build_number": 1, "approximate_connection_time": 3600,
		},
		"connection_info": map[string]any{"app_id": s.opts.AppID},
	})
	c.out <- hello
	pending := s.pending
	s.pending = nil
	for _, e := range pending {
		s.deliverLocked(e)
	}
	s.wg.Add(2)
	s.notifyLocked()
	s.mu.Unlock()

	go func() {
		defer s.wg.Done()
		s.writeLoop(c)
	}()
	go func() {
		defer s.wg.Done()
		s.readLoop(c)
	}()
}

func (s *Socket) writeLoop(c *conn) {
	defer c.kill()
	var tick <-chan time.Time
	if s.opts.PingInterval > 0 {
		t := time.NewTicker(s.opts.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-c.done:
			return
		case <-s.stop:
			return
		case f := <-c.out:
			_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if err := c.ws.WriteMessage(websocket.TextMessage, f); err != nil {
				return
			}
		case <-tick:
			if !c.ping.Load() {
				continue
			}
			if err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second)); err != nil {
				return
			}
		}
	}
}

func (s *Socket) readLoop(c *conn) {
	defer s.connClosed(c)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &ack) != nil || ack.EnvelopeID == "" {
			s.t.Logf("fakeslack: connection %d sent a frame that is not an ack: %q", c.id, data)
			continue
		}
		s.recordAck(c.id, ack.EnvelopeID, ack.Payload)
	}
}

func (s *Socket) recordAck(connID int, envelopeID string, payload json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := Ack{
		Seq: s.nextSeqLocked(), At: time.Now(), Conn: connID,
		EnvelopeID: envelopeID, Payload: payload,
	}
	if e, ok := s.envs[envelopeID]; ok {
		a.Known = true
		a.Key = e.key
		a.RetryAttempt = e.attempt
		s.groups[e.key].acked = true
	}
	s.acks = append(s.acks, a)
	s.notifyLocked()
}

// connClosed forgets a connection and sends what it left unacknowledged
// elsewhere, as retries.
func (s *Socket) connClosed(c *conn) {
	c.kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c.id)
	if !s.closed {
		for _, e := range s.sortedEnvsLocked() {
			if e.conn == c.id && s.groups[e.key].last == e && !s.groups[e.key].acked {
				s.retryLocked(e.key, "connection_closed")
			}
		}
	}
	s.notifyLocked()
}

func (s *Socket) sortedEnvsLocked() []*envelope {
	out := make([]*envelope, 0, len(s.envs))
	for _, e := range s.envs {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sentAt.Before(out[j].sentAt) })
	return out
}

// retryLocked sends a delivery again as a new envelope with the next
// retry_attempt, if retries remain. It reports the new envelope id.
func (s *Socket) retryLocked(key, reason string) (string, bool) {
	g := s.groups[key]
	if g == nil || g.attempts >= s.opts.MaxRetries {
		return "", false
	}
	g.attempts++
	prev := g.last
	e := &envelope{
		id: s.newEnvelopeIDLocked(), typ: prev.typ, key: key, payload: prev.payload,
		accepts: prev.accepts, attempt: g.attempts, reason: reason,
	}
	s.envs[e.id] = e
	g.last = e
	s.deliverLocked(e)
	return e.id, true
}

func (s *Socket) newEnvelopeIDLocked() string {
	n := s.nextIDLocked()
	return fmt.Sprintf("%08x-fa4e-4000-8000-%012x", n, n)
}

// enqueueLocked records a new delivery under envelope id (a fresh one when
// empty) and sends it to a connection, or keeps it until one opens. The key
// groups it with its retries; empty means the envelope id.
func (s *Socket) enqueueLocked(id, typ, key string, payload json.RawMessage, accepts bool, want int) string {
	if id == "" {
		id = s.newEnvelopeIDLocked()
	}
	if key == "" {
		key = id
	}
	e := &envelope{id: id, typ: typ, key: key, payload: payload, accepts: accepts, want: want}
	s.envs[e.id] = e
	s.groups[key] = &group{last: e}
	s.deliverLocked(e)
	return e.id
}

func (s *Socket) deliverLocked(e *envelope) {
	c := s.pickLocked(e.want)
	if c == nil {
		s.pending = append(s.pending, e)
		return
	}
	frame, _ := json.Marshal(struct {
		EnvelopeID             string          `json:"envelope_id"`
		Type                   string          `json:"type"`
		Payload                json.RawMessage `json:"payload"`
		AcceptsResponsePayload bool            `json:"accepts_response_payload"`
		RetryAttempt           int             `json:"retry_attempt"`
		RetryReason            string          `json:"retry_reason"`
	}{e.id, e.typ, e.payload, e.accepts, e.attempt, e.reason})
	e.conn = c.id
	e.sentAt = time.Now()
	select {
	case c.out <- frame:
	default:
		s.t.Errorf("fakeslack: connection %d has too many frames queued", c.id)
	}
	s.deliveries = append(s.deliveries, Sent{
		Seq: s.nextSeqLocked(), At: e.sentAt, Conn: c.id, EnvelopeID: e.id, Key: e.key,
		Type: e.typ, RetryAttempt: e.attempt, RetryReason: e.reason,
	})
	s.notifyLocked()
}

// pickLocked chooses an open connection: the one asked for when open, else
// by the route policy. Nil when none is open.
func (s *Socket) pickLocked(want int) *conn {
	if c, ok := s.conns[want]; ok {
		return c
	}
	ids := s.openIDsLocked()
	if len(ids) == 0 {
		return nil
	}
	switch s.opts.Route {
	case RouteRandom:
		return s.conns[ids[s.rand.IntN(len(ids))]]
	case RouteRoundRobin:
		s.rr++
		return s.conns[ids[s.rr%len(ids)]]
	default:
		return s.conns[ids[0]]
	}
}

func (s *Socket) openIDsLocked() []int {
	ids := make([]int, 0, len(s.conns))
	for id := range s.conns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// redeliverLoop retries envelopes left unacknowledged for AckTimeout.
func (s *Socket) redeliverLoop() {
	t := time.NewTicker(max(s.opts.AckTimeout/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.mu.Lock()
			for _, e := range s.sortedEnvsLocked() {
				g := s.groups[e.key]
				if e.conn != 0 && g.last == e && !g.acked && now.Sub(e.sentAt) >= s.opts.AckTimeout {
					s.retryLocked(e.key, "timeout")
				}
			}
			s.mu.Unlock()
		}
	}
}

// Redeliver sends a delivery again as a retry (the next retry_attempt, a new
// envelope id), acknowledged or not, as Slack sometimes does. It reports the
// new envelope id, or false when the delivery is unknown or out of retries.
func (s *Socket) Redeliver(key, reason string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retryLocked(key, reason)
}

// SendRaw writes any frame to a connection (0: routed), for malformed input.
func (s *Socket) SendRaw(connID int, frame []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.pickLocked(connID)
	if c == nil {
		return false
	}
	c.out <- append([]byte(nil), frame...)
	return true
}

// Disconnect sends a disconnect envelope (reason e.g. "warning",
// "refresh_requested") to one connection, or to all when connID is 0. The
// client is expected to close the socket and open another.
func (s *Socket) Disconnect(connID int, reason string) {
	frame, _ := json.Marshal(map[string]any{
		"type": "disconnect", "reason": reason,
		"debug_info": map[string]any{"host": "fakeslack"},
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.conns {
		if connID == 0 || id == connID {
			c.out <- frame
		}
	}
}

// Drop kills one connection (all when connID is 0) without a close frame,
// as a network fault would.
func (s *Socket) Drop(connID int) {
	s.mu.Lock()
	var victims []*conn
	for id, c := range s.conns {
		if connID == 0 || id == connID {
			victims = append(victims, c)
		}
	}
	s.mu.Unlock()
	for _, c := range victims {
		c.kill()
	}
}

// SetPinging turns WebSocket pings on or off for the open connections.
func (s *Socket) SetPinging(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.ping.Store(on)
	}
}

// OpenConnections returns the ids of the open connections, oldest first.
func (s *Socket) OpenConnections() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openIDsLocked()
}

// Opened is how many connections have been opened so far.
func (s *Socket) Opened() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connSeq
}

// WaitOpen waits until at least n connections are open at once.
func (s *Socket) WaitOpen(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return len(s.conns) >= n })
}

// WaitOpened waits until n connections have been opened in total (the
// first, then reconnections) and one is open.
func (s *Socket) WaitOpened(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return s.connSeq >= n && len(s.conns) > 0 })
}

// Pending is how many envelopes wait for a connection.
func (s *Socket) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}
