package main

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	gethlog "github.com/ethereum/go-ethereum/log"
	"github.com/redis/go-redis/v9"

	"github.com/conclavehq/conclave/memory"
)

// routeLibraryLogs sends the lines that libraries log on their own —
// go-redis, go-ethereum, anything using the standard log package —
// through conclave's structured logger, tagged with their component.
// Those libraries keep one logger per process; the last conclave started
// in the process owns it (tests start several).
func routeLibraryLogs(log *slog.Logger) {
	redis.SetLogger(redisLogger{log.With(slog.String(logComponent, "redis"))})
	gethlog.SetDefault(gethlog.NewLogger(log.With(slog.String(logComponent, "ethereum")).Handler()))
	// slog's default also receives the standard log package's lines.
	slog.SetDefault(log.With(slog.String(logComponent, "stdlog")))
}

// redisLogger is go-redis's logger interface over slog. go-redis logs
// only trouble (failed dials, pool errors), so its lines are warnings.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// warnMissingModelKeys warns, at start, about each LLM profile that agents
// would use without an API key, instead of letting their first turn fail.
// Endpoints that need no key (a local server) can ignore the warning.
func warnMissingModelKeys(cfg Config, log *slog.Logger) {
	if len(cfg.Agents) == 0 && len(cfg.Channels) == 0 {
		return // no agent will run
	}
	def, named := llmProfiles(cfg.LLM)
	if def.APIKey == "" {
		log.Warn("llm: no API key for the default profile; agents will fail at their first turn unless the endpoint needs none (set OPENAI_API_KEY or CONCLAVE_LLM_API_KEY)",
			slog.String("key", "llm.api_key"))
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range named {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		if named[n].APIKey == "" && def.APIKey != "" {
			log.Warn("llm: no API key for a profile; agents using it will fail at their first turn unless its endpoint needs none (set its api_key_env)",
				slog.String("key", "llm.profiles."+n+".api_key"))
		}
	}
}

// warnRedisPersistence warns when Redis keeps no append-only file: a
// restart of Redis then loses the conversations, memory and replies
// waiting to be posted since its last snapshot. A Redis that does not let
// conclave read its configuration is told at debug level only (managed
// services deny CONFIG, and persist on their own terms).
func warnRedisPersistence(ctx context.Context, s *memory.Redis, log *slog.Logger) {
	on, err := s.AppendOnly(ctx)
	switch {
	case err != nil:
		log.Debug("memory: cannot read how Redis persists", slog.Any(logErr, err))
	case !on:
		log.Warn("memory: Redis runs with appendonly no: a restart of Redis loses the conversations, memory and unposted replies written since its last snapshot; set appendonly yes (see docs/memory.md)")
	}
}

// startupSummary is the one line that says conclave is up: where it
// listens, which store, how many agents and channels, which prompts, which
// Slack team.
type startupSummary struct {
	addr, opsAddr   string
	store           string
	agents          int
	channels        int
	templates       string
	templateFiles   int
	templateProblem int
	slackTeam       string
	// agentAdmins says who may add and remove agents (pairing.Admins.Who).
	agentAdmins string
}

func (s startupSummary) log(log *slog.Logger) {
	attrs := []any{
		slog.String("listen", s.addr),
		slog.String("store", s.store),
		slog.Int("agents", s.agents),
		slog.Int("channels", s.channels),
		slog.String("templates", s.templates),
		slog.Int("template_files", s.templateFiles),
		slog.Int("template_problems", s.templateProblem),
		slog.String("slack_team", s.slackTeam),
	}
	if s.opsAddr != "" {
		attrs = append(attrs, slog.String("ops_listen", s.opsAddr))
	}
	if s.agentAdmins != "" {
		attrs = append(attrs, slog.String("agent_admins", s.agentAdmins))
	}
	log.Info("conclave is running", attrs...)
}

// storeKind names the store without its address or credentials.
func storeKind(c MemoryConfig) string {
	if c.RedisURL == "" {
		return "in-process"
	}
	return "redis"
}

// countTemplates counts the .tmpl files of a config repository.
func countTemplates(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".tmpl") {
			n++
		}
		return nil
	})
	return n
}

// isGoSource tells whether dir holds Go source: the templates package of
// a checkout (whose defaults/ are the built-in prompts), not a config
// repository.
func isGoSource(dir string) bool {
	if dir == "" {
		return false // the built-in prompts, not the working directory
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(matches) > 0
}

// teamName is how the summary names the Slack team.
func teamName(name, id string) string {
	if id == "" {
		return cmp.Or(name, "not connected")
	}
	return fmt.Sprintf("%s (%s)", cmp.Or(name, "?"), id)
}
