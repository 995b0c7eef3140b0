// Package redistest gives tests a real Redis.
//
// New finds one in this order: the server at REDIS_URL (a test fails when
// it does not answer), the server at 127.0.0.1:6379 when it answers, else a
// redis-server started on a free port for the test. With no Redis at all
// the test is skipped, or fails when CONCLAVE_REQUIRE_REDIS is set (as in
// CI). Each test gets a key prefix of its own, and its keys are deleted
// when it ends: the server is shared with other tests running at the same
// time, so never flush it.
//
// Start runs a dedicated redis-server that a test may stop and restart
// (with appendonly, so data survives a restart). NewProxy puts a loopback
// proxy in front of a server, which a test takes down and brings back to
// stop Redis for its own clients only. Cluster starts a
// three-node Redis Cluster, only when CONCLAVE_REDIS_CLUSTER is set, and
// Sentinel a primary behind a Sentinel, only when CONCLAVE_REDIS_SENTINEL
// is set.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/internal/redisurl"
)

// Environment variables the helpers read.
const (
	EnvURL      = "REDIS_URL"
	EnvRequire  = "CONCLAVE_REQUIRE_REDIS"
	EnvCluster  = "CONCLAVE_REDIS_CLUSTER"
	EnvSentinel = "CONCLAVE_REDIS_SENTINEL"
)

const localURL = "redis://127.0.0.1:6379"

// DB is a Redis reserved for one test.
type DB struct {
	// URL reaches the server (a form memory.NewRedis accepts).
	URL string
	// Prefix is unique to the test; pass it as the store's key prefix.
	Prefix string
}

// New returns a Redis for t with a fresh key prefix, deleted with its keys
// when t ends.
func New(t testing.TB) DB {
	t.Helper()
	return WithPrefix(t, Find(t))
}

// WithPrefix reserves a fresh key prefix on the server at url, deleting its
// keys when t ends.
func WithPrefix(t testing.TB, url string) DB {
	t.Helper()
	db := DB{URL: url, Prefix: "test-" + randomHex(8) + ":"}
	t.Cleanup(func() {
		if err := deletePrefix(url, db.Prefix); err != nil {
			t.Errorf("redistest: delete keys %s*: %v", db.Prefix, err)
		}
	})
	return db
}

// Store opens a Redis store on db with o's bounds and clock, closed when t
// ends.
func (db DB) Store(t testing.TB, o memory.Options) *memory.Redis {
	t.Helper()
	return db.open(t, nil, o)
}

// open opens a store on db through c (dialling db.URL when nil), closed
// when t ends.
func (db DB) open(t testing.TB, c redis.UniversalClient, o memory.Options) *memory.Redis {
	t.Helper()
	s, err := memory.NewRedis(t.Context(), memory.RedisOptions{
		URL: db.URL, Client: c, KeyPrefix: db.Prefix,
		MaxSessionMessages: o.MaxSessionMessages, ConversationTTL: o.ConversationTTL,
		TraceRetention: o.TraceRetention, TraceMaxBytes: o.TraceMaxBytes,
		TraceTotalMaxBytes: o.TraceTotalMaxBytes, Now: o.Now,
	})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Client returns a client for db.URL, closed when t ends.
func (db DB) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	c, err := redisurl.NewClient(db.URL)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// CountedStore opens a store on db, as Store does, whose round trips to
// Redis are counted.
func (db DB) CountedStore(t testing.TB, o memory.Options) (*memory.Redis, *RoundTrips) {
	t.Helper()
	c := db.Client(t)
	trips := &RoundTrips{}
	c.AddHook(trips)
	return db.open(t, c, o), trips
}

// RoundTrips is a go-redis hook counting the round trips a client makes:
// one per command, one per pipeline.
type RoundTrips struct{ n atomic.Int64 }

// Count returns the round trips made so far.
func (c *RoundTrips) Count() int64 { return c.n.Load() }

// DialHook implements redis.Hook.
func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

var (
	findOnce  sync.Once
	sharedURL string // REDIS_URL or the local server, when it answers
	findErr   error
)

// Find returns the URL of a usable Redis (see the package comment),
// skipping or failing t when there is none.
func Find(t testing.TB) string {
	t.Helper()
	findOnce.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			if err := ping(u); err != nil {
				findErr = fmt.Errorf("%s is set but Redis does not answer: %w", EnvURL, err)
				return
			}
			sharedURL = u
			return
		}
		if ping(localURL) == nil {
			sharedURL = localURL
		}
	})
	if findErr != nil {
		t.Fatalf("redistest: %v", findErr)
	}
	if sharedURL != "" {
		return sharedURL
	}
	return Start(t).URL()
}

// unavailable skips t, or fails it when Redis is required.
func unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(EnvRequire) != "" {
		t.Fatalf("redistest: %s, and %s is set", reason, EnvRequire)
	}
	t.Skipf("redistest: %s (set %s or install redis-server; %s=1 makes this a failure)", reason, EnvURL, EnvRequire)
}

func ping(url string) error {
	c, err := redisurl.NewClient(url)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// deletePrefix deletes every key starting with prefix, on every primary.
func deletePrefix(url, prefix string) error {
	c, err := redisurl.NewClient(url)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		// One key per command: on Cluster, keys of one command must
		// share a slot.
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Unlink(ctx, k)
			}
			return nil
		})
		return err
	}
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *redis.Client:
		return del(ctx, c)
	}
	return fmt.Errorf("unexpected client %T", c)
}

// Server is a redis-server process owned by one test.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	argv []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start runs a dedicated redis-server on a free port in a temporary
// directory, with appendonly yes, stopped when t ends. extra are more
// redis-server arguments ("--maxmemory", "10mb", …).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, func(s *Server) []string {
		return append([]string{
			"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
			"--save", "", "--appendonly", "yes", "--daemonize", "no", "--protected-mode", "no",
			"--logfile", filepath.Join(s.dir, "redis.log"),
		}, extra...)
	})
}

func start(t testing.TB, argv func(*Server) []string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "no Redis answers and redis-server is not installed")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t)}
	s.argv = argv(s)
	t.Cleanup(func() { s.Stop() })
	s.Restart()
	return s
}

// URL returns the server's URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Stop stops the server (SIGTERM, which makes Redis sync its append-only
// file) and waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Restart starts the server again (or for the first time) on the same port
// and data directory, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, s.argv...) // #nosec G204 -- tests start the redis-server found on PATH
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start redis-server: %v", err)
	}
	s.cmd = cmd
	if err := waitAnswer(s.URL()); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		s.t.Fatalf("redistest: redis-server on port %d: %v\n%s", s.port, err, log)
	}
}

func waitAnswer(url string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(url)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Sentinel starts a primary watched by one Sentinel (master name
// "mymaster") for t and returns its URL (redis+sentinel://…). It is opt-in:
// without CONCLAVE_REDIS_SENTINEL set, t is skipped.
func Sentinel(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvSentinel) == "" {
		t.Skipf("redistest: Redis Sentinel tests are opt-in; set %s=1 (needs redis-server)", EnvSentinel)
	}
	primary := Start(t)
	sentinel := start(t, func(s *Server) []string {
		conf := filepath.Join(s.dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 %d 1\n", s.port, primary.port)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		return []string{conf, "--sentinel", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log")}
	})
	return "redis+sentinel://" + sentinel.Addr() + "?master_name=mymaster"
}

// Cluster starts a Redis Cluster of three primaries (no replicas) for t and
// returns its URL (redis+cluster://…). It is opt-in: without
// CONCLAVE_REDIS_CLUSTER set, t is skipped.
func Cluster(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvCluster) == "" {
		t.Skipf("redistest: Redis Cluster tests are opt-in; set %s=1 (needs redis-server)", EnvCluster)
	}
	nodes := make([]*Server, 3)
	for i := range nodes {
		nodes[i] = Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
	}
	ctx := t.Context()
	const slots = 16384
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		from, to := i*slots/len(nodes), (i+1)*slots/len(nodes)-1
		err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", from, to).Err()
		if err == nil && i > 0 {
			err = c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[0].port)).Err()
		}
		_ = c.Close()
		if err != nil {
			t.Fatalf("redistest: cluster node %s: %v", n.Addr(), err)
		}
	}
	for _, n := range nodes {
		if err := waitClusterOK(ctx, n.Addr()); err != nil {
			t.Fatalf("redistest: cluster node %s: %v", n.Addr(), err)
		}
	}
	addrs := make([]string, 0, len(nodes)-1)
	for _, n := range nodes[1:] {
		addrs = append(addrs, "addr="+n.Addr())
	}
	return "redis+cluster://" + nodes[0].Addr() + "?" + strings.Join(addrs, "&")
}

func waitClusterOK(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("cluster_state is not ok")
			}
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
