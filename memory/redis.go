package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/conclavehq/conclave/memory/internal/redisurl"
)

// DefaultKeyPrefix starts every key of the Redis store unless configured
// otherwise (memory.key_prefix).
const DefaultKeyPrefix = "conclave:"

// pendingOffset shifts pending-since times below zero in a due index, so
// pending conversations sort before every deadline.
const pendingOffset = 100_000_000_000_000 // ms, about 3,170 years

// RedisOptions configure the Redis store.
type RedisOptions struct {
	// URL selects the server, Sentinel set or Cluster; see docs/memory.md
	// for the forms. Ignored when Client is set.
	URL string
	// Client is used instead of dialling URL; the store then does not
	// close it.
	Client redis.UniversalClient
	// KeyPrefix starts every key (DefaultKeyPrefix when empty). It must
	// not contain braces, which would change the keys' hash slots.
	KeyPrefix string
	// MaxSessionMessages, ConversationTTL, TraceRetention, TraceMaxBytes,
	// TraceTotalMaxBytes and Now are as in Options.
	MaxSessionMessages int
	ConversationTTL    time.Duration
	TraceRetention     time.Duration
	TraceMaxBytes      int
	TraceTotalMaxBytes int
	Now                func() time.Time
}

// Redis is the Store shared by every replica: conversations, sessions and
// marks live in Redis, and everything the engine needs atomic is one Lua
// script on one hash slot.
type Redis struct {
	*redisConn
	redisLocks
	redisManager
	redisPeople
	redisSessions
	redisTraces
	redisUsage
	owned   bool
	direct  bool // commit appends to sessions in its own script (not on Cluster)
	decoded *decoded
}

var (
	_ Store    = (*Redis)(nil)
	_ Recorder = (*Redis)(nil)
)

// NewRedis connects to Redis and checks it answers.
func NewRedis(ctx context.Context, o RedisOptions) (*Redis, error) {
	prefix := o.KeyPrefix
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("memory: key prefix %q contains a brace", prefix)
	}
	conn := &redisConn{
		c:    o.Client,
		keys: newKeySchema(prefix),
		opts: Options{
			MaxSessionMessages: o.MaxSessionMessages, ConversationTTL: o.ConversationTTL,
			TraceRetention: o.TraceRetention, TraceMaxBytes: o.TraceMaxBytes,
			TraceTotalMaxBytes: o.TraceTotalMaxBytes, Now: o.Now,
		}.withDefaults(),
	}
	r := &Redis{
		redisConn:     conn,
		redisLocks:    redisLocks{conn},
		redisManager:  redisManager{conn},
		redisPeople:   redisPeople{conn},
		redisSessions: redisSessions{conn},
		redisTraces:   redisTraces{conn},
		redisUsage:    redisUsage{conn},
		owned:         o.Client == nil,
		decoded:       newDecoded(decodedBudget),
	}
	if r.c == nil {
		c, err := redisurl.NewClient(o.URL)
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		r.c = c
	}
	_, cluster := r.c.(*redis.ClusterClient)
	r.direct = !cluster
	if err := r.Ping(ctx); err != nil {
		_ = r.Close()
		return nil, err
	}
	if err := r.loadScripts(ctx); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// loadScripts caches the scripts on every primary, so the hot path never
// sends a script body.
func (r *Redis) loadScripts(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, s := range allScripts {
			if err := s.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(ctx, r.c)
	}
	if err != nil {
		return fmt.Errorf("memory: load scripts: %w", err)
	}
	return nil
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func (r *Redis) pendingScore() string {
	return strconv.FormatInt(r.opts.Now().UnixMilli()-pendingOffset, 10)
}

// RecordMessage implements Store.
func (r *Redis) RecordMessage(ctx context.Context, conv Conversation, m Message, eventID string) (bool, error) {
	if err := checkRecord(conv, m); err != nil {
		return false, fmt.Errorf("memory: record message: %w", err)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return false, fmt.Errorf("memory: record message %s: %w", m.TS, err)
	}
	k := r.keys.conv(conv.ID)
	keys := []string{k.due, k.conv, k.msgs, k.seenTS(m.TS)}
	if eventID != "" {
		keys = append(keys, k.seenEvent(eventID))
	}
	n, err := recordScript.Run(ctx, r.c, keys, conv.ID, conv.Team, conv.Channel, conv.ThreadTS, m.TS, body,
		r.pendingScore(), ms(DedupTTL), r.convTTL()).Int()
	if err != nil {
		return false, fmt.Errorf("memory: record message %s of %s: %w", m.TS, conv.ID, err)
	}
	return n == 1, nil
}

// RecordLooked implements Recorder: off Cluster, one script reads the
// lookup and records; on Cluster, a pipeline reads and a script records.
func (r *Redis) RecordLooked(ctx context.Context, in Intake) (Intaken, error) {
	if err := checkIntake(in); err != nil {
		return Intaken{}, fmt.Errorf("memory: record message: %w", err)
	}
	if !r.direct {
		return r.recordLookedInTwo(ctx, in)
	}
	m, conv := in.Message, in.Conversation
	body, err := json.Marshal(m)
	if err != nil {
		return Intaken{}, fmt.Errorf("memory: record message %s: %w", m.TS, err)
	}
	k := r.keys.conv(conv.ID)
	q := in.Lookup
	keys := []string{k.due, k.conv, k.msgs, k.seenTS(m.TS), r.keys.channel(q.Channel), r.keys.pairByUser()}
	if in.EventID != "" {
		keys = append(keys, k.seenEvent(in.EventID))
	}
	res, err := recordLookedScript.Run(ctx, r.c, keys, conv.ID, conv.Team, conv.Channel, conv.ThreadTS, m.TS, body,
		r.pendingScore(), ms(DedupTTL), r.convTTL(),
		q.User, flag(q.Channel != ""), flag(q.Conversation != ""),
		flag(in.NeedChannelAgents), flag(in.NeedUnpaired), flag(in.NeedExists)).Slice()
	if err == nil && len(res) != 5 {
		err = fmt.Errorf("unexpected answer %v", res)
	}
	if err != nil {
		return Intaken{}, fmt.Errorf("memory: record message %s of %s: %w", m.TS, conv.ID, err)
	}
	met, _ := res[0].(int64)
	recorded, _ := res[1].(int64)
	exists, _ := res[4].(int64)
	human, _ := res[3].(string)
	out := Intaken{Met: met == 1, Recorded: recorded == 1, Found: Found{HumanAgent: human, Exists: exists > 0}}
	if q.Channel != "" {
		out.Found.ChannelAgents = strs(res[2])
	}
	return out, nil
}

// recordLookedInTwo is RecordLooked where the records read live in other
// hash slots than the conversation (Cluster): the reads, then the record.
func (r *Redis) recordLookedInTwo(ctx context.Context, in Intake) (Intaken, error) {
	f, err := r.Lookup(ctx, in.Lookup)
	if err != nil {
		return Intaken{}, err
	}
	out := Intaken{Found: f, Met: in.meets(f)}
	if out.Met {
		if out.Recorded, err = r.RecordMessage(ctx, in.Conversation, in.Message, in.EventID); err != nil {
			return Intaken{}, err
		}
	}
	return out, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}

// UpdateMessage implements Store.
func (r *Redis) UpdateMessage(ctx context.Context, convID, ts, raw, text string) error {
	k := r.keys.conv(convID)
	n, err := updateScript.Run(ctx, r.c, []string{k.conv, k.msgs}, ts, raw, text, r.convTTL()).Int()
	if err == nil && n == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("memory: update message %s of %s: %w", ts, convID, err)
	}
	return nil
}

// DeleteMessage implements Store.
func (r *Redis) DeleteMessage(ctx context.Context, convID, ts string) error {
	k := r.keys.conv(convID)
	if err := deleteScript.Run(ctx, r.c, []string{k.conv, k.msgs}, ts, r.convTTL()).Err(); err != nil {
		return fmt.Errorf("memory: delete message %s of %s: %w", ts, convID, err)
	}
	return nil
}

// Snapshot implements Store.
func (r *Redis) Snapshot(ctx context.Context, convID string) (Snapshot, error) {
	k := r.keys.conv(convID)
	var fields *redis.MapStringStringCmd
	var msgs *redis.StringSliceCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, k.conv)
		msgs = p.HVals(ctx, k.msgs)
		return nil
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("memory: snapshot %s: %w", convID, err)
	}
	snap, err := decodeSnapshot(r.decoded, convID, fields.Val(), msgs.Val())
	if err != nil {
		return Snapshot{}, fmt.Errorf("memory: snapshot %s: %w", convID, err)
	}
	return snap, nil
}

// decodeSnapshot builds a conversation's snapshot from its stored
// fields and messages, decoding the messages d does not hold yet.
func decodeSnapshot(d *decoded, id string, fields map[string]string, msgs []string) (Snapshot, error) {
	snap := Snapshot{Exists: len(fields) > 0, Conversation: Conversation{ID: id}}
	if !snap.Exists {
		return snap, nil
	}
	c := &snap.Conversation
	c.Team, c.Channel, c.ThreadTS = fields["team"], fields["channel"], fields["thread_ts"]
	if s := fields["state"]; s != "" {
		c.State = []byte(s)
	}
	var err error
	snap.Messages, err = d.messages(id, msgs)
	if err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// MarkPending implements Store.
func (r *Redis) MarkPending(ctx context.Context, convID string) error {
	if convID == "" {
		return fmt.Errorf("memory: mark pending: %w", errNoConversation)
	}
	k := r.keys.conv(convID)
	if err := markPendingScript.Run(ctx, r.c, []string{k.due}, convID, r.pendingScore()).Err(); err != nil {
		return fmt.Errorf("memory: mark pending %s: %w", convID, err)
	}
	return nil
}

// Due implements Store. It asks every shard in one pipeline.
func (r *Redis) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	shards := make([]struct {
		keys []string
		args []any
		cmd  *redis.Cmd
	}, dueShards)
	// Errors are read per command below.
	_, _ = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range shards {
			sh := &shards[i]
			sh.keys, sh.args = []string{r.keys.due(i)}, []any{now.UnixMilli(), limit, r.keys.shard(i) + "conv:"}
			sh.cmd = dueScript.EvalSha(ctx, p, sh.keys, sh.args...)
		}
		return nil
	})
	var items []dueItem
	for _, sh := range shards {
		res, cerr := r.rerun(ctx, sh.cmd, dueScript, sh.keys, sh.args...).Slice()
		if cerr != nil {
			return nil, fmt.Errorf("memory: due: %w", cerr)
		}
		for j := 0; j+1 < len(res); j += 2 {
			id, _ := res[j].(string)
			s, _ := res[j+1].(string)
			score, perr := strconv.ParseInt(s, 10, 64)
			if perr != nil {
				return nil, fmt.Errorf("memory: due: score %q of %s: %w", s, id, perr)
			}
			if score < 0 {
				items = append(items, dueItem{id: id, pending: true, at: time.UnixMilli(score + pendingOffset)})
			} else {
				items = append(items, dueItem{id: id, at: time.UnixMilli(score)})
			}
		}
	}
	return orderDue(items, limit), nil
}

// rerun returns cmd, the result of s sent by its hash in a pipeline, or
// when Redis has restarted and lost its script cache since the scripts
// were loaded (s did not run then, so it may run now), the result of
// running s again, its body sent.
func (r *Redis) rerun(ctx context.Context, cmd *redis.Cmd, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return s.Run(ctx, r.c, keys, args...)
	}
	return cmd
}

// AcquireAndLoad implements Store: the lock is taken by the load script,
// and the lookups ride in the same pipeline.
func (r *Redis) AcquireAndLoad(ctx context.Context, convID string, ttl time.Duration, q Lookup) (Lock, Snapshot, Found, error) {
	if err := checkAcquire(convID, ttl); err != nil {
		return Lock{}, Snapshot{}, Found{}, err
	}
	l := Lock{ConversationID: convID, Token: newToken()}
	snap, found, err := r.load(ctx, l, ttl, q)
	if errors.Is(err, ErrLockLost) {
		err = ErrLocked
	}
	if err != nil {
		return Lock{}, Snapshot{}, Found{}, fmt.Errorf("memory: acquire and load %s: %w", convID, err)
	}
	return l, snap, found, nil
}

// Load implements Store.
func (r *Redis) Load(ctx context.Context, l Lock) (Snapshot, error) {
	snap, _, err := r.load(ctx, l, 0, Lookup{})
	if err != nil {
		return Snapshot{}, fmt.Errorf("memory: load %s: %w", l.ConversationID, err)
	}
	return snap, nil
}

// load runs the load script, taking the lock first when ttl > 0, with q's
// reads in the same pipeline. ErrLockLost when the lock is not (or could
// not be) held.
func (r *Redis) load(ctx context.Context, l Lock, ttl time.Duration, q Lookup) (Snapshot, Found, error) {
	k := r.keys.conv(l.ConversationID)
	keys := []string{k.lock, k.due, k.conv, k.msgs, k.outbox}
	acquire := ""
	if ttl > 0 {
		acquire = ms(ttl)
	}
	args := []any{l.Token, l.ConversationID, r.opts.Now().UnixMilli(), acquire}
	var res any
	var found Found
	var err error
	if q == (Lookup{}) {
		res, err = loadScript.Run(ctx, r.c, keys, args...).Result()
	} else {
		var script *redis.Cmd
		var lookups lookupCmds
		// Errors are read per command below.
		_, _ = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			script = loadScript.EvalSha(ctx, p, keys, args...)
			lookups = r.queueLookup(ctx, p, q)
			return nil
		})
		res, err = r.rerun(ctx, script, loadScript, keys, args...).Result()
		if err == nil {
			found, err = lookups.found()
		}
	}
	if err != nil {
		return Snapshot{}, Found{}, err
	}
	parts, ok := res.([]any)
	if !ok || len(parts) != 3 {
		return Snapshot{}, Found{}, ErrLockLost
	}
	flat, msgs, outbox := strs(parts[0]), strs(parts[1]), strs(parts[2])
	fields := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		fields[flat[i]] = flat[i+1]
	}
	for _, entry := range outbox {
		if err := r.drainOutbox(ctx, k, entry); err != nil {
			return Snapshot{}, Found{}, err
		}
	}
	snap, err := decodeSnapshot(r.decoded, l.ConversationID, fields, msgs)
	return snap, found, err
}

// lookupCmds are the commands of a Lookup queued in a pipeline.
type lookupCmds struct {
	agents *redis.StringSliceCmd
	human  *redis.StringCmd
	exists *redis.IntCmd
	spent  *redis.SliceCmd
	query  *SpentQuery // what spent asks
	fields []string    // spent's fields
}

func (r *Redis) queueLookup(ctx context.Context, p redis.Pipeliner, q Lookup) lookupCmds {
	var c lookupCmds
	if q.Channel != "" {
		c.agents = p.LRange(ctx, r.keys.channel(q.Channel), 0, -1)
	}
	if q.User != "" {
		c.human = p.HGet(ctx, r.keys.pairByUser(), q.User)
	}
	if q.Conversation != "" {
		c.exists = p.Exists(ctx, r.keys.conv(q.Conversation).conv)
	}
	if q.Spent != nil {
		// Today's counters are in a slot of their own: on Cluster the
		// pipeline sends this read to its node beside the others.
		c.query, c.fields = q.Spent, spentFields(q.Spent)
		c.spent = p.HMGet(ctx, r.spentKey(), c.fields...)
	}
	return c
}

// found reads the answers of a pipeline that ran.
func (c lookupCmds) found() (Found, error) {
	var f Found
	var err error
	if c.agents != nil {
		if f.ChannelAgents, err = c.agents.Result(); err != nil {
			return Found{}, fmt.Errorf("agents of the channel: %w", err)
		}
	}
	if c.human != nil {
		f.HumanAgent, err = c.human.Result()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		if err != nil {
			return Found{}, fmt.Errorf("human agent of the user: %w", err)
		}
	}
	if c.exists != nil {
		n, err := c.exists.Result()
		if err != nil {
			return Found{}, fmt.Errorf("conversation: %w", err)
		}
		f.Exists = n > 0
	}
	if c.spent != nil {
		got, err := spentRead(c.spent, c.fields)
		if err != nil {
			return Found{}, fmt.Errorf("today's usage: %w", err)
		}
		f.Spent = spentFound(c.query, func(field string) string { return got[field] })
	}
	return f, nil
}

// Lookup implements Store.
func (r *Redis) Lookup(ctx context.Context, q Lookup) (Found, error) {
	var cmds lookupCmds
	// Errors are read per command.
	_, _ = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmds = r.queueLookup(ctx, p, q)
		return nil
	})
	f, err := cmds.found()
	if err != nil {
		return Found{}, fmt.Errorf("memory: lookup: %w", err)
	}
	return f, nil
}

func strs(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

// outboxEntry is a commit's session appends, parked with the conversation
// until they are applied (on Redis Cluster, where they live in other hash
// slots).
type outboxEntry struct {
	ID       string          `json:"id"`
	Sessions []SessionAppend `json:"sessions"`
	// Usage is counted into the counters of Day (the day of the commit).
	Day   string  `json:"day,omitempty"`
	Usage []Usage `json:"usage,omitempty"`
}

// Commit implements Store.
func (r *Redis) Commit(ctx context.Context, l Lock, c Commit) (bool, error) {
	k := r.keys.conv(l.ConversationID)
	release := c.Release
	// Parked appends are applied after the script: the lock is released
	// only once they are, so that no other holder drains them meanwhile.
	parked, pending, err := r.commit(ctx, k, l, c, release && r.direct)
	if err == nil && parked != "" {
		err = r.drainOutbox(ctx, k, parked)
	}
	if err == nil && release && !r.direct {
		pending, err = r.release(ctx, l)
	}
	if err != nil {
		return false, fmt.Errorf("memory: commit %s: %w", l.ConversationID, err)
	}
	return pending, nil
}

// commit writes c under l (releasing it when release is set) and returns
// the outbox entry it parked, if any, and whether the conversation is
// pending.
func (r *Redis) commit(ctx context.Context, k convKeys, l Lock, c Commit, release bool) (parked string, pending bool, err error) {
	conv, err := checkCommit(l, c)
	if err != nil {
		return "", false, err
	}
	deadline := ""
	if !c.Deadline.IsZero() {
		deadline = strconv.FormatInt(max(c.Deadline.UnixMilli(), 0), 10)
	}
	releaseArg := ""
	if release {
		releaseArg = "1"
	}
	keys := []string{k.lock, k.due, k.conv, k.msgs, k.outbox, k.posts}
	args := []any{l.Token, conv.ID, conv.Team, conv.Channel, conv.ThreadTS, conv.State, deadline, r.convTTL(),
		releaseArg, len(c.Messages)}
	for _, m := range c.Messages {
		body, err := json.Marshal(m)
		if err != nil {
			return "", false, fmt.Errorf("encode message %s: %w", m.TS, err)
		}
		args = append(args, m.TS, body)
	}
	appends := stamped(slices.DeleteFunc(slices.Clone(c.Sessions), func(a SessionAppend) bool { return len(a.Entries) == 0 }), r.opts.Now())
	usage, err := usageWritesOf(c.Usage)
	if err != nil {
		return "", false, err
	}
	day := UsageDay(r.opts.Now())
	if !r.direct && (len(appends) > 0 || len(c.Usage) > 0) {
		body, err := json.Marshal(outboxEntry{ID: newToken(), Sessions: appends, Day: day, Usage: c.Usage})
		if err != nil {
			return "", false, fmt.Errorf("encode session appends: %w", err)
		}
		parked = string(body)
	}
	args = append(args, parked, r.opts.MaxSessionMessages)
	if r.direct {
		args = append(args, len(appends))
		for _, a := range appends {
			sk := r.keys.sessions(a.Namespace)
			keys = append(keys, sk.list(a.Key), sk.index(), sk.recent())
			if args, err = appendEntries(append(args, a.Key, len(a.Entries)), a.Entries); err != nil {
				return "", false, err
			}
		}
	} else {
		args = append(args, 0)
	}
	args = append(args, max(c.PendingPosts, 0))
	var bound *scriptCall
	if keys, args, bound, err = r.commitTraces(keys, args, conv, c.Traces); err != nil {
		return "", false, err
	}
	if !r.direct {
		usage = usageWrites{} // parked in the outbox
	}
	args = usageArgs(args, usage)
	if len(usage.incr)+len(usage.names) > 0 {
		keys = append(keys, r.keys.usage(day).counters())
	}
	var n int
	if bound == nil {
		n, err = commitScript.Run(ctx, r.c, keys, args...).Int()
	} else {
		n, err = r.commitBounded(ctx, keys, args, bound)
	}
	if err != nil {
		return "", false, err
	}
	if n == 0 {
		return "", false, ErrLockLost
	}
	return parked, n == 2, nil
}

// commitTraces adds a commit's traces to the script's keys and
// arguments: their count, then, when there are some, the retention, the
// size bound, the bound over all traces, now and the entries. With one
// Redis the commit keeps the bound over all traces itself; on Cluster
// those keys are in another slot, and it returns the call that keeps it
// there, to be sent with the commit.
func (r *Redis) commitTraces(keys []string, args []any, conv Conversation, traces []TurnTrace) ([]string, []any, *scriptCall, error) {
	if len(traces) == 0 {
		return keys, append(args, 0), nil, nil
	}
	entries, err := traceEntries(traces)
	if err != nil {
		return nil, nil, nil, err
	}
	k := r.keys.traces(conv.ID, conv.Channel, conv.ThreadTS)
	b := r.keys.traceBound()
	now := r.opts.Now().UnixMilli()
	keys = append(keys, k.list, k.bytes, k.ref)
	args = append(args, len(entries), ms(r.opts.TraceRetention), r.opts.TraceMaxBytes)
	var bound *scriptCall
	if r.direct {
		keys = append(keys, b.all()...)
		args = append(args, r.opts.TraceTotalMaxBytes, now)
	} else {
		added, most := 0, r.opts.TraceMaxBytes
		for _, e := range entries {
			added += len(e)
			most = max(most, len(e)) // the newest is kept whatever its size
		}
		bound = &scriptCall{traceBoundScript, b.all(), []any{
			k.list, added, most, now, ms(r.opts.TraceRetention), r.opts.TraceTotalMaxBytes,
		}}
		args = append(args, "", now)
	}
	for _, e := range entries {
		args = append(args, e)
	}
	return keys, args, bound, nil
}

// scriptCall is a script with its keys and arguments.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// commitBounded runs the commit script and the bound over all traces
// in one pipeline (on Cluster), then deletes the traces of the
// conversations the bound evicted. The bound counts the traces even
// when the commit is refused: an overcount, which evicts a little early
// until the conversation goes. A failed deletion leaves the evicted
// traces to their retention.
func (r *Redis) commitBounded(ctx context.Context, keys []string, args []any, bound *scriptCall) (int, error) {
	cmds := runScripts(ctx, r.c, scriptCall{commitScript, keys, args}, *bound)
	evicted, _ := cmds[1].StringSlice() // deleted whatever became of the commit: they left the count
	if len(evicted) > 0 {
		_, _ = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, list := range evicted {
				if size, ok := traceBytesKey(list); ok {
					p.Del(ctx, list, size)
				}
			}
			return nil
		})
	}
	return cmds[0].Int()
}

// runScripts runs calls in one pipeline, each by its SHA; a call the
// server does not know (NOSCRIPT: its script cache was emptied) is sent
// again alone with its body, as redis.Script.Run does.
func runScripts(ctx context.Context, c redis.UniversalClient, calls ...scriptCall) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range calls {
			cmds[i] = s.script.EvalSha(ctx, p, s.keys, s.args...)
		}
		return nil
	}) // each command keeps its own error
	for i, s := range calls {
		if err := cmds[i].Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			cmds[i] = s.script.Eval(ctx, c, s.keys, s.args...)
		}
	}
	return cmds
}

// drainOutbox applies a parked commit's session appends, each at most
// once, then drops the entry.
func (r *Redis) drainOutbox(ctx context.Context, k convKeys, entry string) error {
	var e outboxEntry
	if err := json.Unmarshal([]byte(entry), &e); err != nil {
		return fmt.Errorf("decode outbox entry: %w", err)
	}
	for _, a := range e.Sessions {
		if err := r.appendSession(ctx, a, e.ID); err != nil {
			return err
		}
	}
	if len(e.Usage) > 0 {
		if err := r.countUsage(ctx, e.Day, e.Usage, e.ID); err != nil {
			return err
		}
	}
	if err := r.c.LRem(ctx, k.outbox, 1, entry).Err(); err != nil {
		return fmt.Errorf("drop outbox entry: %w", err)
	}
	// With the entry gone its applied marks have nothing left to guard.
	// Failing to drop them is harmless: they expire.
	_, _ = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, a := range e.Sessions {
			p.Del(ctx, r.keys.sessions(a.Namespace).applied(e.ID))
		}
		if len(e.Usage) > 0 {
			p.Del(ctx, r.keys.usage(e.Day).applied(e.ID))
		}
		return nil
	})
	return nil
}

// PendingPosts implements Store. It asks every shard in one pipeline.
func (r *Redis) PendingPosts(ctx context.Context) (int, error) {
	cmds := make([]*redis.StringSliceCmd, dueShards)
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range dueShards {
			cmds[i] = p.HVals(ctx, r.keys.posts(i))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("memory: pending posts: %w", err)
	}
	n := 0
	for _, c := range cmds {
		for _, v := range c.Val() {
			k, err := strconv.Atoi(v)
			if err != nil {
				return 0, fmt.Errorf("memory: pending posts: count %q: %w", v, err)
			}
			n += k
		}
	}
	return n, nil
}

// Ping implements Store.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("memory: redis ping: %w", err)
	}
	return nil
}

// Close implements Store; a client passed in RedisOptions is left open.
func (r *Redis) Close() error {
	if !r.owned {
		return nil
	}
	if err := r.c.Close(); err != nil {
		return fmt.Errorf("memory: close redis: %w", err)
	}
	return nil
}
