package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// sweepEvery is how often the in-process store drops expired records it has
// not been asked about.
const sweepEvery = time.Minute

// InProcess is the embedded Store: one replica, nothing persisted. Every
// expiry is measured with Options.Now.
type InProcess struct {
	opts Options

	mu         sync.Mutex
	convs      map[string]*inConv
	marks      map[string]time.Time // dedup mark → expiry
	pending    map[string]time.Time // conversation → pending since
	nextSweep  time.Time
	inLocks    // under mu too, so that a load and a commit check the lock atomically
	inManager  // works on the sessions and traces parts under mu
	inPeople   // under mu too, so that recording reads what it depends on atomically
	inSessions // under mu too, so that a commit appends to sessions atomically
	inTraces   // under mu too, so that a commit adds its traces atomically
	inUsage    // under mu too, so that a commit counts its usage atomically
}

type inConv struct {
	conv    Conversation
	msgs    map[string]Message
	due     time.Time // when Due lists it (zero: never), unless pending
	expires time.Time
	posts   int // pending posts, as the last commit said
}

var (
	_ Store    = (*InProcess)(nil)
	_ Recorder = (*InProcess)(nil)
)

// NewInProcess returns an empty in-process store.
func NewInProcess(opts Options) *InProcess {
	s := &InProcess{
		opts:    opts.withDefaults(),
		convs:   map[string]*inConv{},
		marks:   map[string]time.Time{},
		pending: map[string]time.Time{},
	}
	s.inLocks = newInLocks(&s.mu, s.now)
	s.inPeople = inPeople{
		mu: &s.mu, clock: s.now,
		channels: map[string][]string{}, userAgent: map[string]string{}, agentUser: map[string]string{},
		wallets: map[string]map[string]bool{}, nonces: map[string]inNonce{},
	}
	s.inSessions = inSessions{
		mu: &s.mu, maxMessages: s.opts.MaxSessionMessages, clock: s.opts.Now,
		sessions: map[string]map[string][]SessionEntry{}, used: map[string]map[string]uint64{},
	}
	s.inTraces = newInTraces(&s.mu, s.now, s.opts)
	s.inUsage = newInUsage(&s.mu, s.now)
	s.inManager = inManager{sess: &s.inSessions, tr: &s.inTraces}
	return s
}

// now reads the clock and drops what expired; callers hold s.mu.
func (s *InProcess) now() time.Time {
	now := s.opts.Now()
	if now.Before(s.nextSweep) {
		return now
	}
	s.nextSweep = now.Add(sweepEvery)
	for id, c := range s.convs {
		if !now.Before(c.expires) {
			delete(s.convs, id)
		}
	}
	for k, exp := range s.marks {
		if !now.Before(exp) {
			delete(s.marks, k)
		}
	}
	s.sweepLocks(now)
	for k, n := range s.nonces {
		if !now.Before(n.expires) {
			delete(s.nonces, k)
		}
	}
	s.sweepTraces(now)
	return now
}

// conv returns a live conversation or nil.
func (s *InProcess) conv(id string, now time.Time) *inConv {
	c, ok := s.convs[id]
	if !ok {
		return nil
	}
	if !now.Before(c.expires) {
		delete(s.convs, id)
		return nil
	}
	return c
}

// writable returns the conversation to write to, creating it, and restarts
// its retention clock.
func (s *InProcess) writable(conv Conversation, now time.Time) *inConv {
	c := s.conv(conv.ID, now)
	if c == nil {
		c = &inConv{
			conv: Conversation{ID: conv.ID, Team: conv.Team, Channel: conv.Channel, ThreadTS: conv.ThreadTS},
			msgs: map[string]Message{},
		}
		s.convs[conv.ID] = c
	}
	c.expires = now.Add(s.opts.ConversationTTL)
	return c
}

func (s *InProcess) marked(key string, now time.Time) bool {
	exp, ok := s.marks[key]
	return ok && now.Before(exp)
}

func (s *InProcess) markPending(id string, now time.Time) {
	if _, ok := s.pending[id]; !ok {
		s.pending[id] = now
	}
}

func (s *InProcess) snapshot(id string, now time.Time) Snapshot {
	c := s.conv(id, now)
	if c == nil {
		return Snapshot{Conversation: Conversation{ID: id}}
	}
	snap := Snapshot{Exists: true, Conversation: cloneConversation(c.conv)}
	// Room for the messages a turn adds, which the engine appends.
	snap.Messages = make([]Message, 0, len(c.msgs)+4)
	for _, m := range c.msgs {
		snap.Messages = append(snap.Messages, cloneMessage(m))
	}
	sortMessages(snap.Messages)
	return snap
}

// RecordMessage implements Store.
func (s *InProcess) RecordMessage(_ context.Context, conv Conversation, m Message, eventID string) (bool, error) {
	if err := checkRecord(conv, m); err != nil {
		return false, fmt.Errorf("memory: record message: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.record(conv, m, eventID, s.now()), nil
}

// record records a message as RecordMessage does; callers hold s.mu.
func (s *InProcess) record(conv Conversation, m Message, eventID string, now time.Time) bool {
	tsKey := conv.ID + "\x00ts\x00" + m.TS
	evKey := conv.ID + "\x00ev\x00" + eventID
	s.markPending(conv.ID, now)
	if s.marked(tsKey, now) || (eventID != "" && s.marked(evKey, now)) {
		return false
	}
	if c := s.conv(conv.ID, now); c != nil {
		if _, ok := c.msgs[m.TS]; ok {
			return false
		}
	}
	s.marks[tsKey] = now.Add(DedupTTL)
	if eventID != "" {
		s.marks[evKey] = now.Add(DedupTTL)
	}
	s.writable(conv, now).msgs[m.TS] = cloneMessage(m)
	return true
}

// RecordLooked implements Recorder.
func (s *InProcess) RecordLooked(_ context.Context, in Intake) (Intaken, error) {
	if err := checkIntake(in); err != nil {
		return Intaken{}, fmt.Errorf("memory: record message: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := Intaken{Found: s.lookup(in.Lookup, now)}
	if out.Met = in.meets(out.Found); out.Met {
		out.Recorded = s.record(in.Conversation, in.Message, in.EventID, now)
	}
	return out, nil
}

// UpdateMessage implements Store.
func (s *InProcess) UpdateMessage(_ context.Context, convID, ts, raw, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c := s.conv(convID, now)
	if c == nil {
		return fmt.Errorf("memory: update message %s: %w", ts, ErrNotFound)
	}
	m, ok := c.msgs[ts]
	if !ok {
		return fmt.Errorf("memory: update message %s: %w", ts, ErrNotFound)
	}
	m.Raw, m.Text = raw, text
	c.msgs[ts] = m
	c.expires = now.Add(s.opts.ConversationTTL)
	return nil
}

// DeleteMessage implements Store.
func (s *InProcess) DeleteMessage(_ context.Context, convID, ts string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if c := s.conv(convID, now); c != nil {
		delete(c.msgs, ts)
		c.expires = now.Add(s.opts.ConversationTTL)
	}
	return nil
}

// Snapshot implements Store.
func (s *InProcess) Snapshot(_ context.Context, convID string) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot(convID, s.now()), nil
}

// MarkPending implements Store.
func (s *InProcess) MarkPending(_ context.Context, convID string) error {
	if convID == "" {
		return fmt.Errorf("memory: mark pending: %w", errNoConversation)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markPending(convID, s.now())
	return nil
}

// Due implements Store.
func (s *InProcess) Due(_ context.Context, now time.Time, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clock := s.now()
	var items []dueItem
	for id, since := range s.pending {
		items = append(items, dueItem{id: id, pending: true, at: since})
	}
	for id := range s.convs {
		c := s.conv(id, clock)
		if c == nil || c.due.IsZero() || c.due.After(now) {
			continue
		}
		if _, ok := s.pending[id]; !ok {
			items = append(items, dueItem{id: id, at: c.due})
		}
	}
	return orderDue(items, limit), nil
}

// AcquireAndLoad implements Store.
func (s *InProcess) AcquireAndLoad(_ context.Context, convID string, ttl time.Duration, q Lookup) (Lock, Snapshot, Found, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	l, err := s.acquire(convID, ttl, now)
	if err != nil {
		return Lock{}, Snapshot{}, Found{}, err
	}
	return l, s.load(l, now), s.lookup(q, now), nil
}

// Load implements Store.
func (s *InProcess) Load(_ context.Context, l Lock) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !s.held(l, now) {
		return Snapshot{}, fmt.Errorf("memory: load %s: %w", l.ConversationID, ErrLockLost)
	}
	return s.load(l, now), nil
}

// load clears the pending mark of a held conversation and keeps it due
// from the lock's expiry on; callers hold s.mu and the lock.
func (s *InProcess) load(l Lock, now time.Time) Snapshot {
	_, pending := s.pending[l.ConversationID]
	delete(s.pending, l.ConversationID)
	if c := s.conv(l.ConversationID, now); c != nil {
		expiry := s.lease(l.ConversationID)
		switch {
		case pending:
			c.due = expiry
		case !c.due.IsZero():
			c.due = latest(c.due, expiry)
		}
	}
	return s.snapshot(l.ConversationID, now)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Commit implements Store.
func (s *InProcess) Commit(_ context.Context, l Lock, c Commit) (bool, error) {
	conv, err := checkCommit(l, c)
	if err != nil {
		return false, fmt.Errorf("memory: commit %s: %w", l.ConversationID, err)
	}
	traces, err := traceEntries(c.Traces)
	if err != nil {
		return false, fmt.Errorf("memory: commit %s: %w", l.ConversationID, err)
	}
	usage, err := usageWritesOf(c.Usage)
	if err != nil {
		return false, fmt.Errorf("memory: commit %s: %w", l.ConversationID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !s.held(l, now) {
		return false, fmt.Errorf("memory: commit %s: %w", l.ConversationID, ErrLockLost)
	}
	rec := s.writable(conv, now)
	rec.conv = cloneConversation(conv)
	rec.due = c.Deadline
	rec.posts = c.PendingPosts
	for _, m := range c.Messages {
		rec.msgs[m.TS] = cloneMessage(m)
	}
	for _, a := range c.Sessions {
		s.appendSession(a)
	}
	s.addTraces(rec.conv, traces, now)
	s.addUsage(usage, now)
	if c.Release {
		s.unlock(l)
	}
	_, pending := s.pending[l.ConversationID]
	return pending, nil
}

// PendingPosts implements Store.
func (s *InProcess) PendingPosts(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, rec := range s.convs {
		n += rec.posts
	}
	return n, nil
}

// ReleaseLock implements Store.
func (s *InProcess) ReleaseLock(_ context.Context, l Lock) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlock(l)
	_, pending := s.pending[l.ConversationID]
	return pending, nil
}

// Lookup implements Store.
func (s *InProcess) Lookup(_ context.Context, q Lookup) (Found, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookup(q, s.now()), nil
}

// lookup reads what q names; callers hold s.mu.
func (s *InProcess) lookup(q Lookup, now time.Time) Found {
	var f Found
	if q.Channel != "" {
		f.ChannelAgents = slices.Clone(s.channels[q.Channel])
	}
	if q.User != "" {
		f.HumanAgent = s.userAgent[q.User]
	}
	if q.Conversation != "" {
		f.Exists = s.conv(q.Conversation, now) != nil
	}
	if q.Spent != nil {
		fields := s.days[UsageDay(now)]
		f.Spent = spentFound(q.Spent, func(field string) string { return fields[field] })
	}
	return f
}

// Ping implements Store; the in-process store is always reachable.
func (s *InProcess) Ping(context.Context) error { return nil }

// Close implements Store; there is nothing to release.
func (s *InProcess) Close() error { return nil }
