package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory/redistest"
)

// The workspace every scenario uses.
const (
	benchChannel = "C0BENCH01"
	benchPerson  = "U0BENCH01"
)

var facilitator = ens.Agent{
	Name: "Elen", EnsDomain: "elen.acme.137.protocol6022.eth", Role: ens.RoleFacilitator,
	Attributes: map[string]string{"role": "facilitator", "mission": "Runs the claims desk"},
}

// scenario is one measured configuration.
type scenario struct {
	Store          string // memory or redis
	Replicas       int
	Conversations  int           // active at once
	Messages       int           // person messages per conversation, each answered by one turn
	Latency        time.Duration // the fake model's fixed latency
	Think          time.Duration // a person waits a random time up to this before each message
	MaxParallel    int           // conversation.max_parallel of each replica
	ComputeWorkers int           // agents.Options.ComputeWorkers of each replica
	HandleParallel int           // bot.Options.HandleParallel of each replica
	Traces         bool          // trace.enabled of each replica
}

func (s scenario) String() string {
	return fmt.Sprintf("%s-r%d-c%d-l%s", s.Store, s.Replicas, s.Conversations, s.Latency)
}

// result is what one scenario measured.
type result struct {
	scenario
	Turns        int
	Elapsed      time.Duration
	Ack          []time.Duration // per person message: delivered → acknowledged, at the fake Slack
	Overhead     []time.Duration // per turn: delivered → model called, plus model answered → posted
	ToModel      []time.Duration // per turn: delivered → model called
	ToPost       []time.Duration // per turn: model answered → posted
	RedisTrips   float64         // per turn, all replicas, background work included
	RedisAck     float64         // of them, per turn, recording events (before the ack)
	RedisCmds    float64
	RedisCPU     time.Duration // per turn: CPU time of the Redis server (meaningful on a private server)
	ReplicaCPU   time.Duration // per turn: CPU time of the replicas, background work included
	RigCPU       time.Duration // per turn: CPU time of this process (fake Slack, fake model, people)
	HeapPerConv  float64       // bytes: heap growth of all replicas (after a full GC) / conversations
	AllocPerTurn float64       // bytes: heap allocated by all replicas, background work included / turns
	TraceBytes   float64       // bytes of turn traces the store keeps (compressed), per 1,000 turns (Redis only)
	Problems     []string
}

// modelCall is when the fake model received a turn's request and when it
// answered.
type modelCall struct{ in, out time.Time }

var messageID = regexp.MustCompile(`\(person\): (c\d+ m\d+)`)

// latestID is the newest person message a request shows.
func latestID(req llmfake.Request) string {
	id := ""
	for _, m := range req.Messages {
		if got := messageID.FindAllStringSubmatch(m.Content, -1); m.Role == "user" && got != nil {
			id = got[len(got)-1][1]
		}
	}
	return id
}

// options are the settings shared by every scenario.
type options struct {
	redisURL   string
	cpuProfile string // directory for the replicas' CPU profiles; empty: none
	timeout    time.Duration
}

// warmUp is how many messages warm each replica up before the measure.
const warmUp = 2

// measure runs one scenario: a fake Slack and a fake model in this
// process, the replicas as child processes, and sc.Conversations people
// writing at once, each sending the next message as soon as the last was
// answered.
func measure(ctx context.Context, sc scenario, o options) (res result, err error) {
	res = result{scenario: sc, Turns: sc.Conversations * sc.Messages}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tb := &benchTB{}
	defer func() { res.Problems = append(res.Problems, tb.close()...) }()

	r := newRig(tb, sc)
	stats, stop, err := r.startReplicas(ctx, tb, o)
	defer stop()
	if err != nil {
		return res, err
	}
	go r.readReplies(ctx)
	for range sc.Replicas {
		// Conversation number sc.Conversations warms the replicas up.
		if _, err := r.converse(ctx, sc.Conversations, warmUp, 0); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	before, err := sumStats(stats)
	if err != nil {
		return res, err
	}
	cpuBefore := redisCPU(ctx, o.redisURL, sc.Store)
	rigBefore := processCPU()

	keys := r.conversations(ctx, &res)

	after, err := sumStats(stats)
	if err != nil {
		return res, err
	}
	res.RigCPU = (processCPU() - rigBefore) / time.Duration(res.Turns)
	res.RedisCPU = (redisCPU(ctx, o.redisURL, sc.Store) - cpuBefore) / time.Duration(res.Turns)
	res.replicaFigures(before, after)
	if sc.Store == "redis" && sc.Traces {
		// Every turn of the run, warm-up included, left its trace.
		all := res.Turns + sc.Replicas*warmUp
		res.TraceBytes = float64(traceBytes(ctx, o.redisURL, r.prefix)) * 1000 / float64(all)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res.timings(r.slack, keys, r.calls, sc.Replicas*warmUp)
	return res, nil
}

// rig is a scenario's outside world: the fake Slack, the fake model and
// the people writing.
type rig struct {
	sc     scenario
	slack  *fakeslack.Server
	model  *llmfake.Server
	prefix string // the Redis key prefix of the scenario's replicas

	mu    sync.Mutex
	calls map[string]modelCall // by message id (c<conversation> m<message>)

	replies []chan string // by conversation, the posts answering it
}

func newRig(tb *benchTB, sc scenario) *rig {
	r := &rig{
		sc: sc,
		slack: fakeslack.New(tb, fakeslack.Options{
			EchoPosts: true, Route: fakeslack.RouteRoundRobin,
			Users:    []fakeslack.User{{ID: benchPerson, Name: "ada", RealName: "Ada Lovelace", DisplayName: "Ada"}},
			Channels: []fakeslack.Channel{{ID: benchChannel, Name: "claims", Purpose: "The claims desk"}},
		}),
		model:   llmfake.New(tb),
		calls:   make(map[string]modelCall, sc.Conversations*sc.Messages),
		replies: make([]chan string, sc.Conversations+1),
	}
	for i := range r.replies {
		r.replies[i] = make(chan string, max(sc.Messages, warmUp))
	}
	r.model.Handle(func(req llmfake.Request) llmfake.Reply {
		in := time.Now()
		id := latestID(req)
		if sc.Latency > 0 {
			time.Sleep(sc.Latency)
		}
		r.mu.Lock()
		r.calls[id] = modelCall{in: in, out: time.Now()}
		r.mu.Unlock()
		return llmfake.Reply{Content: "re: " + id, PromptTokens: 300, CompletionTokens: 5}
	})
	return r
}

// startReplicas starts the scenario's replicas and waits for their
// sockets; it returns their stats URLs and what stops them all.
func (r *rig) startReplicas(ctx context.Context, tb *benchTB, o options) ([]string, func(), error) {
	prefix := ""
	if r.sc.Store == "redis" {
		// A fresh key prefix whose keys are deleted when the scenario
		// ends, after its replicas have stopped.
		prefix = redistest.WithPrefix(tb, o.redisURL).Prefix
		r.prefix = prefix
	}
	var stats []string
	var stops []func()
	stopAll := func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}
	for i := range r.sc.Replicas {
		cfg := replicaConfig{
			SlackAPIURL: r.slack.APIURL(), AppToken: fakeslack.AppToken, BotToken: fakeslack.BotToken,
			ModelURL: r.model.URL(), Store: r.sc.Store, RedisURL: o.redisURL, KeyPrefix: prefix,
			MaxParallel: r.sc.MaxParallel, ComputeWorkers: r.sc.ComputeWorkers, HandleParallel: r.sc.HandleParallel,
			Traces: r.sc.Traces, Channel: benchChannel, Facilitator: facilitator,
		}
		if o.cpuProfile != "" {
			cfg.CPUProfile = fmt.Sprintf("%s/%s-replica%d.pprof", o.cpuProfile, r.sc, i)
		}
		url, stop, err := startReplica(cfg)
		if err != nil {
			return nil, stopAll, err
		}
		stops = append(stops, stop)
		stats = append(stats, url)
	}
	if err := r.slack.WaitOpen(ctx, r.sc.Replicas); err != nil {
		return nil, stopAll, fmt.Errorf("replicas did not connect: %w", err)
	}
	return stats, stopAll, nil
}

// readReplies hands each post to the conversation it answers, until ctx
// ends.
func (r *rig) readReplies(ctx context.Context) {
	seen := 0
	for {
		posts, err := r.slack.WaitPostsAfter(ctx, seen)
		if err != nil {
			return
		}
		for _, p := range posts {
			var c, m int
			if _, err := fmt.Sscanf(p.Text, "re: c%d m%d", &c, &m); err == nil && c < len(r.replies) {
				select {
				case r.replies[c] <- p.Text:
				default:
				}
			}
		}
		seen += len(posts)
	}
}

// converse sends conversation i's messages, each after the reply to the
// one before, and returns their delivery keys.
func (r *rig) converse(ctx context.Context, i, messages int, think time.Duration) ([]string, error) {
	var keys []string
	thread := ""
	for j := range messages {
		if think > 0 {
			select {
			case <-time.After(rand.N(think)): // #nosec G404 -- think-time jitter of a load generator, not a secret
			case <-ctx.Done():
				return keys, ctx.Err()
			}
		}
		text := fmt.Sprintf("c%d m%d", i, j)
		d := r.slack.SendMessage(fakeslack.Message{Channel: benchChannel, User: benchPerson, Text: text, ThreadTS: thread})
		keys = append(keys, d.Key())
		if thread == "" {
			thread = d.TS
		}
		select {
		case got := <-r.replies[i]:
			if got != "re: "+text {
				return keys, fmt.Errorf("%s answered with %q", text, got)
			}
		case <-ctx.Done():
			return keys, fmt.Errorf("%s: no reply: %w", text, ctx.Err())
		}
	}
	return keys, nil
}

// conversations runs the scenario's conversations at once and returns
// their messages' delivery keys; res gets the elapsed time and the
// problems met.
func (r *rig) conversations(ctx context.Context, res *result) [][]string {
	keys := make([][]string, r.sc.Conversations)
	errs := make(chan error, r.sc.Conversations)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range r.sc.Conversations {
		wg.Go(func() {
			var err error
			if keys[i], err = r.converse(ctx, i, r.sc.Messages, r.sc.Think); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	close(errs)
	for err := range errs {
		res.Problems = append(res.Problems, err.Error())
		if len(res.Problems) > 5 {
			break
		}
	}
	return keys
}

// replicaFigures sets the per-turn figures the replicas' stats give,
// from their values before and after the measure.
func (res *result) replicaFigures(before, after replicaStats) {
	turns := float64(res.Turns)
	res.ReplicaCPU = (after.CPU - before.CPU) / time.Duration(res.Turns)
	res.RedisTrips = float64(after.RedisTrips-before.RedisTrips) / turns
	res.RedisAck = float64(after.RedisAck-before.RedisAck) / turns
	res.RedisCmds = float64(after.RedisCmds-before.RedisCmds) / turns
	res.HeapPerConv = (float64(after.HeapBytes) - float64(before.HeapBytes)) / float64(res.Conversations)
	res.AllocPerTurn = float64(after.AllocBytes-before.AllocBytes) / turns
}

// startReplica runs a replica process and returns its stats URL and a
// function that stops it (SIGTERM) and waits for it.
func startReplica(cfg replicaConfig) (string, func(), error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(os.Args[0]) // #nosec G204 G702 -- the bench re-runs its own binary as a replica
	cmd.Env = append(os.Environ(), envReplica+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "stats ")
	if err != nil || !ok {
		stop()
		return "", nil, fmt.Errorf("replica did not start (%q): %v", line, err)
	}
	return url, stop, nil
}

// sumStats adds up the replicas' stats.
func sumStats(urls []string) (replicaStats, error) {
	var total replicaStats
	for _, u := range urls {
		s, err := fetchStats(u)
		if err != nil {
			return total, err
		}
		total.HeapBytes += s.HeapBytes
		total.AllocBytes += s.AllocBytes
		total.Goroutines += s.Goroutines
		total.RedisCmds += s.RedisCmds
		total.RedisTrips += s.RedisTrips
		total.RedisAck += s.RedisAck
		total.TurnsLogged += s.TurnsLogged
		total.CPU += s.CPU
	}
	return total, nil
}

// percentile returns the p-th percentile (0 < p ≤ 1) of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }

// redisCPU reads the Redis server's CPU time (user and system), zero for
// the in-process store or when it cannot be read.
func redisCPU(ctx context.Context, url, store string) time.Duration {
	if store != "redis" {
		return 0
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return 0
	}
	c := redis.NewClient(opts)
	defer c.Close()
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// traceBytes sums the stored size of the turn traces under prefix (the
// store keeps each conversation's total beside its traces).
func traceBytes(ctx context.Context, url, prefix string) int64 {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return 0
	}
	c := redis.NewClient(opts)
	defer c.Close()
	var total int64
	iter := c.Scan(ctx, 0, prefix+"*tracebytes:*", 1000).Iterator()
	for iter.Next(ctx) {
		n, _ := c.Get(ctx, iter.Val()).Int64()
		total += n
	}
	return total
}

// startRedis runs a private redis-server on a free port, with appendonly
// as production runs it, and returns its URL and a function that stops it.
func startRedis() (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("-redis start: %w (give a Redis URL instead)", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir, err := os.MkdirTemp("", "conclave-bench-redis")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, // #nosec G204 -- bin is the redis-server found on PATH or named by the operator
		"--save", "", "--appendonly", "yes", "--daemonize", "no", "--logfile", dir+"/redis.log")
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	opts, _ := redis.ParseURL(url)
	c := redis.NewClient(opts)
	defer c.Close()
	for range 100 {
		if c.Ping(context.Background()).Err() == nil {
			return url, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("redis-server on port %d did not answer", port)
}

// timings reads the fake Slack's record: when each person message was
// delivered and acknowledged, and when its reply was posted, against when
// the model was called for it. warmUpPosts are the posts before the
// measurement.
func (res *result) timings(slack *fakeslack.Server, keys [][]string, calls map[string]modelCall, warmUpPosts int) {
	delivered := map[string]time.Time{}
	for _, d := range slack.Deliveries() {
		if _, ok := delivered[d.Key]; !ok {
			delivered[d.Key] = d.At
		}
	}
	acked := map[string]time.Time{}
	for _, a := range slack.Acks() {
		if _, ok := acked[a.Key]; !ok {
			acked[a.Key] = a.At
		}
	}
	posted := map[string]time.Time{}
	posts := slack.Posts()
	for _, p := range posts {
		posted[strings.TrimPrefix(p.Text, "re: ")] = p.At
	}
	if want := res.Turns + warmUpPosts; len(posts) != want {
		res.Problems = append(res.Problems, fmt.Sprintf("%d posts for %d turns", len(posts), want))
	}
	for i := range keys {
		for j, key := range keys[i] {
			id := fmt.Sprintf("c%d m%d", i, j)
			sent, ok := delivered[key]
			if !ok {
				continue
			}
			if at, ok := acked[key]; ok {
				res.Ack = append(res.Ack, at.Sub(sent))
			}
			call, ok1 := calls[id]
			at, ok2 := posted[id]
			if ok1 && ok2 {
				res.ToModel = append(res.ToModel, call.in.Sub(sent))
				res.ToPost = append(res.ToPost, at.Sub(call.out))
				res.Overhead = append(res.Overhead, call.in.Sub(sent)+at.Sub(call.out))
			}
		}
	}
	slices.Sort(res.Ack)
	slices.Sort(res.Overhead)
	slices.Sort(res.ToModel)
	slices.Sort(res.ToPost)
}
