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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/llm"
	"github.com/conclavehq/conclave/agents/tools"
	"github.com/conclavehq/conclave/bot"
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
	fs := newFlags("run", e)
	load := configFlag(fs, e)
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	cfg, secretsInFile, err := load()
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, e.stderr)
	routeLibraryLogs(log)
	log.Info("starting conclave", slog.String("version", versionString()))
	for _, key := range secretsInFile {
		log.Warn("a secret is written in the configuration file; prefer its environment variable", slog.String("key", key))
	}
	warnMissingModelKeys(cfg, log)
	summary := startupSummary{store: storeKind(cfg.Memory), agents: len(cfg.Agents), channels: len(cfg.Channels), slackTeam: "not configured"}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := newRunMetrics(reg)

	rawStore, err := openStore(ctx, cfg.Memory, log)
	if err != nil {
		return err
	}
	defer rawStore.Close()
	store := metrics.observeStore(rawStore)
	metrics.watchPosts(rawStore, log)

	lib, templatesDir, err := openTemplates(cfg.Templates.Dir, templates.Options{Logger: log.With(slog.String(logComponent, "templates"))},
		func(msg string) { log.Info(msg) })
	if err != nil {
		return err
	}
	summary.templates, summary.templateProblem = "built-in", len(lib.Current().Problems())
	if templatesDir != "" {
		summary.templates, summary.templateFiles = templatesDir, countTemplates(templatesDir)
	}
	metrics.watchTemplates(lib)

	directory, err := ens.New(ensOptions(cfg.ENS, log), staticAgents(cfg.Agents))
	if err != nil {
		return err
	}
	defer directory.Close()
	metrics.watchENS(directory.CacheStats)
	warnSharedMemory(ctx, cfg, directory, log)

	web := webClient(cfg.Conversation.MaxParallel)
	def, named := llmProfiles(cfg.LLM)
	client, err := llm.New(def, named, llm.WithLogger(log.With(slog.String(logComponent, "llm"))),
		llm.WithHTTPClient(metrics.llmHTTP(web)))
	if err != nil {
		return err
	}
	model := metrics.observeModel(client)

	servers, err := mcpServers(cfg.MCP, e.getenv)
	if err != nil {
		return err
	}
	var toolbox agents.Toolbox
	var hub *tools.Hub
	if len(servers) > 0 {
		// The connection pool is shared, not the client: a Streamable HTTP
		// session keeps a long-lived stream that a client timeout would cut.
		hub, err = tools.New(servers, tools.Options{Logger: log, OnCall: metrics.observeToolCall, HTTPClient: &http.Client{Transport: web.Transport}})
		if err != nil {
			return err
		}
		toolbox = hub
	}

	checks := []readinessCheck{
		{"templates", "not loaded", func(context.Context) error {
			if lib.Current() == nil {
				return errors.New("not loaded")
			}
			return lib.Err()
		}},
	}
	if cfg.Memory.RedisURL != "" {
		checks = append(checks, readinessCheck{"redis", "unreachable", store.Ping})
	}

	// Everything that runs until shutdown; each part's error ends the run.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var parts partGroup
	parts.start(runCtx, cancelRun, log, "templates", lib.Run)
	parts.start(runCtx, cancelRun, log, "reload", func(ctx context.Context) error {
		return reloadOnHUP(ctx, e.hup, lib, log)
	})
	if hub != nil {
		// The servers outlive the engine's drain: turns finishing after
		// SIGTERM may still call tools.
		defer startHub(ctx, hub)()
	}

	// The engine gets its own context: when the process is told to stop,
	// the Slack transport stops reading events at once (runCtx) while the
	// engine drains in-flight turns within shutdown_grace.
	engineCtx, stopEngine := context.WithCancel(ctx)
	defer stopEngine()
	engineDone := make(chan struct{})
	// The Slack transport outlives runCtx: it keeps the socket until the
	// engine is done, draining meanwhile (see bot.Drain).
	slackCtx, stopSlack := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSlack()
	drain := func() {}
	var wallet *bot.WalletVerifier
	if cfg.Slack.AppToken == "" || cfg.Slack.BotToken == "" {
		close(engineDone)
		log.Error("Slack tokens are not set: not connecting to Slack; set SLACK_APP_TOKEN (xapp-…) and SLACK_BOT_TOKEN (xoxb-…), see README")
		checks = append(checks, readinessCheck{"slack", "not configured", func(context.Context) error { return errors.New("no tokens") }})
	} else {
		eng := &engineHandler{}
		b := bot.New(bot.Options{
			AppToken:        cfg.Slack.AppToken,
			BotToken:        cfg.Slack.BotToken,
			APIURL:          cfg.Slack.APIURL,
			WorkingReaction: cfg.Slack.WorkingReaction,
			IPFSGateway:     cfg.Slack.IPFSGateway,
			HTTPClient:      web,
			Timeout:         cfg.Slack.Timeout.Duration,
			HandleParallel:  16,
			Registerer:      reg,
		}, eng, log)
		checks = append(checks, readinessCheck{"slack", "not connected", func(context.Context) error { return b.Ready() }})
		id, err := identify(runCtx, b, log)
		if err != nil {
			return err
		}
		summary.slackTeam = teamName(id.Team, id.TeamID)
		eng.Engine = agents.New(engineOptions(cfg, id.UserID), agents.Deps{
			Store:    store,
			Chat:     b,
			Model:    model,
			Prompts:  func() agents.Prompts { return lib.Current() },
			Resolver: directory,
			Tools:    toolbox,
			Logger:   log,
			OnTurn:   metrics.observeTurn,

			OnPostAbandoned: metrics.observePostAbandoned,
		})
		if wallet, err = wireCommands(cfg, b, eng.Engine, store, directory, log); err != nil {
			return err
		}
		go func() {
			defer close(engineDone)
			if err := eng.Run(engineCtx); err != nil {
				log.Error("engine stopped", slog.Any(logErr, err))
				cancelRun()
			}
		}()
		drain = b.Drain
		parts.start(slackCtx, cancelRun, log, "slack", b.Run)
	}

	httpCtx, stopHTTP := context.WithCancel(context.Background())
	defer stopHTTP()
	httpDone := make(chan error, 1)
	var walletPage http.Handler // stays nil (no route) without Slack
	if wallet != nil {
		walletPage = wallet
	}
	// The summary goes out once every listener is bound (ops first).
	serving := e
	serving.opsReady = func(addr string) {
		summary.opsAddr = addr
		if e.opsReady != nil {
			e.opsReady(addr)
		}
	}
	serving.ready = func(addr string) {
		summary.addr = addr
		summary.log(log)
		if e.ready != nil {
			e.ready(addr)
		}
	}
	listeners := httpListeners(cfg.HTTP, newOpsMux(checks, log), promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), walletPage, serving, log)
	go func() { httpDone <- serveHTTP(httpCtx, listeners) }()

	var httpErr error
	select {
	case <-runCtx.Done():
	case httpErr = <-httpDone:
		cancelRun()
	}
	log.Info("shutting down")
	drain()
	stopEngine()
	<-engineDone
	stopSlack()
	parts.wait()
	stopHTTP()
	if httpErr == nil {
		httpErr = <-httpDone
	}
	if httpErr != nil {
		return httpErr
	}
	if err := parts.err(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
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

// engineHandler hands the transport's events to the engine, which is built
// once the transport knows conclave's identity (before it runs).
type engineHandler struct{ *agents.Engine }

// identify learns conclave's own Slack identity, retrying while Slack
// cannot be reached; a token Slack refuses is a configuration error.
func identify(ctx context.Context, b *bot.Bot, log *slog.Logger) (bot.Identity, error) {
	wait := time.Second
	for {
		id, err := b.Identify(ctx)
		if err == nil {
			return id, nil
		}
		var slackErr slack.SlackErrorResponse
		if errors.As(err, &slackErr) || isAuthError(err) {
			return bot.Identity{}, fmt.Errorf("slack: the bot token was refused: %w", err)
		}
		log.Warn("cannot reach Slack; retrying", slog.Any(logErr, err), slog.Duration("in", wait))
		select {
		case <-ctx.Done():
			return bot.Identity{}, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func isAuthError(err error) bool {
	for _, s := range []string{"invalid_auth", "not_authed", "token_revoked", "account_inactive", "token_expired"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
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
	}
	for _, ch := range cfg.Channels {
		o.Channels = append(o.Channels, agents.ChannelConfig{ID: ch.ID, Agents: ch.Agents, Start: ch.Start})
	}
	for name, s := range cfg.AgentSetting {
		o.Agents[strings.ToLower(name)] = agents.AgentSettings{LLMProfile: s.LLMProfile, SessionPolicy: s.SessionPolicy, SessionPattern: s.SessionPattern, Tools: s.Tools}
	}
	for _, a := range cfg.Agents {
		o.Agents[a.ENS] = agents.AgentSettings{LLMProfile: a.LLMProfile, SessionPolicy: a.SessionPolicy, SessionPattern: a.SessionPattern, Tools: a.Tools}
	}
	return o
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
func openStore(ctx context.Context, c MemoryConfig, log *slog.Logger) (memory.Store, error) {
	if c.RedisURL == "" {
		log.Warn("memory: using the in-process store: run a single replica; conversations and memory are lost on exit (set memory.redis_url to keep them)")
		return memory.NewInProcess(memory.Options{MaxSessionMessages: c.MaxSessionMessages, ConversationTTL: c.ConversationTTL.Duration}), nil
	}
	s, err := memory.NewRedis(ctx, redisOptions(c))
	if err != nil {
		return nil, err
	}
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
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// partGroup runs the long-lived parts of the process and keeps the first
// error.
type partGroup struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	first error
}

func (g *partGroup) start(ctx context.Context, cancel context.CancelFunc, log *slog.Logger, name string, run func(context.Context) error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		err := run(ctx)
		if err == nil || errors.Is(err, context.Canceled) {
			return
		}
		log.Error("stopped with an error", slog.String(logComponent, name), slog.Any(logErr, err))
		g.mu.Lock()
		if g.first == nil {
			g.first = fmt.Errorf("%s: %w", name, err)
		}
		g.mu.Unlock()
		cancel()
	}()
}

func (g *partGroup) wait() { g.wg.Wait() }

func (g *partGroup) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.first
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
