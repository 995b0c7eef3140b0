// Package fakeslack is an in-process Slack for tests: the Socket Mode
// protocol (apps.connections.open, single-use WebSocket tickets, hello,
// envelopes, acks, ping frames, disconnect, retries) and the Web API methods
// conclave uses, so that tests drive the real slack-go socketmode client.
//
// Everything the client does is recorded in one ordered log: Web API calls,
// acks and envelope deliveries share a sequence number, so a test can assert
// that an ack came before a post. All methods are safe for concurrent use.
//
//	fake := fakeslack.New(t, fakeslack.Options{})
//	api := slack.New(fakeslack.BotToken, slack.OptionAPIURL(fake.APIURL()),
//		slack.OptionAppLevelToken(fakeslack.AppToken))
//	d := fake.SendMessage(fakeslack.Message{Channel: "C1", User: "U1", Text: "hi"})
//	ack, err := fake.WaitAck(ctx, d.EventID)
package fakeslack

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Tokens the fake accepts. Any other token gets invalid_auth.
const (
	AppToken = "xapp-1-A1-fake" // #nosec G101 -- the test fake's own token, valid nowhere else
	BotToken = "xoxb-fake"
)

// DefaultScopes are the bot scopes auth.test reports unless Options.Scopes
// says otherwise: the ones conclave asks for.
var DefaultScopes = []string{
	"chat:write", "chat:write.customize", "reactions:write",
	"channels:history", "groups:history", "channels:read", "groups:read",
	"users:read", "commands", "im:history", "assistant:write",
}

// Route chooses the connection an envelope goes to when the sender does not.
type Route int

// Routes.
const (
	RouteFirst  Route = iota // the oldest open connection
	RouteRandom              // any open connection
	RouteRoundRobin
)

// Options configure a Server. The zero value is usable.
type Options struct {
	TeamID    string // default "T0001"
	AppID     string // default "A0001"
	BotUserID string // conclave's bot user; default "UBOT"
	BotID     string // conclave's bot id; default "BBOT"
	BotName   string // default "conclave"
	// Scopes reported by auth.test in X-OAuth-Scopes; nil means DefaultScopes.
	Scopes []string
	// EchoPosts sends every chat.postMessage back as a message event, with
	// the bot's bot_id, as Slack does.
	EchoPosts bool
	// PingInterval is how often each connection gets a WebSocket ping
	// frame; default 500ms. Negative: never (the client's dead-man timer
	// then drops the connection).
	PingInterval time.Duration
	// AckTimeout: an envelope not acknowledged this long after delivery is
	// delivered again as a retry. Zero: only when its connection closes.
	AckTimeout time.Duration
	// MaxRetries bounds redeliveries of one event; default 3 (Slack's).
	MaxRetries int
	// Route picks the connection for envelopes that do not name one.
	Route    Route
	Users    []User
	Channels []Channel
	// Now is the fake's clock for stream expiry; nil: time.Now.
	Now func() time.Time
	// StreamExpiry is how long a stream stays open; default
	// DefaultStreamExpiry.
	StreamExpiry time.Duration
}

// User is a workspace member as users.info reports it.
type User struct {
	ID          string
	Name        string // the user name (handle)
	RealName    string
	DisplayName string
	IsBot       bool
	IsAdmin     bool // a workspace admin
	IsOwner     bool // a workspace owner
}

// Channel is a conversation as conversations.info reports it.
type Channel struct {
	ID        string
	Name      string
	Purpose   string
	Topic     string
	IsPrivate bool
	IsMember  *bool // nil means true
	// Members are the users in the channel (users.conversations).
	Members []string
}

// Server is a running fake Slack. Its parts each have one job: the Web
// API (webAPI), the Socket Mode connections and envelopes (Socket), the
// faults a test injects (Faults), and the record of what happened that a
// test reads (Record); the Server sends events. They share one state under
// one lock, so that every record is numbered in one order (Seq).
type Server struct {
	*state
	*Record
	*Socket
	*Faults
	web *webAPI
}

// Record is what the fake saw and did, for tests to read: Web API calls,
// acknowledgements, envelope deliveries, posts, ephemeral messages,
// command responses, reactions and App Home views; each list has a Wait
// that blocks until it is long enough.
type Record struct{ *state }

// Faults are the failures a test injects in the Web API (FailNext).
type Faults struct{ *state }

// webAPI answers the Web API methods, the response_url posts and the
// apps.connections.open that starts a socket.
type webAPI struct {
	*state
	socket *Socket
	faults *Faults
}

// state is everything the fake holds, under mu.
type state struct {
	t    testing.TB
	opts Options
	srv  *httptest.Server

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every recorded change
	seq       int64
	tsCounter int64
	idCounter int64
	closed    bool

	tickets map[string]bool // ticket → spent
	conns   map[int]*conn
	connSeq int
	rr      int
	envs    map[string]*envelope // by envelope id
	groups  map[string]*group    // by delivery key (event id or first envelope id)
	pending []*envelope          // waiting for a connection
	rand    *rand.Rand
	wg      sync.WaitGroup
	stop    chan struct{}

	calls      []Call
	acks       []Ack
	deliveries []Sent
	posts      []Post
	ephemerals []Ephemeral
	responses  []CommandResponse
	views      []View
	reactions  map[string][]string // channel/ts → names
	failures   map[string][]Failure
	users      map[string]User
	channels   map[string]Channel
	messages   map[string][]*stored // channel → messages in ts order
	// refusedStreams are the channel types where chat.startStream is
	// refused (Faults.RefuseStreams).
	refusedStreams map[string]bool
	// delays hold a method's calls before Slack sees them (Faults.Delay).
	delays map[string]func(context.Context)
}

// New starts a fake Slack that is shut down when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.TeamID == "" {
		opts.TeamID = "T0001"
	}
	if opts.AppID == "" {
		opts.AppID = "A0001"
	}
	if opts.BotUserID == "" {
		opts.BotUserID = "UBOT"
	}
	if opts.BotID == "" {
		opts.BotID = "BBOT"
	}
	if opts.BotName == "" {
		opts.BotName = "conclave"
	}
	if opts.Scopes == nil {
		opts.Scopes = DefaultScopes
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = 500 * time.Millisecond
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 3
	}
	if opts.StreamExpiry <= 0 {
		opts.StreamExpiry = DefaultStreamExpiry
	}
	st := &state{
		t:         t,
		opts:      opts,
		changed:   make(chan struct{}),
		tickets:   map[string]bool{},
		conns:     map[int]*conn{},
		envs:      map[string]*envelope{},
		groups:    map[string]*group{},
		rand:      rand.New(rand.NewPCG(1, 2)), // #nosec G404 -- a test fake picks connections reproducibly
		stop:      make(chan struct{}),
		reactions: map[string][]string{},
		failures:  map[string][]Failure{},
		users:     map[string]User{},
		channels:  map[string]Channel{},
		messages:  map[string][]*stored{},

		refusedStreams: map[string]bool{},
		delays:         map[string]func(context.Context){},
	}
	sock := &Socket{st}
	faults := &Faults{st}
	s := &Server{state: st, Record: &Record{st}, Socket: sock, Faults: faults, web: &webAPI{state: st, socket: sock, faults: faults}}
	s.users[opts.BotUserID] = User{ID: opts.BotUserID, Name: opts.BotName, RealName: opts.BotName, IsBot: true}
	for _, u := range opts.Users {
		s.users[u.ID] = u
	}
	for _, c := range opts.Channels {
		s.channels[c.ID] = c
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.web.serveAPI)
	mux.HandleFunc("/link/", s.serveSocket)
	mux.HandleFunc("/respond/", s.web.serveResponseURL)
	s.srv = httptest.NewServer(mux)
	if opts.AckTimeout > 0 {
		s.wg.Go(s.redeliverLoop)
	}
	t.Cleanup(s.close)
	return s
}

// APIURL is the Web API base URL, ending in "/" as slack.OptionAPIURL wants.
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// Options returns the options in effect (defaults filled in).
func (s *Server) Options() Options { return s.opts }

func (s *Server) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.kill()
	}
	s.wg.Wait()
	s.srv.Close()
}

// notifyLocked wakes every waiter; s.mu must be held.
func (s *state) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextSeqLocked numbers one recorded item; s.mu must be held.
func (s *state) nextSeqLocked() int64 {
	s.seq++
	return s.seq
}

// Seq is the sequence number of the last recorded item (call, ack or
// delivery). A test can read it at some instant and compare later records
// against it.
func (s *Record) Seq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// nextTSLocked returns a message timestamp later than every earlier one.
func (s *state) nextTSLocked() string {
	s.tsCounter++
	return formatTS(1700000000+s.tsCounter, s.tsCounter%1000000)
}

func (s *state) nextIDLocked() int64 {
	s.idCounter++
	return s.idCounter
}

// wait blocks until cond, called with s.mu held, holds or ctx ends.
func (s *state) wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AddChannel adds or replaces a channel.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[c.ID] = c
}

// Failure makes a Web API method fail.
type Failure struct {
	Times      int    // how many consecutive calls fail; 0 means 1
	Status     int    // HTTP status; 429 is sent with Retry-After
	RetryAfter int    // seconds, for 429 (0 sends "Retry-After: 0")
	Error      string // with Status 0 or 200: an ok:false answer with this error
	// Hang holds the request without an answer until the client gives up
	// (or the fake shuts down); the call is recorded with Status 0 and
	// Error "hung". Nothing is done.
	Hang bool
	// While, when set, makes the failure last as long as it reports true
	// (an outage), whatever Times says; it is asked at each call, with the
	// fake's lock held.
	While func() bool
	// Match, when set, limits the failure to the calls whose form it
	// accepts; the others are answered as usual and not counted.
	Match func(form url.Values) bool
}

// MatchPart matches the chat.postMessage calls carrying part n (1-based)
// of a post in their metadata.
func MatchPart(n int) func(url.Values) bool {
	return func(form url.Values) bool {
		var md Metadata
		if json.Unmarshal([]byte(form.Get("metadata")), &md) != nil {
			return false
		}
		part, _ := md.EventPayload["part"].(float64)
		return int(part) == n
	}
}

// MatchChannel matches the calls for one channel.
func MatchChannel(ch string) func(url.Values) bool {
	return func(form url.Values) bool { return form.Get("channel") == ch }
}

// FailNext makes the next calls of method fail as f says. Failures queue up
// in the order given; a call takes the first one that matches it.
func (s *Faults) FailNext(method string, f Failure) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f)
}

// Delay makes every later call of method wait for hold, given the
// request's context, before Slack sees it: the call is recorded, numbered
// and answered only once hold returns, as over a slow network. A nil hold
// ends the delay.
func (s *Faults) Delay(method string, hold func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hold == nil {
		delete(s.delays, method)
		return
	}
	s.delays[method] = hold
}

// Call is one recorded Web API request.
type Call struct {
	Seq    int64
	At     time.Time
	Method string
	Form   url.Values // the form (or JSON body fields as strings), token removed
	Auth   string     // "bot", "app" or "" when the token was wrong
	Status int        // HTTP status answered
	Error  string     // ok:false error answered, if any
}

// Calls returns every Web API request so far, in order.
func (s *Record) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the recorded requests of one method.
func (s *Record) CallsTo(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls waits until method has been called at least n times.
func (s *Record) WaitCalls(ctx context.Context, method string, n int) ([]Call, error) {
	err := s.wait(ctx, func() bool {
		k := 0
		for _, c := range s.calls {
			if c.Method == method {
				k++
			}
		}
		return k >= n
	})
	return s.CallsTo(method), err
}

// Ack is one acknowledgement the client sent over a socket.
type Ack struct {
	Seq          int64
	At           time.Time
	Conn         int             // the connection it came on
	EnvelopeID   string          // as sent by the client
	Key          string          // the delivery it belongs to (event id, or the first envelope id)
	RetryAttempt int             // of the envelope acknowledged
	Payload      json.RawMessage // the ack's payload, if any
	Known        bool            // whether the envelope id was one the fake sent
}

// Acks returns every ack so far, in order.
func (s *Record) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ack(nil), s.acks...)
}

// WaitAck waits for the first ack of a delivery, by its key (the EventID of
// a Delivery, or its EnvelopeID for envelopes without an event).
func (s *Record) WaitAck(ctx context.Context, key string) (Ack, error) {
	var found Ack
	err := s.wait(ctx, func() bool {
		for _, a := range s.acks {
			if a.Key == key || a.EnvelopeID == key {
				found = a
				return true
			}
		}
		return false
	})
	return found, err
}

// WaitAcks waits until a delivery (by its key, as WaitAck) has been
// acknowledged at least n times (its redeliveries' acks counted) and
// returns its acks.
func (s *Record) WaitAcks(ctx context.Context, key string, n int) ([]Ack, error) {
	var out []Ack
	err := s.wait(ctx, func() bool {
		out = out[:0]
		for _, a := range s.acks {
			if a.Key == key || a.EnvelopeID == key {
				out = append(out, a)
			}
		}
		return len(out) >= n
	})
	return out, err
}

// Sent is one envelope written to a socket.
type Sent struct {
	Seq          int64
	At           time.Time
	Conn         int
	EnvelopeID   string
	Key          string
	Type         string
	RetryAttempt int
	RetryReason  string
}

// Deliveries returns every envelope written so far, in order (redeliveries
// included).
func (s *Record) Deliveries() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.deliveries...)
}

// WaitDeliveries waits until at least n envelopes of a delivery key were
// written (n > 1 waits for retries).
func (s *Record) WaitDeliveries(ctx context.Context, key string, n int) ([]Sent, error) {
	var out []Sent
	err := s.wait(ctx, func() bool {
		out = out[:0]
		for _, d := range s.deliveries {
			if d.Key == key {
				out = append(out, d)
			}
		}
		return len(out) >= n
	})
	return out, err
}

// Post is one recorded chat.postMessage.
type Post struct {
	Seq         int64
	At          time.Time
	Channel     string
	TS          string // assigned by the fake
	ThreadTS    string
	Text        string
	Blocks      json.RawMessage // as sent; nil when none
	Username    string
	IconURL     string
	IconEmoji   string
	Metadata    *Metadata
	UnfurlLinks string // "true", "false" or "" when not sent
	UnfurlMedia string
	Parse       string
	LinkNames   string
	Form        url.Values // everything sent, token removed
}

// Metadata is Slack message metadata.
type Metadata struct {
	EventType    string         `json:"event_type"`
	EventPayload map[string]any `json:"event_payload"`
}

// MarkdownTexts returns the text of each markdown block of the post.
func (p Post) MarkdownTexts() []string {
	var blocks []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	if json.Unmarshal(p.Blocks, &blocks) != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		var text string
		if b.Type == "markdown" && json.Unmarshal(b.Text, &text) == nil {
			out = append(out, text)
		}
	}
	return out
}

// Posts returns every successful chat.postMessage, in order.
func (s *Record) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

// WaitPosts waits until at least n messages were posted and returns them all.
func (s *Record) WaitPosts(ctx context.Context, n int) ([]Post, error) {
	err := s.wait(ctx, func() bool { return len(s.posts) >= n })
	return s.Posts(), err
}

// WaitPostsAfter waits until more than n messages were posted and returns
// those after the first n, so that a reader following a long run of posts
// does not copy them all at each one.
func (s *Record) WaitPostsAfter(ctx context.Context, n int) ([]Post, error) {
	err := s.wait(ctx, func() bool { return len(s.posts) > n })
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts[min(n, len(s.posts)):]...), err
}

// Ephemeral is one recorded chat.postEphemeral.
type Ephemeral struct {
	Seq      int64
	At       time.Time
	Channel  string
	User     string
	ThreadTS string
	Text     string
	Blocks   json.RawMessage
}

// Ephemerals returns every successful chat.postEphemeral, in order.
func (s *Record) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ephemeral(nil), s.ephemerals...)
}

// WaitEphemerals waits until at least n ephemeral messages were posted.
func (s *Record) WaitEphemerals(ctx context.Context, n int) ([]Ephemeral, error) {
	err := s.wait(ctx, func() bool { return len(s.ephemerals) >= n })
	return s.Ephemerals(), err
}

// CommandResponse is one message posted to a slash command's response_url.
type CommandResponse struct {
	Seq             int64
	At              time.Time
	Key             string // the envelope id of the command
	Text            string
	ResponseType    string
	ReplaceOriginal bool // the message the action came from is to be replaced
	Body            json.RawMessage
}

// CommandResponses returns what was posted to response URLs, in order.
func (s *Record) CommandResponses() []CommandResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CommandResponse(nil), s.responses...)
}

// WaitCommandResponses waits until at least n responses were posted.
func (s *Record) WaitCommandResponses(ctx context.Context, n int) ([]CommandResponse, error) {
	err := s.wait(ctx, func() bool { return len(s.responses) >= n })
	return s.CommandResponses(), err
}

// Reactions returns the names of the bot's reactions on a message, in the
// order added.
func (s *Record) Reactions(channel, ts string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reactions[channel+"/"+ts]...)
}
