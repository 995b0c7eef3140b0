package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/bot"
	"github.com/conclavehq/conclave/cmd/internal/gcpace"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// envReplica carries a replicaConfig (JSON) to a replica process.
const envReplica = "CONCLAVE_BENCH_REPLICA"

// replicaConfig is what a replica process needs to wire itself.
type replicaConfig struct {
	SlackAPIURL    string
	AppToken       string
	BotToken       string
	ModelURL       string
	Store          string // "memory" or "redis"
	RedisURL       string
	KeyPrefix      string
	MaxParallel    int
	ComputeWorkers int  // agents.Options.ComputeWorkers
	HandleParallel int  // bot.Options.HandleParallel
	Traces         bool // agents.Options.Traces (trace.enabled)
	Channel        string
	Facilitator    ens.Agent
	CPUProfile     string // file to write a CPU profile to, until the process stops, and the allocations' profile to, with ".allocs" added
}

// replicaStats is what a replica reports at GET /stats.
type replicaStats struct {
	HeapBytes   uint64 // heap in use after a full collection
	AllocBytes  uint64 // heap allocated since the process started
	Goroutines  int
	RedisCmds   int64         // commands sent to Redis
	RedisTrips  int64         // round trips to Redis (a pipeline is one)
	RedisAck    int64         // of them, recording events (before their acknowledgement)
	TurnsLogged int64         // turns the engine reported
	CPU         time.Duration // user and system CPU time of the process
}

// roundTrips counts go-redis commands and round trips, and apart the
// round trips of recording events (before their acknowledgement).
type roundTrips struct{ cmds, trips, ackTrips atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.cmds.Add(1)
		r.trip(ctx)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.cmds.Add(int64(len(cmds)))
		r.trip(ctx)
		return next(ctx, cmds)
	}
}

func (r *roundTrips) trip(ctx context.Context) {
	r.trips.Add(1)
	if ctx.Value(recordingKey{}) != nil {
		r.ackTrips.Add(1)
	}
}

// recordingKey marks the context of the store calls that record an event.
type recordingKey struct{}

// recordingStore marks the store calls the engine makes to record an
// event (Handle), so that their round trips are counted apart.
type recordingStore struct{ memory.Store }

func recording(ctx context.Context) context.Context {
	return context.WithValue(ctx, recordingKey{}, true)
}

func (s recordingStore) Lookup(ctx context.Context, q memory.Lookup) (memory.Found, error) {
	return s.Store.Lookup(recording(ctx), q)
}

func (s recordingStore) RecordMessage(ctx context.Context, c memory.Conversation, m memory.Message, ev string) (bool, error) {
	return s.Store.RecordMessage(recording(ctx), c, m, ev)
}

func (s recordingStore) UpdateMessage(ctx context.Context, convID, ts, raw, text string) error {
	return s.Store.UpdateMessage(recording(ctx), convID, ts, raw, text)
}

func (s recordingStore) DeleteMessage(ctx context.Context, convID, ts string) error {
	return s.Store.DeleteMessage(recording(ctx), convID, ts)
}

// recordingRecorder is a recordingStore of a memory.Recorder.
type recordingRecorder struct {
	recordingStore
	r memory.Recorder
}

func (s recordingRecorder) RecordLooked(ctx context.Context, in memory.Intake) (memory.Intaken, error) {
	return s.r.RecordLooked(recording(ctx), in)
}

// countRecording wraps a store as recordingStore, keeping it a Recorder
// when it is one.
func countRecording(s memory.Store) memory.Store {
	if r, ok := s.(memory.Recorder); ok {
		return recordingRecorder{recordingStore{s}, r}
	}
	return recordingStore{s}
}

// runReplica is one conclave replica: the store, the built-in prompts, a
// static directory, the model client, the Slack transport and the engine,
// wired as `conclave run` wires them. It prints its stats address on
// stdout and runs until SIGTERM.
func runReplica(raw string) error {
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("replica config: %w", err)
	}
	gcpace.Set(os.Getenv) // as conclave run does
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	stopProfiles, err := startProfiles(cfg.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfiles()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	var trips roundTrips
	store, err := openStore(ctx, cfg, &trips)
	if err != nil {
		return err
	}
	defer store.Close()
	var turns atomic.Int64
	slack, eng, closeEngine, err := wireEngine(ctx, cfg, store, log, &turns)
	if err != nil {
		return err
	}
	defer closeEngine()

	statsURL, closeStats, err := serveStats(&trips, &turns)
	if err != nil {
		return err
	}
	defer closeStats()
	b := bot.New(slack, eng, nil)
	engineDone := make(chan error, 1)
	go func() { engineDone <- eng.Run(ctx) }()
	slackDone := make(chan error, 1)
	go func() { slackDone <- b.Run(ctx) }()
	fmt.Fprintf(os.Stdout, "stats %s\n", statsURL)

	// The transport returns early only when Slack refuses the tokens.
	runErr := <-slackDone
	stop()
	if err := <-engineDone; err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// wireEngine builds the prompts, the directory, the model client, the
// Slack Web API side and the engine over store, as conclave run does; the
// function returned closes what they hold.
func wireEngine(ctx context.Context, cfg replicaConfig, store memory.Store, log *slog.Logger, turns *atomic.Int64) (*bot.WebAPI, *agents.Engine, func(), error) {
	lib, err := templates.Open("", templates.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	directory, err := ens.New(ens.Options{}, []ens.Agent{cfg.Facilitator})
	if err != nil {
		return nil, nil, nil, err
	}
	// As `conclave run` does: enough idle connections for the turns in
	// flight.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = max(16, 2*cfg.MaxParallel)
	transport.MaxIdleConns = max(transport.MaxIdleConns, 4*transport.MaxIdleConnsPerHost)
	web := &http.Client{Transport: transport}
	model, err := llm.New(llm.Profile{BaseURL: cfg.ModelURL, APIKey: "sk-bench", Model: "bench-model"}, nil, llm.WithHTTPClient(web))
	if err != nil {
		_ = directory.Close()
		return nil, nil, nil, err
	}

	// The Web API side first: the engine needs it and conclave's identity;
	// then the Socket Mode side over both. The transport records each
	// event, acknowledges it, then dispatches its ticket (the turn may
	// start only then).
	slack := bot.NewWebAPI(bot.Options{AppToken: cfg.AppToken, BotToken: cfg.BotToken, APIURL: cfg.SlackAPIURL, HTTPClient: web, HandleParallel: cfg.HandleParallel}, log)
	id, err := slack.Identify(ctx)
	if err != nil {
		_ = directory.Close()
		return nil, nil, nil, err
	}
	counted := countRecording(store)
	eng := agents.New(agents.Options{
		Channels:       []agents.ChannelConfig{{ID: cfg.Channel, Agents: []string{cfg.Facilitator.EnsDomain}}},
		MaxParallel:    cfg.MaxParallel,
		ComputeWorkers: cfg.ComputeWorkers,
		BotUserID:      id.UserID,
		Traces:         cfg.Traces,
	}, agents.Deps{
		Inbound: counted, Conversations: counted, Locks: counted,
		Sessions: counted, Registry: counted, Pairings: counted,
		Chat:     slack,
		Model:    model,
		Prompts:  func() agents.Prompts { return lib.Current() },
		Resolver: directory,
		Logger:   log,
		OnTurn:   func(agents.TurnReport) { turns.Add(1) },
	})
	return slack, eng, func() { _ = directory.Close() }, nil
}

// startProfiles starts the CPU profile written to path, if any, and
// returns what stops it and writes the allocations' profile next to it.
func startProfiles(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path) // #nosec G304 -- under the directory the bench's user gave -cpuprofile
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		writeAllocProfile(path + ".allocs")
	}, nil
}

// openStore opens the replica's store; a Redis client counts its round
// trips in trips.
func openStore(ctx context.Context, cfg replicaConfig, trips *roundTrips) (memory.Store, error) {
	switch cfg.Store {
	case "memory":
		return memory.NewInProcess(memory.Options{}), nil
	case "redis":
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		// The same client conclave run builds from a URL (see
		// memory/internal/redisurl), plus the hook that counts trips.
		// The store does not own a client it is given: the client is
		// closed with it.
		opts.ContextTimeoutEnabled = true
		opts.PipelineReadBufferSize, opts.PipelineWriteBufferSize = 32<<10, 32<<10
		client := redis.NewClient(opts)
		client.AddHook(trips)
		s, err := memory.NewRedis(ctx, memory.RedisOptions{Client: client, KeyPrefix: cfg.KeyPrefix})
		if err != nil {
			_ = client.Close()
			return nil, err
		}
		return closingStore{s, client}, nil
	}
	return nil, fmt.Errorf("unknown store %q", cfg.Store)
}

// closingStore is a Redis store that closes its client with it.
type closingStore struct {
	*memory.Redis
	client *redis.Client
}

func (s closingStore) Close() error {
	err := s.Redis.Close()
	if cerr := s.client.Close(); err == nil {
		err = cerr
	}
	return err
}

// serveStats serves the replica's stats (GET /stats) on a loopback port
// and returns their URL and what stops serving them.
func serveStats(trips *roundTrips, turns *atomic.Int64) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(replicaStats{
			HeapBytes: ms.HeapAlloc, AllocBytes: ms.TotalAlloc, Goroutines: runtime.NumGoroutine(),
			RedisCmds: trips.cmds.Load(), RedisTrips: trips.trips.Load(), RedisAck: trips.ackTrips.Load(), TurnsLogged: turns.Load(), CPU: processCPU(),
		})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/stats", func() { _ = srv.Close() }, nil
}

// fetchStats reads a replica's stats.
func fetchStats(url string) (replicaStats, error) {
	var s replicaStats
	resp, err := http.Get(url) // #nosec G107 -- the bench reads the stats of replicas it started
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(body, &s)
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeAllocProfile writes the allocations' profile to path; a failure
// is reported on stderr, the run's figures being unaffected.
func writeAllocProfile(path string) {
	f, err := os.Create(path) // #nosec G304 -- under the directory the bench's user gave -cpuprofile
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "allocation profile:", err)
	}
}
