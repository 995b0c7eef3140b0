package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// memoryTarget is what the memory commands work on: one agent's memory
// namespace in the configured Redis, as the running bot uses it.
type memoryTarget struct {
	agent     string // the agent's ENS name, canonical
	namespace string
	store     *memory.Redis
	log       *slog.Logger
	by        string // who ran the command
}

// memoryFlags are the flags every memory command shares.
type memoryFlags struct {
	load    func() (Config, []string, error)
	agent   *string
	channel *string
}

func newMemoryFlags(fs *flag.FlagSet, e env) memoryFlags {
	return memoryFlags{
		load:    configFlag(fs, e),
		agent:   fs.String("agent", "", "the agent whose memory it is, by its ENS name (required)"),
		channel: fs.String("channel", "", "the channel: an expert's with expert.session_scope = \"channel\", a clone's or human agent's with memory.clone_scope = \"channel\""),
	}
}

// open loads the configuration, finds the agent's namespace and opens the
// store. An agent neither declared in the configuration nor holding any
// session is unknown.
func (f memoryFlags) open(ctx context.Context, cmd string, e env) (memoryTarget, error) {
	if *f.agent == "" {
		return memoryTarget{}, fmt.Errorf("%w: %s needs --agent (see conclave %s --help)", errUsage, cmd, cmd)
	}
	cfg, _, err := f.load()
	if err != nil {
		return memoryTarget{}, err
	}
	store, agent, err := openMemoryStore(ctx, cmd, cfg, *f.agent)
	if err != nil {
		return memoryTarget{}, err
	}
	namespace, err := memoryNamespace(cfg, agent, *f.channel, false)
	if err != nil {
		_ = store.Close() // the namespace error is the one to report
		return memoryTarget{}, err
	}
	if !declaredAgent(cfg, agent) {
		keys, err := store.Sessions(ctx, namespace)
		if err == nil && len(keys) == 0 {
			err = fmt.Errorf("%s: unknown agent %s: the configuration declares no such agent and its memory holds no session", cmd, agent)
		}
		if err != nil {
			_ = store.Close() // the look-up error is the one to report
			return memoryTarget{}, err
		}
	}
	return memoryTarget{
		agent: agent, namespace: namespace, store: store,
		log: newLogger(auditLog(cfg.Log), maskingWriter(e.stderr, cfg)), by: whoRan(e),
	}, nil
}

// auditLog is c lowered to INFO when it is set above: who read or removed
// a customer's memory is always logged.
func auditLog(c LogConfig) LogConfig {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err == nil && level > slog.LevelInfo {
		c.Level = "info"
	}
	return c
}

// declaredAgent reports whether the configuration declares the agent.
func declaredAgent(cfg Config, name string) bool {
	for _, a := range cfg.Agents {
		if strings.EqualFold(a.ENS, name) {
			return true
		}
	}
	return false
}

// whoRan names the operating-system user running the command, for the
// log: the account's name, else $USER, else the user id.
func whoRan(e env) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := e.getenv("USER"); u != "" {
		return u
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}

// logRun logs a memory command at INFO with who ran it.
func (t memoryTarget) logRun(ctx context.Context, msg string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("by", t.by), slog.String("agent", t.agent), slog.String("namespace", t.namespace)}, attrs...)
	t.log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}

// unknownKey is the error for a key the agent's memory does not hold.
func (t memoryTarget) unknownKey(cmd, key string) error {
	return fmt.Errorf("%s: %s has no memory session %q (conclave memory list --agent %s lists them)", cmd, t.agent, key, t.agent)
}

// runMemoryList lists an agent's sessions: key, entries, size and last
// update, sorted by key.
func runMemoryList(ctx context.Context, args []string, e env) error {
	fs := newFlags("memory list", e)
	mf := newMemoryFlags(fs, e)
	prefix := fs.String("prefix", "", "list only the keys that start with this")
	asJSON := fs.Bool("json", false, "print JSON, one object per session")
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	t, err := mf.open(ctx, "memory list", e)
	if err != nil {
		return err
	}
	defer t.store.Close()
	infos, err := t.store.SessionInfos(ctx, t.namespace, *prefix)
	if err != nil {
		return err
	}
	t.logRun(ctx, "memory sessions listed", slog.String("prefix", *prefix), slog.Int("sessions", len(infos)))
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, in := range infos {
			if err := enc.Encode(sessionJSON{Key: in.Key, Entries: in.Entries, Bytes: in.Bytes, Updated: in.Updated}); err != nil {
				return err
			}
		}
		return nil
	}
	if len(infos) == 0 {
		fmt.Fprintf(e.stdout, "%s has no memory session%s\n", t.agent, map[bool]string{true: fmt.Sprintf(" starting with %q", *prefix)}[*prefix != ""])
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tENTRIES\tBYTES\tUPDATED")
	for _, in := range infos {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", in.Key, in.Entries, in.Bytes, stamp(in.Updated))
	}
	return w.Flush()
}

type sessionJSON struct {
	Key     string    `json:"key"`
	Entries int       `json:"entries"`
	Bytes   int       `json:"bytes"`
	Updated time.Time `json:"updated"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// runMemoryShow prints a session's entries, oldest first.
func runMemoryShow(ctx context.Context, args []string, e env) error {
	t, key, err := openKeyCommand(ctx, "memory show", args, e)
	if err != nil {
		return err
	}
	defer t.store.Close()
	entries, err := t.store.ReadSession(ctx, t.namespace, key, 0)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return t.unknownKey("memory show", key)
	}
	t.logRun(ctx, "memory session shown", slog.String("key", key), slog.Int("entries", len(entries)))
	fmt.Fprintf(e.stdout, "session %q of %s: %d entries\n", key, t.namespace, len(entries))
	for _, en := range entries {
		head := "\n[" + stamp(en.At) + "] " + en.Role
		if en.Author != "" {
			head += " · " + en.Author
		}
		if en.ConversationID != "" {
			head += " · conversation " + en.ConversationID
		}
		fmt.Fprintln(e.stdout, head)
		for line := range strings.Lines(en.Content) {
			fmt.Fprintln(e.stdout, "  "+strings.TrimRight(line, "\n"))
		}
	}
	return nil
}

// runMemoryForget removes a session, its index entries and the traces of
// the conversations it came from (a customer's right to be forgotten).
func runMemoryForget(ctx context.Context, args []string, e env) error {
	t, key, err := openKeyCommand(ctx, "memory forget", args, e)
	if err != nil {
		return err
	}
	defer t.store.Close()
	f, err := t.store.ForgetSession(ctx, t.namespace, key)
	if errors.Is(err, memory.ErrNotFound) {
		return t.unknownKey("memory forget", key)
	}
	if err != nil {
		return err
	}
	t.logRun(ctx, "memory session forgotten", slog.String("key", key), slog.Int("entries", f.Entries),
		slog.Any("conversations", f.Conversations))
	fmt.Fprintf(e.stdout, "forgot session %q of %s: %d entries, and the traces of %d conversation(s)\n",
		key, t.namespace, f.Entries, len(f.Conversations))
	return nil
}

// openKeyCommand parses the flags and KEY of a command on one session
// and opens its target.
func openKeyCommand(ctx context.Context, cmd string, args []string, e env) (memoryTarget, string, error) {
	fs := newFlags(cmd, e)
	mf := newMemoryFlags(fs, e)
	key, err := parseKeyFlags(fs, args, e)
	if err != nil {
		return memoryTarget{}, "", err
	}
	t, err := mf.open(ctx, cmd, e)
	return t, key, err
}

// parseKeyFlags parses a command's flags and its one KEY argument, which
// may come before or after the flags.
func parseKeyFlags(fs *flag.FlagSet, args []string, e env) (string, error) {
	var key string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			after := args[i+1:]
			if key == "" && len(after) > 0 {
				key, after = after[0], after[1:]
			}
			rest = append(append(rest, "--"), after...)
			i = len(args)
		case strings.HasPrefix(a, "-"):
			rest = append(rest, a)
			name := strings.TrimLeft(a, "-")
			if f := fs.Lookup(name); f != nil && !strings.Contains(a, "=") && !isBoolFlag(f) && i+1 < len(args) {
				i++
				rest = append(rest, args[i])
			}
		case key == "":
			key = a
		default:
			rest = append(rest, a) // a second argument: parseFlags refuses it
		}
	}
	if err := parseFlags(fs, rest, e); err != nil {
		return "", err
	}
	if key == "" {
		return "", fmt.Errorf("%w: %s needs the session KEY (see conclave %s --help)", errUsage, fs.Name(), fs.Name())
	}
	return key, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// openMemoryStore opens the configured Redis for a memory command and
// parses the agent's ENS name: the in-process store lives only inside a
// running conclave, out of a command's reach.
func openMemoryStore(ctx context.Context, cmd string, cfg Config, agentName string) (*memory.Redis, string, error) {
	if cfg.Memory.RedisURL == "" {
		return nil, "", errNoRedis(cmd, ", out of this command's reach")
	}
	names, err := ens.NewNames(cfg.ENS.BaseDomains)
	if err != nil {
		return nil, "", err
	}
	agent, err := names.Parse(agentName)
	if err != nil {
		return nil, "", fmt.Errorf("%s: --agent: %w", cmd, err)
	}
	store, err := memory.NewRedis(ctx, redisOptions(cfg.Memory))
	if err != nil {
		return nil, "", err
	}
	return store, agent.Canonical, nil
}

// openRedis opens the store of memory.redis_url for a command (cmd names
// it in the error) that reads what a running conclave stored.
func openRedis(ctx context.Context, cmd string, cfg Config, otherwise string) (*memory.Redis, error) {
	if cfg.Memory.RedisURL == "" {
		return nil, errNoRedis(cmd, otherwise)
	}
	return memory.NewRedis(ctx, redisOptions(cfg.Memory))
}

// errNoRedis says that cmd needs memory.redis_url, and what to do
// otherwise (appended as written).
func errNoRedis(cmd, otherwise string) error {
	return fmt.Errorf("%s: memory.redis_url is not set; the in-process store lives only inside a running conclave%s", cmd, otherwise)
}

// memoryNamespace is the namespace the running bot keeps an agent's
// sessions under. A group's sessions (a clone's, a human agent's) live
// under the human's name, per channel unless memory.clone_scope is
// "workspace"; an expert scoped by channel has one namespace per channel.
// group is hydrate's --group: the session is a group's whatever the agent.
func memoryNamespace(cfg Config, agent, channel string, group bool) (string, error) {
	human := humanOfStatic(cfg, agent)
	if group || human != agent || declaredRole(cfg, agent) == "human" {
		switch {
		case cfg.Memory.CloneScope == agents.ScopeWorkspace:
			return human, nil
		case channel == "" && group:
			return "", fmt.Errorf("%w: --group needs --channel with memory.clone_scope = \"channel\" (a group's memory is kept per channel)", errUsage)
		case channel == "":
			return "", fmt.Errorf("%w: %s keeps its memory per channel (memory.clone_scope = \"channel\"): add --channel", errUsage, agent)
		}
		return agents.CloneNamespace(&agents.Options{CloneScope: cfg.Memory.CloneScope}, human, channel), nil
	}
	if channel != "" {
		if cfg.Expert.SessionScope != "channel" {
			return "", fmt.Errorf("%w: --channel only applies with expert.session_scope = \"channel\"", errUsage)
		}
		return agents.ExpertNamespace(agent, channel), nil
	}
	return agent, nil
}

// declaredRole is the role the configuration gives agent, lower case;
// empty when it declares no such agent.
func declaredRole(cfg Config, agent string) string {
	for _, a := range cfg.Agents {
		if a.ENS == agent {
			return strings.ToLower(a.Role)
		}
	}
	return ""
}
