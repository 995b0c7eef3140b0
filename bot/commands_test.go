package bot

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/pairing"
	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// The agents the command tests know, all static.
const (
	elen     = "elen.acme.137.protocol6022.eth"     // facilitator, declared in C1
	fabien   = "fabien.acme.137.protocol6022.eth"   // facilitator
	claudine = "claudine.acme.137.protocol6022.eth" // expert
	amir     = "amir.acme.137.protocol6022.eth"     // expert
	carla    = "carla.acme.137.protocol6022.eth"    // clone
	hugo     = "hugo.acme.137.protocol6022.eth"     // human owned by testKey 1
	iris     = "iris.acme.137.protocol6022.eth"     // human owned by testKey 2
	ghost    = "ghost.acme.137.protocol6022.eth"    // nobody knows it

	testCollection = "0x00000000000000000000000000000000000c0ffe"
)

// testIdentities is the real directory, plus two things a static directory
// cannot do: name agents from their token, and report an owner that changed
// on chain since the identity was read (what Owner's fresh read is for).
type testIdentities struct {
	*ens.Directory
	tokens map[string]string // token id → ENS name, in testCollection on chain 137

	mu         sync.Mutex
	owners     map[string]string // ENS name → owner now
	ownerReads int
	failures   map[string]error // ENS name → the error its look-up fails with
}

func (d *testIdentities) Resolve(ctx context.Context, name string) (ens.Agent, error) {
	d.mu.Lock()
	err := d.failures[name]
	d.mu.Unlock()
	if err != nil {
		return ens.Agent{}, err
	}
	return d.Directory.Resolve(ctx, name)
}

func (d *testIdentities) ResolveToken(ctx context.Context, chainID uint64, coll string, id *big.Int) (ens.Agent, error) {
	name, ok := d.tokens[id.String()]
	if !strings.EqualFold(coll, testCollection) || chainID != 0 && chainID != 137 || !ok {
		return ens.Agent{}, fmt.Errorf("test: token %s #%s: %w", coll, id, ens.ErrNotFound)
	}
	return d.Resolve(ctx, name)
}

func (d *testIdentities) Owner(ctx context.Context, a ens.Agent) (string, error) {
	d.mu.Lock()
	d.ownerReads++
	owner, moved := d.owners[a.EnsDomain]
	d.mu.Unlock()
	if moved {
		return owner, nil
	}
	return d.Directory.Owner(ctx, a)
}

func (d *testIdentities) transfer(name, owner string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.owners[name] = owner
}

func newTestIdentities(t *testing.T) *testIdentities {
	t.Helper()
	static := []ens.Agent{
		{Name: "Elen", EnsDomain: elen, Role: ens.RoleFacilitator},
		{Name: "Fabien", EnsDomain: fabien, Role: ens.RoleFacilitator},
		{Name: "Claudine", EnsDomain: claudine, Role: ens.RoleExpert},
		{Name: "Amir", EnsDomain: amir, Role: ens.RoleExpert},
		{Name: "Carla", EnsDomain: carla, Role: ens.RoleClone, CloneOf: hugo},
		{Name: "Hugo", EnsDomain: hugo, Role: ens.RoleHuman, Owner: keyAddress(testKey(t, 1)).Hex()},
		{Name: "Iris <!channel>", EnsDomain: iris, Role: ens.RoleHuman, Owner: keyAddress(testKey(t, 2)).Hex()},
	}
	dir, err := ens.New(ens.Options{}, static)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	return &testIdentities{Directory: dir, tokens: map[string]string{"7": claudine, "8": hugo}, owners: map[string]string{}}
}

// commandRig is a real Bot connected to the fake Slack, answering commands
// with a real engine and store.
type commandRig struct {
	*rig
	store  *memory.InProcess
	engine *agents.Engine
	ids    *testIdentities
	wallet *httptest.Server // nil unless the rig has a public URL
}

type commandRigOptions struct {
	// admins is slack.admins; nil is ["*"] (the tests written before the
	// secure default add agents as anyone), and workspaceRoles asks for
	// the empty list itself.
	admins         []string
	workspaceRoles bool
	wallet         bool             // serve the wallet page and set a public URL
	now            func() time.Time // the pairing rules' clock; default time.Now
}

func newCommandRig(t *testing.T, o commandRigOptions) *commandRig {
	t.Helper()
	f := false
	r := &commandRig{ids: newTestIdentities(t), store: memory.NewInProcess(memory.Options{})}
	r.rig = newRig(t, fakeslack.Options{
		Users: append(slices.Clone(testUsers),
			fakeslack.User{ID: "U3", Name: "carol", RealName: "Carol Hale"},
			fakeslack.User{ID: "W3", Name: "dora", RealName: "Dora Grid"},
			fakeslack.User{ID: "UB2", Name: "otherbot", IsBot: true},
			fakeslack.User{ID: "U4", Name: "wsadmin", RealName: "Wes Admin", IsAdmin: true},
			fakeslack.User{ID: "U5", Name: "wsowner", RealName: "Olga Owner", IsOwner: true}),
		Channels: append(slices.Clone(testChannels), fakeslack.Channel{ID: "C3", Name: "quiet", IsMember: &f}),
	}, nil)
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r.engine = agents.New(agents.Options{Channels: []agents.ChannelConfig{{ID: "C1", Agents: []string{elen}}}},
		agents.Deps{Inbound: r.store, Conversations: r.store, Locks: r.store, Sessions: r.store, Registry: r.store, Pairings: r.store,
			Resolver: r.ids, Logger: log})

	wopts := WalletOptions{Logger: log}
	var h http.Handler = http.NotFoundHandler()
	if o.wallet {
		r.wallet = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) { h.ServeHTTP(rw, req) }))
		t.Cleanup(r.wallet.Close)
		wopts.PublicURL = r.wallet.URL
	}
	w, err := NewWalletVerifier(wopts, r.store, r.web)
	if err != nil {
		t.Fatal(err)
	}
	h = w
	admins := o.admins
	switch {
	case o.workspaceRoles:
		admins = nil
	case admins == nil:
		admins = []string{pairing.Everyone}
	}
	r.answerCommands(NewCommands(r.web, CommandOptions{Admins: admins, Logger: log},
		CommandDeps{Registry: r.engine, Identities: r.ids, Pairing: pairing.New(r.store, r.ids, o.now), Wallet: w}))
	r.run(t)
	return r
}

var userNames = map[string]string{"U1": "ada", "U2": "bob", "U3": "carol"}

// channelNames are what Slack sends as channel_name for the conversations
// that are not channels: D1 a direct message, G9 a group direct message.
var channelNames = map[string]string{"D1": "directmessage", "G9": "mpdm-ada--bob--carol-1"}

// command types a slash command as user in channel and returns the reply.
func (r *commandRig) command(t *testing.T, user, channel, line string) string {
	t.Helper()
	name, text, _ := strings.Cut(line, " ")
	chName := "claims"
	if n, ok := channelNames[channel]; ok {
		chName = n
	}
	n := len(r.fake.CommandResponses())
	d := r.fake.SendSlashCommand(fakeslack.SlashCommand{
		Command: name, Text: text, UserID: user, UserName: userNames[user], ChannelID: channel, ChannelName: chName,
	})
	resps, err := r.fake.WaitCommandResponses(testContext(t), n+1)
	if err != nil {
		t.Fatalf("%s: no reply: %v\n%s", line, err, r.logs)
	}
	for _, resp := range resps {
		if resp.Key == d.EnvelopeID {
			if resp.ResponseType != "ephemeral" {
				t.Errorf("%s: reply is %q, want ephemeral", line, resp.ResponseType)
			}
			return resp.Text
		}
	}
	t.Fatalf("%s: the reply went to another command", line)
	return ""
}

// registered lists the names the engine has for a channel.
func (r *commandRig) registered(t *testing.T, channel string) []string {
	t.Helper()
	list, err := r.engine.ChannelAgents(testContext(t), channel)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ca := range list {
		names = append(names, ca.Agent.EnsDomain)
	}
	return names
}

// postTexts lists what was posted in conversations ("C1: text"), leaving
// out direct messages to users (see dms).
func (r *commandRig) postTexts() []string {
	var out []string
	for _, p := range r.fake.Posts() {
		if !isUserID(p.Channel) {
			out = append(out, p.Channel+": "+p.Text)
		}
	}
	return out
}

func isUserID(ch string) bool { return strings.HasPrefix(ch, "U") || strings.HasPrefix(ch, "W") }

// dms lists the direct messages conclave sent to a user.
func (r *commandRig) dms(user string) []fakeslack.Post {
	var out []fakeslack.Post
	for _, p := range r.fake.Posts() {
		if p.Channel == user {
			out = append(out, p)
		}
	}
	return out
}

// press presses a button of the last offer user was sent, as presser,
// and returns conclave's answer (which must replace the offer's message
// unless keep) once the interactive envelope was acknowledged.
func (r *commandRig) press(t *testing.T, user, presser, actionID string) fakeslack.CommandResponse {
	t.Helper()
	dms := r.dms(user)
	if len(dms) == 0 {
		t.Fatalf("%s was sent no offer; posts: %v", user, r.fake.Posts())
	}
	n := len(r.fake.CommandResponses())
	d, ok := r.fake.PressButton(dms[len(dms)-1], presser, actionID)
	if !ok {
		t.Fatalf("the offer to %s has no %s button: %s", user, actionID, dms[len(dms)-1].Blocks)
	}
	if _, err := r.fake.WaitAck(testContext(t), d.Key()); err != nil {
		t.Fatalf("the button press was not acknowledged: %v", err)
	}
	resps, err := r.fake.WaitCommandResponses(testContext(t), n+1)
	if err != nil {
		t.Fatalf("no answer to the button: %v\n%s", err, r.logs)
	}
	for _, resp := range resps {
		if resp.Key == d.EnvelopeID {
			return resp
		}
	}
	t.Fatalf("the answer went elsewhere")
	return fakeslack.CommandResponse{}
}

// checkReply checks a reply against a wanted substring; a want starting
// with "Usage:" must also be how the reply starts, on one line.
func checkReply(t *testing.T, got, want string) {
	t.Helper()
	if strings.HasPrefix(want, "Usage:") && (!strings.HasPrefix(got, "Usage:") || strings.Contains(got, "\n")) {
		t.Errorf("reply %q is not a one-line usage message", got)
	}
	if !strings.Contains(got, want) {
		t.Errorf("reply %q lacks %q", got, want)
	}
}

func TestListAgents(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{})
	for _, n := range []string{hugo, carla, claudine, ghost, amir} {
		if _, err := r.store.AddChannelAgent(testContext(t), "C1", n); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, channel, line, want string
	}{
		{"ordered by role, then name", "C1", "/list-agents", strings.Join([]string{
			"To call an agent, write its full name, as shown in code (copy it); a short name such as the first word calls no one.",
			"Elen — facilitator — `" + elen + "`",
			"Amir — expert — `" + amir + "`",
			"Claudine — expert — `" + claudine + "`",
			"ghost — unknown role — `" + ghost + "` (could not be resolved)",
			"Carla — clone — `" + carla + "`",
			"Hugo — human — `" + hugo + "`",
		}, "\n")},
		{"empty channel", "C2", "/list-agents", "No agents in this channel."},
		{"arguments", "C1", "/list-agents everything", "Usage: /list-agents"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.command(t, "U2", tt.channel, tt.line)
			if strings.HasPrefix(tt.want, "Usage:") {
				checkReply(t, got, tt.want)
			} else if got != tt.want {
				t.Errorf("reply:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
	if posts := r.fake.Posts(); len(posts) != 0 {
		t.Errorf("listing posted in the channel: %v", r.postTexts())
	}
}

func TestAddAgent(t *testing.T) {
	tests := []struct {
		name     string
		admins   []string
		user     string
		channel  string
		line     string
		want     string
		added    []string // the channel's agents afterwards
		announce string   // expected in the channel, "" for no post
	}{
		{"by name", nil, "U2", "C1", "/add-agent claudine.acme.137.protocol6022.eth",
			"Added Claudine — expert — `" + claudine + "` to this channel.", []string{elen, claudine},
			"<@U2> added Claudine — expert — `" + claudine + "` to this channel."},
		{"by name in another case and base", nil, "U2", "C1", "/add-agent Claudine.Acme.137.6022.eth",
			"Added Claudine", []string{elen, claudine}, "<@U2> added Claudine"},
		{"by name wrapped as a link", nil, "U2", "C1", "/add-agent <http://claudine.acme.137.protocol6022.eth|claudine.acme.137.protocol6022.eth>",
			"Added Claudine", []string{elen, claudine}, "added Claudine"},
		{"by token", nil, "U2", "C1", "/add-agent " + testCollection + " 7",
			"Added Claudine", []string{elen, claudine}, "added Claudine"},
		{"by token and chain", nil, "U2", "C1", "/add-agent " + strings.ToLower(testCollection) + " 7 137",
			"Added Claudine", []string{elen, claudine}, "added Claudine"},
		{"by an admin", []string{"U1"}, "U1", "C1", "/add-agent " + claudine,
			"Added Claudine", []string{elen, claudine}, "<@U1> added Claudine"},
		{"a bot outside the channel is warned", nil, "U2", "C3", "/add-agent " + claudine,
			"not a member of this channel", []string{claudine}, ""},
		{"already there", nil, "U2", "C1", "/add-agent " + elen,
			"Elen — facilitator — `" + elen + "` is already in this channel; nothing changed.", []string{elen}, ""},
		{"a second facilitator", nil, "U2", "C1", "/add-agent " + fabien,
			"This channel already has a facilitator (Elen, `" + elen + "`)", []string{elen}, ""},
		{"unknown agent", nil, "U2", "C1", "/add-agent " + ghost,
			"Could not look up `" + ghost + "`", []string{elen}, ""},
		{"unknown token", nil, "U2", "C1", "/add-agent " + testCollection + " 99",
			"No agent `" + testCollection + " #99` was found.", []string{elen}, ""},
		{"in a direct message", nil, "U2", "D1", "/add-agent " + claudine,
			"only be added to channels", nil, ""},
		{"in a group direct message", nil, "U2", "G9", "/add-agent " + claudine,
			"only be added to channels", []string{}, ""},
		{"by someone not an admin", []string{"U1"}, "U2", "C1", "/add-agent " + claudine,
			"Only conclave's admins", []string{elen}, ""},
		{"no argument", nil, "U2", "C1", "/add-agent", "Usage: /add-agent", []string{elen}, ""},
		{"too many arguments", nil, "U2", "C1", "/add-agent " + testCollection + " 7 137 9", "Usage: /add-agent", []string{elen}, ""},
		{"a short name", nil, "U2", "C1", "/add-agent claudine", `"claudine" is not a full ENS name`, []string{elen}, ""},
		{"not a name", nil, "U2", "C1", "/add-agent claudine_x.acme.eth", "Usage: /add-agent", []string{elen}, ""},
		{"an address alone", nil, "U2", "C1", "/add-agent " + testCollection, "Usage: /add-agent", []string{elen}, ""},
		{"not an address", nil, "U2", "C1", "/add-agent 0xabc 7", "Usage: /add-agent", []string{elen}, ""},
		{"not a token id", nil, "U2", "C1", "/add-agent " + testCollection + " seven", "Usage: /add-agent", []string{elen}, ""},
		{"a negative token id", nil, "U2", "C1", "/add-agent " + testCollection + " -7", "Usage: /add-agent", []string{elen}, ""},
		{"not a chain id", nil, "U2", "C1", "/add-agent " + testCollection + " 7 polygon", "Usage: /add-agent", []string{elen}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newCommandRig(t, commandRigOptions{admins: tt.admins})
			checkReply(t, r.command(t, tt.user, tt.channel, tt.line), tt.want)
			if tt.added != nil {
				if got := r.registered(t, tt.channel); !slices.Equal(got, tt.added) {
					t.Errorf("agents of %s = %v, want %v", tt.channel, got, tt.added)
				}
			}
			posts := r.postTexts()
			switch {
			case tt.announce == "" && len(posts) > 0:
				t.Errorf("posted %q; want nothing in the channel", posts)
			case tt.announce != "" && (len(posts) != 1 || !strings.HasPrefix(posts[0], tt.channel+": ") || !strings.Contains(posts[0], tt.announce)):
				t.Errorf("posted %q; want one post in %s with %q", posts, tt.channel, tt.announce)
			}
			audited := strings.Contains(r.logs.String(), "action=agent_added")
			if wantAudit := strings.HasPrefix(tt.want, "Added") || tt.name == "a bot outside the channel is warned"; audited != wantAudit {
				t.Errorf("audit record written: %v, want %v\n%s", audited, wantAudit, r.logs)
			}
		})
	}
}

// With slack.admins empty (the default), only the workspace's admins and
// owners, as users.info says, may add and remove agents; Slack is asked
// each time.
func TestAgentsAddedByWorkspaceAdminsByDefault(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{workspaceRoles: true})
	const refusal = "Only the workspace's admins and owners can add agents (slack.admins is empty); nothing changed."
	checkReply(t, r.command(t, "U2", "C1", "/add-agent "+claudine), refusal)
	if got := r.registered(t, "C1"); !slices.Equal(got, []string{elen}) {
		t.Errorf("agents after a member's /add-agent = %v", got)
	}
	if !strings.Contains(r.logs.String(), "reason=\"not an admin\"") {
		t.Errorf("the refusal is not logged:\n%s", r.logs)
	}
	checkReply(t, r.command(t, "U4", "C1", "/add-agent "+claudine), "Added Claudine")
	checkReply(t, r.command(t, "U2", "C1", "/remove-agent "+claudine),
		"Only the workspace's admins and owners can remove agents (slack.admins is empty); nothing changed.")
	checkReply(t, r.command(t, "U5", "C1", "/remove-agent "+claudine), "Removed `"+claudine+"`")
	if got := r.registered(t, "C1"); !slices.Equal(got, []string{elen}) {
		t.Errorf("agents at the end = %v", got)
	}
	if n := len(r.fake.CallsTo("users.info")); n < 4 {
		t.Errorf("users.info called %d times, want once per command at least", n)
	}
	// ["*"] opens it to everyone.
	open := newCommandRig(t, commandRigOptions{admins: []string{pairing.Everyone}})
	checkReply(t, open.command(t, "U2", "C1", "/add-agent "+claudine), "Added Claudine")
}

func TestAddAgentAuditRecord(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{})
	r.command(t, "U2", "C1", "/add-agent "+claudine)
	var line string
	for _, l := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(l, "msg=audit") {
			line = l
		}
	}
	for _, want := range []string{"action=agent_added", " user=U2 ", "user_name=bob", "channel=C1", "agent=" + claudine, "role=expert", " at="} {
		if !strings.Contains(line, want) {
			t.Errorf("audit record %q lacks %s", line, want)
		}
	}
}

func TestRemoveAgent(t *testing.T) {
	tests := []struct {
		name     string
		admins   []string
		user     string
		line     string
		want     string
		left     []string
		announce string
	}{
		{"by name", nil, "U2", "/remove-agent " + claudine, "Removed `" + claudine + "` from this channel.",
			[]string{elen}, "<@U2> removed `" + claudine + "` from this channel."},
		{"by token", nil, "U2", "/remove-agent " + testCollection + " 7", "Removed `" + claudine + "`", []string{elen}, "removed"},
		{"declared in the configuration", nil, "U2", "/remove-agent " + elen,
			"declared in conclave's configuration ([[channels]]) and cannot be removed at run time", []string{elen, claudine}, ""},
		{"absent", nil, "U2", "/remove-agent " + hugo, "`" + hugo + "` is not in this channel; nothing changed.", []string{elen, claudine}, ""},
		{"by someone not an admin", []string{"U1"}, "U2", "/remove-agent " + claudine, "Only conclave's admins", []string{elen, claudine}, ""},
		{"no argument", nil, "U2", "/remove-agent", "Usage: /remove-agent", []string{elen, claudine}, ""},
		{"bad token id", nil, "U2", "/remove-agent " + testCollection + " x", "Usage: /remove-agent", []string{elen, claudine}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newCommandRig(t, commandRigOptions{admins: tt.admins})
			if _, err := r.engine.AddAgent(testContext(t), "C1", claudine); err != nil {
				t.Fatal(err)
			}
			checkReply(t, r.command(t, tt.user, "C1", tt.line), tt.want)
			if got := r.registered(t, "C1"); !slices.Equal(got, tt.left) {
				t.Errorf("agents = %v, want %v", got, tt.left)
			}
			posts := r.postTexts()
			switch {
			case tt.announce == "" && len(posts) > 0:
				t.Errorf("posted %q; want nothing", posts)
			case tt.announce != "" && (len(posts) != 1 || !strings.Contains(posts[0], tt.announce)):
				t.Errorf("posted %q; want %q", posts, tt.announce)
			}
			if audited := strings.Contains(r.logs.String(), "action=agent_removed"); audited != (tt.announce != "") {
				t.Errorf("audit record written: %v\n%s", audited, r.logs)
			}
		})
	}
}

func TestAnnouncementsAreInert(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{})
	r.command(t, "U2", "C2", "/add-agent "+iris)
	posts := r.fake.Posts()
	if len(posts) != 1 {
		t.Fatalf("posts = %v", r.postTexts())
	}
	p := posts[0]
	if strings.Contains(p.Text, "<!channel>") || !strings.Contains(p.Text, "Iris &lt;!channel&gt;") {
		t.Errorf("an agent's name reached Slack as markup: %q", p.Text)
	}
	if p.UnfurlLinks != "false" || p.UnfurlMedia != "false" || p.Username != "" {
		t.Errorf("announcement: unfurl %q/%q, username %q", p.UnfurlLinks, p.UnfurlMedia, p.Username)
	}
}

var linkInReply = regexp.MustCompile(`<(https?://[^|>]+)\|`)

func TestVerifyWalletCommand(t *testing.T) {
	t.Run("not configured", func(t *testing.T) {
		r := newCommandRig(t, commandRigOptions{})
		checkReply(t, r.command(t, "U1", "C1", "/verify-wallet"), "wallet verification is not configured")
	})
	t.Run("arguments", func(t *testing.T) {
		r := newCommandRig(t, commandRigOptions{wallet: true})
		checkReply(t, r.command(t, "U1", "C1", "/verify-wallet 0xabc"), "Usage: /verify-wallet")
	})
	t.Run("link, sign, linked", func(t *testing.T) {
		r := newCommandRig(t, commandRigOptions{wallet: true})
		reply := r.command(t, "U1", "C1", "/verify-wallet")
		m := linkInReply.FindStringSubmatch(reply)
		if m == nil || !strings.HasPrefix(m[1], r.wallet.URL+"/wallet/") || !strings.Contains(reply, "10 minutes") {
			t.Fatalf("reply %q has no link to the wallet page", reply)
		}
		key := testKey(t, 1)
		addr := keyAddress(key).Hex()
		msg := fetchMessage(t, m[1], addr)
		for _, want := range []string{"ada (U1)", "fake (T0001)", "Nonce: " + strings.TrimPrefix(m[1], r.wallet.URL+"/wallet/")} {
			if !strings.Contains(msg, want) {
				t.Errorf("message lacks %q:\n%s", want, msg)
			}
		}
		if a := postSignature(t, m[1], addr, personalSign(t, key, msg)); a.status != http.StatusOK {
			t.Fatalf("verify: %d", a.status)
		}
		if ws, _ := r.store.Wallets(testContext(t), "U1"); !slices.Equal(ws, []string{addr}) {
			t.Errorf("wallets = %v", ws)
		}
		eph, err := r.fake.WaitEphemerals(testContext(t), 1)
		if err != nil || eph[0].User != "U1" || eph[0].Channel != "C1" || !strings.Contains(eph[0].Text, addr) {
			t.Errorf("notice = %+v, %v", eph, err)
		}
	})
}

func TestPairSlackUserToHumanAgent(t *testing.T) {
	owner1, owner2 := keyAddress(testKey(t, 1)).Hex(), keyAddress(testKey(t, 2)).Hex()
	const cmd = "/pair-slack-user-to-human-agent "
	tests := []struct {
		name    string
		wallets map[string][]string // verified wallets before
		before  [][2]string         // pairings before (user, agent)
		moved   string              // hugo's owner now, when it changed on chain
		user    string
		channel string
		line    string
		want    string
		paired  map[string]string // user → agent afterwards ("" for none)
		notice  string            // announced in the channel
		offered string            // the user sent an offer, who accepts it
		loser   string            // the user told in a DM that their pairing was replaced
	}{
		{name: "the owner pairs a user by id", wallets: map[string][]string{"U1": {owner1}}, user: "U1", channel: "C1",
			line: cmd + "U3 " + hugo, want: "Sent <@U3> an offer to pair with Hugo — human — `" + hugo + "`", offered: "U3",
			paired: map[string]string{"U3": hugo}, notice: "<@U1> paired <@U3> with the human agent Hugo"},
		{name: "the owner pairs themself by mention", wallets: map[string][]string{"U1": {owner2, owner1}}, user: "U1", channel: "C1",
			line: cmd + "<@U1|ada> " + hugo, want: "Paired <@U1>", paired: map[string]string{"U1": hugo}, notice: "paired <@U1>"},
		{name: "by token", wallets: map[string][]string{"U1": {owner1}}, user: "U1", channel: "C1",
			line: cmd + "W3 " + testCollection + " 8", want: "Sent <@W3> an offer", offered: "W3", paired: map[string]string{"W3": hugo}, notice: "paired <@W3>"},
		{name: "in a direct message: no announcement", wallets: map[string][]string{"U1": {owner1}}, user: "U1", channel: "D1",
			line: cmd + "U3 " + hugo, want: "Sent <@U3> an offer", offered: "U3", paired: map[string]string{"U3": hugo}},
		{name: "pairing again replaces, with a notice", wallets: map[string][]string{"U1": {owner1, owner2}},
			before: [][2]string{{"U3", iris}, {"U2", hugo}}, user: "U1", channel: "C1",
			line: cmd + "U3 " + hugo, want: "<@U3> was paired with `" + iris + "`; that pairing is replaced", offered: "U3", loser: "U2",
			paired: map[string]string{"U3": hugo, "U2": ""}, notice: "paired <@U3>"},
		{name: "the previous user is told too", wallets: map[string][]string{"U1": {owner1}},
			before: [][2]string{{"U2", hugo}}, user: "U1", channel: "C1",
			line: cmd + "U3 " + hugo, want: "`" + hugo + "` was paired with <@U2>; that pairing is replaced", offered: "U3", loser: "U2",
			paired: map[string]string{"U3": hugo, "U2": ""}, notice: "paired <@U3>"},
		{name: "the same pairing again", wallets: map[string][]string{"U1": {owner1}}, before: [][2]string{{"U3", hugo}},
			user: "U1", channel: "C1", line: cmd + "U3 " + hugo, want: "already paired", paired: map[string]string{"U3": hugo}},
		{name: "not the owner", wallets: map[string][]string{"U1": {owner2}}, user: "U1", channel: "C1",
			line: cmd + "U1 " + hugo, want: "none of your verified wallets owns it", paired: map[string]string{"U1": ""}},
		{name: "no verified wallet", user: "U1", channel: "C1",
			line: cmd + "U1 " + hugo, want: "run /verify-wallet first", paired: map[string]string{"U1": ""}},
		{name: "the owner changed on chain", wallets: map[string][]string{"U1": {owner1}}, moved: owner2, user: "U1", channel: "C1",
			line: cmd + "U1 " + hugo, want: "none of your verified wallets owns it", paired: map[string]string{"U1": ""}},
		{name: "not a human agent", wallets: map[string][]string{"U1": {owner1}}, user: "U1", channel: "C1",
			line: cmd + "U1 " + claudine, want: "is not a human agent", paired: map[string]string{"U1": ""}},
		{name: "unknown agent", wallets: map[string][]string{"U1": {owner1}}, user: "U1", channel: "C1",
			line: cmd + "U1 " + testCollection + " 99", want: "was found", paired: map[string]string{"U1": ""}},
		{name: "unknown user", wallets: map[string][]string{"U1": {owner1}}, user: "U1", channel: "C1",
			line: cmd + "U404 " + hugo, want: "no Slack user U404", paired: map[string]string{"U404": ""}},
		{name: "a bot", wallets: map[string][]string{"U1": {owner1}}, user: "U1", channel: "C1",
			line: cmd + "UB2 " + hugo, want: "is a bot", paired: map[string]string{"UB2": ""}},
		{name: "no arguments", user: "U1", channel: "C1", line: cmd, want: "Usage: /pair-slack-user-to-human-agent"},
		{name: "no agent", user: "U1", channel: "C1", line: cmd + "U3", want: "Usage: /pair-slack-user-to-human-agent"},
		{name: "a user name", user: "U1", channel: "C1", line: cmd + "@carol " + hugo, want: "Usage: /pair-slack-user-to-human-agent",
			paired: map[string]string{"U3": ""}},
		{name: "a channel", user: "U1", channel: "C1", line: cmd + "C1 " + hugo, want: "Usage: /pair-slack-user-to-human-agent"},
		{name: "a bad token", user: "U1", channel: "C1", line: cmd + "U3 " + testCollection + " 8 137 1",
			want: "Usage: /pair-slack-user-to-human-agent", paired: map[string]string{"U3": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newCommandRig(t, commandRigOptions{})
			ctx := testContext(t)
			for u, ws := range tt.wallets {
				for _, w := range ws {
					if err := r.store.LinkWallet(ctx, u, w); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, p := range tt.before {
				if _, _, err := r.store.PairHuman(ctx, p[0], p[1]); err != nil {
					t.Fatal(err)
				}
			}
			if tt.moved != "" {
				r.ids.transfer(hugo, tt.moved)
			}
			checkReply(t, r.command(t, tt.user, tt.channel, tt.line), tt.want)
			if tt.offered != "" {
				if got := r.press(t, tt.offered, tt.offered, "pairing_accept"); !got.ReplaceOriginal || !strings.HasPrefix(got.Text, "You accepted") {
					t.Errorf("answer to Accept = %+v", got)
				}
			} else if len(r.dms(tt.user)) > 0 || len(r.fake.CommandResponses()) > 1 {
				t.Errorf("an offer was sent: %v", r.fake.Posts())
			}
			for u, want := range tt.paired {
				got, err := r.engine.PairedAgent(ctx, u)
				if err != nil || got != want {
					t.Errorf("%s is paired with %q (%v), want %q", u, got, err, want)
				}
			}
			posts := r.postTexts()
			switch {
			case tt.notice == "" && len(posts) > 0:
				t.Errorf("posted %q; want nothing", posts)
			case tt.notice != "" && (len(posts) != 1 || !strings.HasPrefix(posts[0], tt.channel+": ") || !strings.Contains(posts[0], tt.notice)):
				t.Errorf("posted %q; want %q", posts, tt.notice)
			}
			for _, u := range []string{"U1", "U2", "U3", "W3"} {
				if lost := len(r.dms(u)) > 0 && u != tt.offered; lost != (u == tt.loser) {
					t.Errorf("%s was told of a lost pairing: %v, want %v: %v", u, lost, u == tt.loser, r.dms(u))
				}
			}
			wantAudit := tt.notice != "" || strings.HasPrefix(tt.name, "in a direct message")
			if audited := strings.Contains(r.logs.String(), "action=human_paired"); audited != wantAudit {
				t.Errorf("audit record written: %v\n%s", audited, r.logs)
			}
		})
	}
}

// The ownership check reads the owner on every pairing decision (the
// offer, its acceptance, the next offer), never from what was resolved
// before.
func TestPairingReadsTheOwnerEachTime(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{})
	ctx := testContext(t)
	if err := r.store.LinkWallet(ctx, "U1", keyAddress(testKey(t, 1)).Hex()); err != nil {
		t.Fatal(err)
	}
	const line = "/pair-slack-user-to-human-agent U3 " + hugo
	checkReply(t, r.command(t, "U1", "C1", line), "Sent <@U3> an offer")
	checkReply(t, r.press(t, "U3", "U3", "pairing_accept").Text, "You accepted: you are now paired with Hugo")
	r.ids.transfer(hugo, keyAddress(testKey(t, 2)).Hex())
	checkReply(t, r.command(t, "U1", "C1", "/pair-slack-user-to-human-agent U2 "+hugo), "none of your verified wallets owns it")
	r.ids.mu.Lock()
	reads := r.ids.ownerReads
	r.ids.mu.Unlock()
	if reads != 3 {
		t.Errorf("owner read %d times, want once per decision (offer, acceptance, offer)", reads)
	}
	if got, _ := r.engine.PairedUser(ctx, hugo); got != "U3" {
		t.Errorf("hugo is paired with %q, want U3 still", got)
	}
}

// A look-up that fails past the name gets a short reason in Slack: never
// the gateway's or the chain's address, port or dial error, which the log
// keeps.
func TestLookupFailuresGiveAShortReason(t *testing.T) {
	const gw = "ens: resolve %q: text(role) on resolver 0x0000000000000000000000000000000000000001: CCIP-Read gateway: 10.0.0.7:8443: %w: dial tcp 10.0.0.7:8443: connection refused"
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"gateway refused", fmt.Errorf(gw, ghost, ens.ErrGatewayRefused), "Could not look up `" + ghost + "`: gateway refused."},
		{"gateway unreachable", fmt.Errorf(gw, ghost, ens.ErrGatewayUnreachable), "Could not look up `" + ghost + "`: gateway unreachable."},
		{"RPC down", fmt.Errorf("ens: resolve %q: agentRef on chain 137: Post \"https://rpc.internal:8545/…\": dial tcp 10.0.0.9:8545: i/o timeout", ghost),
			"Could not look up `" + ghost + "`: the chain could not be read right now."},
		{"too slow", fmt.Errorf("ens: resolve %q: agentRef on chain 137: %w", ghost, context.DeadlineExceeded),
			"Could not look up `" + ghost + "`: the chain did not answer in time."},
	}
	for _, tt := range tests {
		for _, line := range []string{"/add-agent " + ghost, "/pair-slack-user-to-human-agent U3 " + ghost} {
			t.Run(tt.name+" "+strings.Fields(line)[0], func(t *testing.T) {
				r := newCommandRig(t, commandRigOptions{})
				r.ids.failures = map[string]error{ghost: tt.err}
				got := r.command(t, "U1", "C1", line)
				if got != tt.want {
					t.Errorf("reply %q, want %q", got, tt.want)
				}
				if !strings.Contains(r.logs.String(), "10.0.0.") && !strings.Contains(r.logs.String(), "deadline") {
					t.Errorf("the log lacks the detail:\n%s", r.logs)
				}
			})
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{})
	checkReply(t, r.command(t, "U1", "C1", "/conclave-dance now"), "does not know the command /conclave-dance")
}

func TestCommandArgs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"  a   b\tc ", []string{"a", "b", "c"}},
		{"<http://x.eth|x.eth>", []string{"x.eth"}},
		{"<https://x.eth/>", []string{"x.eth"}},
		{"<@U1|ada> x.eth", []string{"<@U1|ada>", "x.eth"}},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := commandArgs(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("commandArgs(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
