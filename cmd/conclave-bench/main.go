// Command conclave-bench measures conclave's own cost: the Slack transport,
// the conversation engine and the store, wired as `conclave run` wires
// them, against the project's fake Slack (Socket Mode and Web API) and a
// fake model endpoint that answers after a fixed latency.
//
// Each replica is a child process (this binary, re-executed), so its heap
// is its own; the fakes and the people writing run in the parent. For
// every combination of store, replica count, concurrent conversations and
// model latency it prints: the ack latency of the envelopes (delivered →
// acknowledged), conclave's overhead per turn (message delivered → model
// called, plus model answered → reply posted), turns per second, Redis
// round trips per turn, and heap per active conversation.
//
//	go run ./cmd/conclave-bench                       # the full matrix
//	go run ./cmd/conclave-bench -stores redis -replicas 1,3 -conversations 100 -latencies 0s
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	if raw := os.Getenv(envReplica); raw != "" {
		if err := runReplica(raw); err != nil {
			fmt.Fprintln(os.Stderr, "conclave-bench replica:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conclave-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		stores        = flag.String("stores", "memory,redis", "stores to measure: memory, redis")
		replicas      = flag.String("replicas", "1,3", "replica counts (the in-process store runs one only)")
		conversations = flag.String("conversations", "1,100,1000", "conversations active at once")
		latencies     = flag.String("latencies", "0s,500ms", "fixed latencies of the fake model")
		think         = flag.Duration("think", 0, "each person waits a random time up to this before each message (0: writes at once)")
		messages      = flag.Int("messages", 4, "person messages per conversation, each answered by one turn")
		maxParallel   = flag.Int("max-parallel", 0, "conversation.max_parallel of each replica; 0: as many as the conversations")
		compute       = flag.Int("compute-workers", 0, "workers computing at once in each replica; 0: two per core, negative: no bound")
		handle        = flag.Int("handle-parallel", 16, "threads whose events each replica records at once (bot.Options.HandleParallel; conclave run's is 16)")
		redisURL      = flag.String("redis", "start", `Redis for the redis store: "start" runs a private redis-server (appendonly yes), else a URL (keys under a fresh prefix, deleted after)`)
		cpuProfile    = flag.String("cpuprofile", "", "directory to write each replica's CPU and allocation profiles to")
		timeout       = flag.Duration("timeout", 5*time.Minute, "bound of one scenario")
		traces        = flag.Bool("traces", true, "each turn writes its trace, as trace.enabled does (conclave run's default)")
	)
	flag.Parse()
	plan, err := scenarios(*stores, *replicas, *conversations, *latencies, scenario{
		Messages: *messages, Think: *think, MaxParallel: *maxParallel, ComputeWorkers: *compute, HandleParallel: *handle,
		Traces: *traces,
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	withRedis := strings.Contains(*stores, "redis")
	if withRedis && *redisURL == "start" {
		url, stopRedis, err := startRedis()
		if err != nil {
			return err
		}
		defer stopRedis()
		*redisURL = url
	}
	printMachine(ctx, *redisURL, withRedis)
	fmt.Println("| store | replicas | conversations | model latency | turns | turns/s | ack p50 ms | ack p99 ms | overhead p50 ms | overhead p99 ms | → model p99 ms | → post p99 ms | conclave CPU µs/turn | conclave alloc KB/turn | Redis trips/turn (ack + rest) | Redis cmds/turn | Redis CPU µs/turn | rig CPU µs/turn | heap/conversation KB | trace KB/1,000 turns |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	failed := false
	for _, sc := range plan {
		res, err := measure(ctx, sc, options{redisURL: *redisURL, cpuProfile: *cpuProfile, timeout: *timeout})
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
		printResult(res)
		for _, p := range res.Problems {
			failed = true
			fmt.Fprintf(os.Stderr, "%s: %s\n", sc, p)
		}
	}
	if failed {
		return fmt.Errorf("some scenarios lost or doubled replies (see above)")
	}
	return nil
}

// scenarios lists the scenarios the flags ask for (comma-separated
// lists), each with base's other settings; max_parallel 0 means as many
// as the conversations.
func scenarios(stores, replicas, conversations, latencies string, base scenario) ([]scenario, error) {
	counts := func(name, s string) ([]int, error) {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("-%s: %q is not a positive number", name, f)
			}
			out = append(out, n)
		}
		return out, nil
	}
	reps, err := counts("replicas", replicas)
	if err != nil {
		return nil, err
	}
	convs, err := counts("conversations", conversations)
	if err != nil {
		return nil, err
	}
	var lats []time.Duration
	for _, f := range strings.Split(latencies, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("-latencies: %w", err)
		}
		lats = append(lats, d)
	}
	var plan []scenario
	for _, store := range strings.Split(stores, ",") {
		store = strings.TrimSpace(store)
		for _, r := range reps {
			if store == "memory" && r > 1 {
				continue // the in-process store is one replica's own
			}
			for _, lat := range lats {
				for _, c := range convs {
					sc := base
					sc.Store, sc.Replicas, sc.Conversations, sc.Latency = store, r, c, lat
					if sc.MaxParallel == 0 {
						sc.MaxParallel = c
					}
					plan = append(plan, sc)
				}
			}
		}
	}
	return plan, nil
}

func printResult(r result) {
	trips, cmds, redisCPU, traceKB := "–", "–", "–", "–"
	if r.TraceBytes > 0 {
		traceKB = strconv.FormatFloat(r.TraceBytes/1024, 'f', 0, 64)
	}
	if r.Store == "redis" {
		trips = fmt.Sprintf("%.1f (%.1f + %.1f)", r.RedisTrips, r.RedisAck, r.RedisTrips-r.RedisAck)
		cmds = strconv.FormatFloat(r.RedisCmds, 'f', 1, 64)
		redisCPU = strconv.FormatFloat(r.RedisCPU.Seconds()*1e6, 'f', 0, 64)
	}
	cells := []string{
		r.Store, strconv.Itoa(r.Replicas), strconv.Itoa(r.Conversations), r.Latency.String(), strconv.Itoa(r.Turns),
		strconv.FormatFloat(float64(r.Turns)/r.Elapsed.Seconds(), 'f', 0, 64),
		ms(percentile(r.Ack, 0.5)), ms(percentile(r.Ack, 0.99)),
		ms(percentile(r.Overhead, 0.5)), ms(percentile(r.Overhead, 0.99)),
		ms(percentile(r.ToModel, 0.99)), ms(percentile(r.ToPost, 0.99)),
		strconv.FormatFloat(r.ReplicaCPU.Seconds()*1e6, 'f', 0, 64),
		strconv.FormatFloat(r.AllocPerTurn/1024, 'f', 1, 64),
		trips, cmds, redisCPU,
		strconv.FormatFloat(r.RigCPU.Seconds()*1e6, 'f', 0, 64),
		strconv.FormatFloat(r.HeapPerConv/1024, 'f', 1, 64),
		traceKB,
	}
	fmt.Println("| " + strings.Join(cells, " | ") + " |")
}

// printMachine says what the figures were measured on.
func printMachine(ctx context.Context, redisURL string, withRedis bool) {
	mem := "?"
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				mem = strings.TrimSpace(v)
			}
		}
		_ = f.Close()
	}
	redisVersion := "not used"
	if withRedis {
		redisVersion = "unreachable"
		if opts, err := redis.ParseURL(redisURL); err == nil {
			c := redis.NewClient(opts)
			if info, err := c.Info(ctx, "server").Result(); err == nil {
				for _, line := range strings.Split(info, "\n") {
					if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
						redisVersion = v
					}
				}
			}
			_ = c.Close()
		}
	}
	fmt.Printf("machine: %d CPUs (GOMAXPROCS %d), memory %s, %s %s/%s, Redis %s\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, redisVersion)
}
