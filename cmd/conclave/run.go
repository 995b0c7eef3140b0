package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/pairing"
	"github.com/conclavehq/conclave/agents/tools"
	"github.com/conclavehq/conclave/cmd/internal/gcpace"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/templates"
)

// Log attribute keys of this package.
const (
	logComponent = "component"
	logErr       = "err"
)

// runBot is `conclave run`: it wires the store, prompts, identities, model
// client, Slack transport and engine, and runs them until ctx ends
// (SIGTERM), then drains in-flight turns within shutdown_grace.
func runBot(ctx context.Context, args []string, e env) error {
	cfg, log, err := loadRun(args, e)
	if err != nil {
		return err
	}
	pace, fromEnv := gcpace.Set(e.getenv)
	log.Debug("garbage collector pace", slog.Int("percent", pace), slog.Bool("from_GOGC", fromEnv))
	p := newInstance(cfg, log, e)
	defer p.close()
	if err := p.open(ctx); err != nil {
		return err
	}
	return p.run(ctx)
}

// loadRun reads the flags and the configuration of `conclave run` and sets
// up the log, warning of what the configuration leaves to fix.
func loadRun(args []string, e env) (Config, *slog.Logger, error) {
	fs := newFlags("run", e)
	load := configFlag(fs, e)
	if err := parseFlags(fs, args, e); err != nil {
		return Config{}, nil, err
	}
	cfg, secretsInFile, err := load()
	if err != nil {
		return Config{}, nil, err
	}
	log := newLogger(cfg.Log, maskingWriter(e.stderr, cfg))
	routeLibraryLogs(log)
	log.Info("starting conclave", slog.String("version", versionString()))
	for _, key := range secretsInFile {
		log.Warn("a secret is written in the configuration file; prefer its environment variable", slog.String("key", key))
	}
	warnMissingModelKeys(cfg, log)
	return cfg, log, nil
}

// instance is what `conclave run` builds: the parts, opened in order by
// open and closed in reverse by close, with what the startup summary and
// the readiness endpoint report of them.
type instance struct {
	cfg     Config
	log     *slog.Logger
	e       env
	reg     *prometheus.Registry
	metrics *runMetrics
	summary startupSummary
	checks  []readinessCheck
	closers []func()

	// upMu guards the summary's fields filled in as the HTTP listeners
	// bind and Slack is reached, and upWaiting, how many of those two are
	// still to come: the summary is logged when both are done (up).
	upMu      sync.Mutex
	upWaiting int

	store     memory.Store
	lib       *templates.Library
	directory *ens.Directory
	web       *http.Client
	model     agents.Model
	tracer    trace.Tracer // nil: no OpenTelemetry export
	toolbox   agents.Toolbox
	hub       *tools.Hub
}

func newInstance(cfg Config, log *slog.Logger, e env) *instance {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &instance{
		cfg: cfg, log: log, e: e, reg: reg, metrics: newRunMetrics(reg),
		summary: startupSummary{store: storeKind(cfg.Memory), agents: len(cfg.Agents), channels: len(cfg.Channels), slackTeam: "not configured",
			agentAdmins: pairing.Admins(cfg.Slack.Admins).Who()},
		upWaiting: 2,
	}
}

// up notes that the HTTP listeners are bound or that Slack is reached (or
// not configured); after both it logs the startup summary and tells
// e.ready.
func (p *instance) up() {
	p.upMu.Lock()
	p.upWaiting--
	done, summary := p.upWaiting == 0, p.summary
	p.upMu.Unlock()
	if !done {
		return
	}
	summary.log(p.log)
	if p.e.ready != nil {
		p.e.ready(summary.addr)
	}
}

// close closes what open opened, last first.
func (p *instance) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

// open opens the parts the engine runs on: the store, the prompts, the
// identities, the model client and the tools.
func (p *instance) open(ctx context.Context) error {
	for _, step := range []func(context.Context) error{p.openTracing, p.openMemory, p.openPrompts, p.openIdentities, p.openModel, p.openTools} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	p.checks = append(p.checks, readinessCheck{"templates", "not loaded", func(context.Context) error {
		if p.lib.Current() == nil {
			return errors.New("not loaded")
		}
		return p.lib.Err()
	}})
	if p.cfg.Memory.RedisURL != "" {
		p.checks = append(p.checks, readinessCheck{"redis", "unreachable", p.store.Ping})
	}
	return nil
}

func (p *instance) openTracing(ctx context.Context) error {
	tracer, stop, err := openTracing(ctx, p.cfg.OTel, p.e.getenv, p.log)
	if err != nil {
		return err
	}
	p.tracer = tracer
	p.closers = append(p.closers, stop)
	return nil
}

func (p *instance) openMemory(ctx context.Context) error {
	raw, err := openStore(ctx, p.cfg.Memory, p.cfg.Trace, p.log)
	if err != nil {
		return err
	}
	p.closers = append(p.closers, func() { _ = raw.Close() })
	p.store = p.metrics.observeStore(raw)
	p.metrics.watchPosts(raw, p.log)
	return nil
}

func (p *instance) openPrompts(ctx context.Context) error {
	lib, dir, err := openConfiguredTemplates(p.cfg.Templates, templates.Options{Logger: p.log.With(slog.String(logComponent, "templates"))},
		func(level slog.Level, msg string) { p.log.Log(ctx, level, msg) }) // #nosec G706 -- conclave's own message about its templates directory
	if err != nil {
		return err
	}
	p.lib = lib
	p.summary.templates, p.summary.templateProblem = "built-in", len(lib.Current().Problems())
	if dir != "" {
		p.summary.templates, p.summary.templateFiles = dir, countTemplates(dir)
	}
	p.metrics.watchTemplates(lib)
	return nil
}

func (p *instance) openIdentities(ctx context.Context) error {
	opts := ensOptions(p.cfg.ENS, p.log)
	opts.Now = p.e.now
	directory, err := ens.New(opts, staticAgents(p.cfg.Agents))
	if err != nil {
		return err
	}
	p.directory = directory
	p.closers = append(p.closers, func() { _ = directory.Close() })
	p.metrics.watchENS(directory.CacheStats)
	warnSharedMemory(ctx, p.cfg, directory, p.log)
	return checkChannelAgents(ctx, p.cfg, directory, p.log)
}

func (p *instance) openModel(context.Context) error {
	p.web = webClient(p.cfg.Conversation.MaxParallel)
	def, named := llmProfiles(p.cfg.LLM)
	client, err := llm.New(def, named, llm.WithLogger(p.log.With(slog.String(logComponent, "llm"))),
		llm.WithHTTPClient(p.metrics.llmHTTP(p.web)))
	if err != nil {
		return err
	}
	p.model = p.metrics.observeModel(client)
	return nil
}

func (p *instance) openTools(context.Context) error {
	servers, err := mcpServers(p.cfg.MCP, p.e.getenv)
	if err != nil || len(servers) == 0 {
		return err
	}
	// The connection pool is shared, not the client: a Streamable HTTP
	// session keeps a long-lived stream that a client timeout would cut.
	hub, err := tools.New(servers, tools.Options{Logger: p.log, OnCall: p.metrics.observeToolCall,
		HTTPClient: &http.Client{Transport: p.web.Transport}, MaxResultBytes: p.cfg.Tools.MaxResultBytes})
	if err != nil {
		return err
	}
	p.hub, p.toolbox = hub, hub
	return nil
}

// run runs every part until ctx ends or one fails, then shuts down in
// order: Slack drains, the engine finishes its turns, Slack stops, then
// the HTTP servers.
func (p *instance) run(ctx context.Context) error {
	// Everything that runs until shutdown; each part's error ends the run.
	parts, partsCtx := errgroup.WithContext(ctx)
	runCtx, cancelRun := context.WithCancel(partsCtx)
	defer cancelRun()
	parts.Go(part(runCtx, p.log, "templates", p.lib.Run))
	parts.Go(part(runCtx, p.log, "reload", func(ctx context.Context) error {
		return reloadOnHUP(ctx, p.e.hup, p.lib, p.log)
	}))
	// The engine gets its own context: when the process is told to stop,
	// the Slack transport stops reading events at once (runCtx) while the
	// engine drains in-flight turns within shutdown_grace.
	engineCtx, stopEngine := context.WithCancel(ctx)
	defer stopEngine()
	// The Slack transport outlives runCtx: it keeps the socket until the
	// engine is done, draining meanwhile (see bot.Drain).
	slackCtx, stopSlack := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSlack()
	side := &slackSide{runCtx: runCtx, engineCtx: engineCtx, slackCtx: slackCtx, cancelRun: cancelRun, engineDone: make(chan struct{})}
	// The listeners serve before Slack is reached: while Slack cannot be,
	// /healthz answers, /readyz says why, and /metrics is scraped.
	wallet, connect := p.prepareSlack(side)
	httpCtx, stopHTTP := context.WithCancel(context.Background())
	defer stopHTTP()
	httpDone := make(chan error, 1)
	listeners := p.listeners(wallet)
	go func() { httpDone <- serveHTTP(httpCtx, listeners) }()
	if p.hub != nil {
		// The servers outlive the engine's drain: turns finishing after
		// SIGTERM may still call tools.
		defer startHub(ctx, p.hub)()
	}
	if connect {
		parts.Go(func() error { return p.startSlack(side) })
	}

	var httpErr error
	select {
	case <-runCtx.Done():
	case httpErr = <-httpDone:
		cancelRun()
	}
	p.log.Info("shutting down")
	side.stop()
	stopEngine()
	<-side.engineDone
	stopSlack()
	partErr := parts.Wait()
	stopHTTP()
	if httpErr == nil {
		httpErr = <-httpDone
	}
	return p.stopped(httpErr, partErr)
}

// stopped is run's result once everything has stopped.
func (p *instance) stopped(httpErr, partErr error) error {
	if httpErr != nil {
		return httpErr
	}
	if partErr != nil {
		return partErr
	}
	p.log.Info("stopped")
	return nil
}

// listeners are the HTTP listeners of the process; the startup summary
// goes out once every one is bound (ops first).
func (p *instance) listeners(walletPage http.Handler) []listener {
	serving := p.e
	serving.opsReady = func(addr string) {
		p.upMu.Lock()
		p.summary.opsAddr = addr
		p.upMu.Unlock()
		if p.e.opsReady != nil {
			p.e.opsReady(addr)
		}
	}
	serving.ready = func(addr string) {
		p.upMu.Lock()
		p.summary.addr = addr
		ops := p.summary.opsAddr
		p.upMu.Unlock()
		p.log.Info("serving HTTP", slog.String("listen", addr), slog.String("ops_listen", ops))
		p.up()
	}
	metrics := promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{Registry: p.reg})
	return httpListeners(p.cfg.HTTP, newOpsMux(p.checks, p.log), metrics, walletPage, serving, p.log)
}

// httpListeners lays out what conclave serves: one listener (http.addr)
// for everything, or, with http.ops_addr, the operations endpoints there
// and only the wallet page on http.addr. pprof joins the operations
// endpoints when asked for.
func httpListeners(c HTTPConfig, ops *http.ServeMux, metrics http.Handler, wallet http.Handler, e env, log *slog.Logger) []listener {
	ops.Handle("GET /metrics", metrics)
	opsLimits := defaultLimits
	if c.PProf {
		mountPprof(ops)
		opsLimits.WriteTimeout = pprofWriteTimeout
	}
	public := ops
	if c.OpsAddr != "" {
		public = http.NewServeMux()
	}
	if wallet != nil {
		public.Handle("/wallet/", wallet)
	}
	if c.OpsAddr == "" {
		if c.PProf {
			log.Warn("http: pprof is served on the public listener; set http.ops_addr to keep it private", slog.String("addr", c.Addr))
		}
		return []listener{{name: "http", addr: c.Addr, handler: ops, limits: opsLimits, ready: e.ready}}
	}
	return []listener{
		{name: "ops", addr: c.OpsAddr, handler: ops, limits: opsLimits, ready: e.opsReady},
		{name: "http", addr: c.Addr, handler: public, limits: defaultLimits, ready: e.ready},
	}
}

// onStore is deps with store as each of the engine's ports on the store.
func onStore(store memory.Store, deps agents.Deps) agents.Deps {
	deps.Inbound, deps.Conversations, deps.Locks = store, store, store
	deps.Sessions, deps.Registry, deps.Pairings = store, store, store
	return deps
}

// engineOptions maps the configuration onto the engine's options.
func engineOptions(cfg Config, botUserID string) agents.Options {
	o := agents.Options{
		Timeout:          cfg.Conversation.Timeout.Duration,
		CallTimeout:      cfg.Conversation.CallTimeout.Duration,
		MaxTurns:         cfg.Conversation.MaxTurns,
		MaxTurnsPerAgent: cfg.Conversation.MaxTurnsPerAgent,
		MaxParallel:      cfg.Conversation.MaxParallel,
		MaxMessageChars:  cfg.Conversation.MaxMessageChars,
		MaxQueued:        cfg.Conversation.MaxQueued,
		MaxInputTokens:   *cfg.LLM.MaxInputTokens,
		MaxToolRounds:    cfg.LLM.MaxToolRounds,
		MatchThreshold:   cfg.Expert.MatchThreshold,
		SessionScope:     cfg.Expert.SessionScope,
		CloneScope:       cfg.Memory.CloneScope,
		Notify:           cfg.Errors.Notify,
		WorkingReaction:  cfg.Slack.WorkingReaction,
		BotUserID:        botUserID,
		BaseDomains:      cfg.ENS.BaseDomains,
		ShutdownGrace:    cfg.ShutdownGrace.Duration,
		PostRetryWindow:  cfg.Slack.PostRetryWindow.Duration,
		Stream:           cfg.Slack.Stream,
		StreamInterval:   cfg.Slack.StreamInterval.Duration,
		TurnTimeout:      3 * longestTotalTimeout(cfg.LLM),
		PostTimeout:      6 * cfg.Slack.Timeout.Duration,
		Agents:           map[string]agents.AgentSettings{},
		Traces:           cfg.Trace.Enabled,
		// Stored compressed: incompressible text grows by a little, so the
		// entry is bounded below the store's bound by that margin.
		TraceEntryMaxBytes: cfg.Trace.MaxBytesPerConversation - cfg.Trace.MaxBytesPerConversation/64 - 64,
		Feedback:           cfg.Slack.Feedback,
		Replica:            replicaName(),
		Mask:               cfg.masker(),
		DirectChannel:      cfg.Slack.DMChannel,
		TemplateVars:       cfg.Templates.Vars,

		MaxToolCallsPerRound: cfg.LLM.MaxToolCallsPerRound,
	}
	for _, ch := range cfg.Channels {
		o.Channels = append(o.Channels, agents.ChannelConfig{ID: ch.ID, Agents: ch.Agents, Start: ch.Start, DailyTokens: int64(ch.DailyTokens)})
	}
	o.Prices = pricesOf(cfg.LLM)
	o.Budgets = agents.Budgets{
		PerPerson: int64(cfg.Budget.DailyTokensPerPerson), PerChannel: int64(cfg.Budget.DailyTokensPerChannel),
		Workspace: int64(cfg.Budget.DailyTokens),
	}
	for name, s := range cfg.AgentSetting {
		o.Agents[strings.ToLower(name)] = agents.AgentSettings{LLMProfile: s.LLMProfile, SessionPolicy: s.SessionPolicy, SessionPattern: s.SessionPattern, Tools: s.Tools}
	}
	for _, a := range cfg.Agents {
		o.Agents[a.ENS] = agents.AgentSettings{LLMProfile: a.LLMProfile, SessionPolicy: a.SessionPolicy, SessionPattern: a.SessionPattern, Tools: a.Tools}
	}
	return o
}

// replicaName names this process in turn traces: the host (a pod's name
// on Kubernetes) and the process id.
func replicaName() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid())
}

// longestTotalTimeout is the longest llm total_timeout of any profile: a
// turn's deadline is three of them (a threading turn may call the model
// three times).
func longestTotalTimeout(c LLMConfig) time.Duration {
	var d time.Duration
	if c.TotalTimeout != nil {
		d = c.TotalTimeout.Duration
	}
	for _, p := range c.Profiles {
		if p.TotalTimeout != nil {
			d = max(d, p.TotalTimeout.Duration)
		}
	}
	return d
}

// openStore opens Redis when memory.redis_url is set, else the in-process
// store, which is announced: one replica, nothing kept across restarts.
func openStore(ctx context.Context, c MemoryConfig, t TraceConfig, log *slog.Logger) (memory.Store, error) {
	if c.RedisURL == "" {
		log.Warn("memory: using the in-process store: run a single replica; conversations and memory are lost on exit (set memory.redis_url to keep them)")
		return memory.NewInProcess(memory.Options{
			MaxSessionMessages: c.MaxSessionMessages, ConversationTTL: c.ConversationTTL.Duration,
			TraceRetention: t.Retention.Duration, TraceMaxBytes: t.MaxBytesPerConversation,
			TraceTotalMaxBytes: t.MaxBytes,
		}), nil
	}
	o := redisOptions(c)
	o.TraceRetention, o.TraceMaxBytes = t.Retention.Duration, t.MaxBytesPerConversation
	o.TraceTotalMaxBytes = t.MaxBytes
	s, err := memory.NewRedis(ctx, o)
	if err != nil {
		return nil, err
	}
	warnRedisPersistence(ctx, s, log)
	return s, nil
}

// redisOptions maps [memory] onto the Redis store's options.
func redisOptions(c MemoryConfig) memory.RedisOptions {
	return memory.RedisOptions{
		URL:                c.RedisURL,
		KeyPrefix:          c.KeyPrefix,
		MaxSessionMessages: c.MaxSessionMessages,
		ConversationTTL:    c.ConversationTTL.Duration,
	}
}

// openTemplates opens the config repository; a directory that does not
// exist, or that is the Go package of the built-in prompts, means the
// built-in prompts, which note is told. It returns the directory in use
// ("" for the built-in prompts).
func openTemplates(dir string, opts templates.Options, note func(string)) (*templates.Library, string, error) {
	if isGoSource(dir) {
		// The default "templates" run from a checkout is the package of the
		// built-in prompts, not a repository of overrides.
		note(fmt.Sprintf("templates: %q holds Go source (the built-in prompts' package), not a config repository; using the built-in prompts", dir))
		dir = ""
	}
	lib, err := templates.Open(dir, opts)
	if errors.Is(err, fs.ErrNotExist) {
		note(fmt.Sprintf("templates: no config repository at %q; using the built-in prompts", dir))
		dir = ""
		lib, err = templates.Open(dir, opts)
	}
	return lib, dir, err
}

// reloadOnHUP reloads the prompts on SIGHUP (or on hup, in tests).
func reloadOnHUP(ctx context.Context, hup <-chan os.Signal, lib *templates.Library, log *slog.Logger) error {
	if hup == nil {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGHUP)
		defer signal.Stop(ch)
		hup = ch
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			if err := lib.Reload(); err != nil {
				log.Error("templates: reload on SIGHUP failed", slog.Any(logErr, err))
				continue
			}
			log.Info("templates: reloaded on SIGHUP")
		}
	}
}

func newLogger(c LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationAsText}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationAsText writes durations as Go writes them ("1.5s", "250ms"):
// JSON would otherwise show nanoseconds, which nobody reads at a glance.
func durationAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// part adapts a long-lived part of the process, run under ctx, to the
// run's errgroup: an error of its own is logged and returned with the
// part's name, which cancels the run (the group keeps the first); the end
// of ctx is no error.
func part(ctx context.Context, log *slog.Logger, name string, run func(context.Context) error) func() error {
	return func() error {
		err := run(ctx)
		if err == nil || errors.Is(err, context.Canceled) {
			return nil
		}
		log.Error("stopped with an error", slog.String(logComponent, name), slog.Any(logErr, err))
		return fmt.Errorf("%s: %w", name, err)
	}
}

// startHub runs the MCP servers until the returned stop is called (not
// with ctx: turns draining after SIGTERM may still call tools), and returns
// once each server has been tried once (within its timeout), so that
// agents start with their tools.
func startHub(ctx context.Context, hub *tools.Hub) (stop func()) {
	var done sync.WaitGroup
	toolsCtx, stopTools := context.WithCancel(context.Background())
	done.Go(func() { _ = hub.Run(toolsCtx) }) // Run ends only with its context, returning nil
	select {
	case <-hub.Started():
	case <-ctx.Done():
	}
	return func() {
		stopTools()
		done.Wait()
	}
}

// pricesOf maps [llm.prices] onto the engine's prices.
func pricesOf(c LLMConfig) map[string]agents.Price {
	out := make(map[string]agents.Price, len(c.Prices))
	for model, p := range c.Prices {
		out[model] = agents.Price{Input: p.Input, Output: p.Output}
	}
	return out
}
