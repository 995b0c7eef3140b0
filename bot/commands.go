package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/slack-go/slack"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/pairing"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/internal/clip"
)

// Registry is the run-time registry of agents per channel (the engine).
type Registry interface {
	// ChannelAgents lists a channel's agents: facilitator, experts, clones,
	// humans, then by ENS name.
	ChannelAgents(ctx context.Context, channel string) ([]agents.ChannelAgent, error)
	// AddAgent resolves name and registers it in channel. Errors wrap
	// agents.ErrAgentPresent, agents.ErrSecondFacilitator, or the
	// resolver's ens.ErrNotFound and ens.ErrInvalidName.
	AddAgent(ctx context.Context, channel, name string) (ens.Agent, error)
	// RemoveAgent unregisters an agent added at run time. Errors wrap
	// agents.ErrStaticAgent or agents.ErrAgentAbsent.
	RemoveAgent(ctx context.Context, channel, name string) error
}

// Identities resolves agents (the ens Directory).
type Identities interface {
	// Resolve returns the agent behind name; errors wrap ens.ErrNotFound
	// or ens.ErrInvalidName where they apply.
	Resolve(ctx context.Context, name string) (ens.Agent, error)
	// ResolveToken names and reads the agent minted as tokenID of a
	// configured collection (chainID 0: the one it is configured on).
	ResolveToken(ctx context.Context, chainID uint64, collection string, tokenID *big.Int) (ens.Agent, error)
}

// CommandOptions configure Commands.
type CommandOptions struct {
	// Admins may add and remove agents (slack.admins; the rule is
	// pairing.Admins').
	Admins pairing.Admins
	Logger *slog.Logger
}

// commandTimeout bounds the handling of one command, chain look-ups
// included.
const commandTimeout = 30 * time.Second

// CommandDeps are what the commands act on.
type CommandDeps struct {
	Registry   Registry
	Identities Identities
	Pairing    *pairing.Pairing // the pairing rules, over the store and Identities
	Wallet     *WalletVerifier
	// Feedback records presses of posts' 👍/👎 buttons (nil: ignored).
	Feedback FeedbackRecorder
}

// FeedbackRecorder records a press of a post's feedback buttons
// (agents.Engine.RecordFeedback): ref is what the post's buttons carry.
type FeedbackRecorder interface {
	RecordFeedback(ctx context.Context, ref, user, value string) error
}

// Commands answers conclave's slash commands: /add-agent, /remove-agent,
// /list-agents, /verify-wallet and /pair-slack-user-to-human-agent.
// Replies are ephemeral; additions, removals and pairings are also
// announced in the channel and logged as audit records.
type Commands struct {
	web  *WebAPI
	opts CommandOptions
	deps CommandDeps
	log  *slog.Logger
}

var _ CommandHandler = (*Commands)(nil)

// NewCommands returns the command handler, to give bot.New; it answers
// through web.
func NewCommands(web *WebAPI, opts CommandOptions, deps CommandDeps) *Commands {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Commands{web: web, opts: opts, deps: deps, log: opts.Logger.With(slog.String("component", "commands"))}
}

// Usage lines, one per command.
const (
	usageAdd    = "Usage: /add-agent <ens-name>, or /add-agent <collection-address> <token-id> [chain-id]"
	usageRemove = "Usage: /remove-agent <ens-name>, or /remove-agent <collection-address> <token-id> [chain-id]"
	usageList   = "Usage: /list-agents (no arguments)"
	usageVerify = "Usage: /verify-wallet (no arguments)"
	usagePair   = "Usage: /pair-slack-user-to-human-agent <@user | U…> <ens-name | collection-address token-id [chain-id]>"
)

// Log attribute keys of the commands and the wallet page.
const (
	logUser   = "user"
	logAgent  = "agent"
	logRole   = "role"
	logAction = "action"
)

// Audit actions.
const (
	auditAdded   = "agent_added"
	auditRemoved = "agent_removed"
	auditPaired  = "human_paired"
	auditOffered = "pairing_offered"
	auditDecline = "pairing_declined"
)

// HandleCommand answers one slash command. Failures are told to the person
// who typed it and logged.
func (c *Commands) HandleCommand(ctx context.Context, cmd slack.SlashCommand) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	args := commandArgs(cmd.Text)
	var reply string
	switch cmd.Command {
	case "/add-agent":
		reply = c.addAgent(ctx, cmd, args)
	case "/remove-agent":
		reply = c.removeAgent(ctx, cmd, args)
	case "/list-agents":
		reply = c.listAgents(ctx, cmd, args)
	case "/verify-wallet":
		reply = c.verifyWallet(ctx, cmd, args)
	case "/pair-slack-user-to-human-agent":
		reply = c.pair(ctx, cmd, args)
	default:
		reply = "conclave does not know the command " + escapeSlack(cmd.Command) + "."
	}
	if err := c.web.ReplyToCommand(ctx, cmd, reply); err != nil {
		c.log.Warn("command reply not delivered", slog.String("command", cmd.Command),
			slog.String(logUser, cmd.UserID), slog.Any(logError, err))
	}
}

// commandArgs splits a command's text into words, unwrapping Slack's link
// markup: <http://x.eth|x.eth> becomes x.eth, <@U1|ada> stays as it is.
func commandArgs(text string) []string {
	words := strings.Fields(text)
	for i, w := range words {
		if !strings.HasPrefix(w, "<") || !strings.HasSuffix(w, ">") || strings.HasPrefix(w, "<@") {
			continue
		}
		inner := w[1 : len(w)-1]
		if _, label, ok := strings.Cut(inner, "|"); ok {
			words[i] = label
			continue
		}
		for _, scheme := range []string{"http://", "https://"} {
			inner = strings.TrimPrefix(inner, scheme)
		}
		words[i] = strings.TrimSuffix(inner, "/")
	}
	return words
}

// agentRef is how a command names an agent: by ENS name, or by token.
type agentRef struct {
	name       string
	chainID    uint64
	collection string
	tokenID    *big.Int
}

func (r agentRef) String() string {
	if r.name != "" {
		return r.name
	}
	s := r.collection + " #" + r.tokenID.String()
	if r.chainID != 0 {
		s += " on chain " + strconv.FormatUint(r.chainID, 10)
	}
	return s
}

// parseAgentRef reads "<ens-name>" or "<collection-address> <token-id>
// [chain-id]"; the reason is empty when the words are well formed.
func parseAgentRef(args []string) (agentRef, string) {
	switch {
	case len(args) == 0:
		return agentRef{}, "name an agent"
	case len(args) > 3:
		return agentRef{}, "too many arguments"
	case len(args) == 1:
		if strings.HasPrefix(strings.ToLower(args[0]), "0x") {
			return agentRef{}, "a collection address needs a token id after it"
		}
		if !strings.Contains(args[0], ".") {
			return agentRef{}, fmt.Sprintf("%q is not a full ENS name", args[0])
		}
		return agentRef{name: strings.ToLower(args[0])}, ""
	}
	if !common.IsHexAddress(args[0]) || !strings.HasPrefix(strings.ToLower(args[0]), "0x") {
		return agentRef{}, fmt.Sprintf("%q is not a collection address", args[0])
	}
	id, ok := new(big.Int).SetString(args[1], 10)
	if !ok || id.Sign() < 0 {
		return agentRef{}, fmt.Sprintf("%q is not a token id (a whole number)", args[1])
	}
	ref := agentRef{collection: common.HexToAddress(args[0]).Hex(), tokenID: id}
	if len(args) == 3 {
		chain, err := strconv.ParseUint(args[2], 10, 64)
		if err != nil || chain == 0 {
			return agentRef{}, fmt.Sprintf("%q is not a chain id", args[2])
		}
		ref.chainID = chain
	}
	return ref, ""
}

// maxReason bounds the reason of a usage reply, which may quote what was
// typed (a pasted page of text is not echoed back whole).
const maxReason = 300

// usage is a one-line usage reply with the reason the arguments failed.
func usage(line, reason string) string {
	if reason == "" {
		return line
	}
	reason = clip.Runes(reason, maxReason, "…")
	return line + " (" + escapeSlack(reason) + ")"
}

// resolveRef resolves an agent named either way.
func (c *Commands) resolveRef(ctx context.Context, ref agentRef) (ens.Agent, error) {
	if ref.name != "" {
		return c.deps.Identities.Resolve(ctx, ref.name)
	}
	return c.deps.Identities.ResolveToken(ctx, ref.chainID, ref.collection, ref.tokenID)
}

// nameOf is the ENS name of an agent named either way; a token is
// resolved to its name. failure is the reply when that fails.
func (c *Commands) nameOf(ctx context.Context, ref agentRef) (name, failure string) {
	if ref.name != "" {
		return ref.name, ""
	}
	a, err := c.resolveRef(ctx, ref)
	if err != nil {
		return "", c.lookupFailure(ref, err)
	}
	return a.EnsDomain, ""
}

// lookupFailure explains why an agent could not be found. Past the name
// itself, it gives a reason class only: chain and gateway errors carry
// URLs, addresses and dial errors, which stay in the log.
func (c *Commands) lookupFailure(ref agentRef, err error) string {
	switch {
	case errors.Is(err, ens.ErrNotFound):
		return "No agent " + code(ref.String()) + " was found."
	case errors.Is(err, ens.ErrInvalidName):
		return code(ref.String()) + " is not a valid agent name: " + escapeSlack(err.Error())
	}
	c.log.Warn("agent look-up failed", slog.String(logAgent, ref.String()), slog.Any(logError, err))
	return "Could not look up " + code(ref.String()) + ": " + lookupReason(err) + "."
}

// lookupReason is the short reason a Slack user is given for a failed
// identity look-up (SPEC §12.2).
func lookupReason(err error) string {
	switch {
	case errors.Is(err, ens.ErrGatewayRefused):
		return ens.ErrGatewayRefused.Error()
	case errors.Is(err, ens.ErrGatewayUnreachable):
		return ens.ErrGatewayUnreachable.Error()
	case errors.Is(err, ens.ErrNoRPC):
		return "conclave has no RPC for its chain"
	case errors.Is(err, context.DeadlineExceeded):
		return "the chain did not answer in time"
	}
	return "the chain could not be read right now"
}

// code shows a name as inline code, so Slack does not link or format it.
func code(s string) string {
	return "`" + strings.ReplaceAll(escapeSlack(s), "`", "'") + "`"
}

// describe is how replies and announcements show an agent.
func describe(a ens.Agent) string {
	return escapeSlack(a.Name) + " — " + string(a.Role) + " — " + code(a.EnsDomain)
}

// adminOnly lets an admin go on with "" and refuses anyone else, logging
// the refusal; verb names what was asked ("add", "remove"). Who is an
// admin is pairing.Admins' rule; when it depends on the user's role in the
// workspace, Slack is asked (users.info), fresh each time.
func (c *Commands) adminOnly(ctx context.Context, cmd slack.SlashCommand, verb string) string {
	var workspaceAdmin bool
	if c.opts.Admins.WorkspaceRoles() {
		facts, failure := c.web.checkUser(ctx, cmd.UserID)
		if failure != "" {
			return failure
		}
		workspaceAdmin = facts.workspaceAdmin
	}
	if c.opts.Admins.May(cmd.UserID, workspaceAdmin) {
		return ""
	}
	c.refused(cmd, "not an admin")
	if c.opts.Admins.WorkspaceRoles() {
		return "Only the workspace's admins and owners can " + verb + " agents (slack.admins is empty); nothing changed."
	}
	return "Only conclave's admins (slack.admins) can " + verb + " agents; nothing changed."
}

// isDirect reports a command typed in a direct or group message.
func isDirect(cmd slack.SlashCommand) bool {
	return strings.HasPrefix(cmd.ChannelID, "D") || cmd.ChannelName == "directmessage" ||
		strings.HasPrefix(cmd.ChannelName, "mpdm-")
}

func (c *Commands) addAgent(ctx context.Context, cmd slack.SlashCommand, args []string) string {
	ref, bad := parseAgentRef(args)
	if bad != "" {
		return usage(usageAdd, bad)
	}
	if isDirect(cmd) {
		return "Agents can only be added to channels, not to direct messages."
	}
	if refusal := c.adminOnly(ctx, cmd, "add"); refusal != "" {
		return refusal
	}
	name, failure := c.nameOf(ctx, ref)
	if failure != "" {
		return failure
	}
	a, err := c.deps.Registry.AddAgent(ctx, cmd.ChannelID, name)
	switch {
	case errors.Is(err, agents.ErrAgentPresent):
		return describe(a) + " is already in this channel; nothing changed."
	case errors.Is(err, agents.ErrSecondFacilitator):
		return "This channel already has a facilitator" + c.facilitatorOf(ctx, cmd.ChannelID) +
			"; a channel has at most one. Nothing changed."
	case errors.Is(err, ens.ErrInvalidName):
		return usage(usageAdd, fmt.Sprintf("%q is not a valid agent name", name))
	case err != nil && a.EnsDomain == "":
		// The engine resolves the name first and returns no agent when
		// that fails.
		return c.lookupFailure(agentRef{name: name}, err)
	case err != nil:
		c.log.Error("add agent failed", slog.String(logChannel, cmd.ChannelID), slog.String(logAgent, name), slog.Any(logError, err))
		return "Could not add " + code(name) + " right now; try again in a moment."
	}
	c.audit(ctx, cmd, auditAdded, slog.String(logAgent, a.EnsDomain), slog.String(logRole, string(a.Role)))
	reply := "Added " + describe(a) + " to this channel."
	member, err := c.web.botInChannel(ctx, cmd.ChannelID)
	if err != nil {
		c.log.Warn("could not tell whether conclave is in the channel", slog.String(logChannel, cmd.ChannelID), slog.Any(logError, err))
	}
	if err == nil && !member {
		return reply + "\n⚠️ conclave is not a member of this channel, so it cannot read or answer messages here: invite it with `/invite @" +
			escapeSlack(c.web.botName(ctx)) + "`."
	}
	c.announce(ctx, cmd.ChannelID, "<@"+cmd.UserID+"> added "+describe(a)+" to this channel.")
	return reply
}

// facilitatorOf names a channel's facilitator for a refusal, or "".
func (c *Commands) facilitatorOf(ctx context.Context, channel string) string {
	list, err := c.deps.Registry.ChannelAgents(ctx, channel)
	if err != nil {
		return ""
	}
	for _, ca := range list {
		if ca.Err == nil && ca.Agent.Role == ens.RoleFacilitator {
			return " (" + escapeSlack(ca.Agent.Name) + ", " + code(ca.Agent.EnsDomain) + ")"
		}
	}
	return ""
}

func (c *Commands) removeAgent(ctx context.Context, cmd slack.SlashCommand, args []string) string {
	ref, bad := parseAgentRef(args)
	if bad != "" {
		return usage(usageRemove, bad)
	}
	if refusal := c.adminOnly(ctx, cmd, "remove"); refusal != "" {
		return refusal
	}
	name, failure := c.nameOf(ctx, ref)
	if failure != "" {
		return failure
	}
	err := c.deps.Registry.RemoveAgent(ctx, cmd.ChannelID, name)
	switch {
	case errors.Is(err, agents.ErrStaticAgent):
		return code(name) + " is declared in conclave's configuration ([[channels]]) and cannot be removed at run time; nothing changed."
	case errors.Is(err, agents.ErrAgentAbsent):
		return code(name) + " is not in this channel; nothing changed."
	case err != nil:
		c.log.Error("remove agent failed", slog.String(logChannel, cmd.ChannelID), slog.String(logAgent, name), slog.Any(logError, err))
		return "Could not remove " + code(name) + " right now; try again in a moment."
	}
	c.audit(ctx, cmd, auditRemoved, slog.String(logAgent, name))
	c.announce(ctx, cmd.ChannelID, "<@"+cmd.UserID+"> removed "+code(name)+" from this channel.")
	return "Removed " + code(name) + " from this channel."
}

func (c *Commands) listAgents(ctx context.Context, cmd slack.SlashCommand, args []string) string {
	if len(args) > 0 {
		return usage(usageList, "it takes no arguments")
	}
	list, err := c.deps.Registry.ChannelAgents(ctx, cmd.ChannelID)
	if err != nil {
		c.log.Error("list agents failed", slog.String(logChannel, cmd.ChannelID), slog.Any(logError, err))
		return "Could not list the agents right now; try again in a moment."
	}
	if len(list) == 0 {
		return "No agents in this channel."
	}
	return callHint + "\n" + agentLines(list)
}

// callHint heads a list of agents: only an agent's full name calls it.
const callHint = "To call an agent, write its full name, as shown in code (copy it); a short name such as the first word calls no one."

func (c *Commands) verifyWallet(ctx context.Context, cmd slack.SlashCommand, args []string) string {
	if len(args) > 0 {
		return usage(usageVerify, "it takes no arguments")
	}
	if c.deps.Wallet == nil || !c.deps.Wallet.Configured() {
		return "Sorry, wallet verification is not configured: conclave's http.public_url is not set."
	}
	link, err := c.deps.Wallet.Issue(ctx, WalletRequest{
		UserID: cmd.UserID, UserName: cmd.UserName, TeamID: cmd.TeamID, TeamName: cmd.TeamDomain, Channel: cmd.ChannelID,
	})
	if err != nil {
		c.log.Error("wallet link not issued", slog.String(logUser, cmd.UserID), slog.Any(logError, err))
		return "Could not create a verification link right now; try again in a moment."
	}
	return fmt.Sprintf("Open <%s|this link> within %d minutes to link an Ethereum wallet to your Slack account. "+
		"Your browser wallet signs a message there; it costs nothing. The link works once: do not share it.", link, int(pairing.WalletLinkTTL/time.Minute))
}

// slackUserArg reads U…, W…, <@U…> or <@U…|name>.
var slackUserArg = regexp.MustCompile(`^(?:<@(` + userIDPattern + `)(?:\|[^>]*)?>|(` + userIDPattern + `))$`)

func (c *Commands) pair(ctx context.Context, cmd slack.SlashCommand, args []string) string {
	if len(args) < 2 {
		return usage(usagePair, "name a Slack user and a human agent")
	}
	m := slackUserArg.FindStringSubmatch(args[0])
	if m == nil {
		return usage(usagePair, fmt.Sprintf("%q is not a Slack user", args[0]))
	}
	user := m[1] + m[2]
	ref, bad := parseAgentRef(args[1:])
	if bad != "" {
		return usage(usagePair, bad)
	}
	facts, reason := c.web.checkUser(ctx, user)
	if reason != "" {
		return reason
	}
	a, err := c.resolveRef(ctx, ref)
	if err != nil {
		return c.lookupFailure(ref, err)
	}
	announceIn := cmd.ChannelID
	if isDirect(cmd) {
		announceIn = "" // nothing is announced in a direct message
	}
	out, err := c.deps.Pairing.Request(ctx, pairing.Request{
		Caller: cmd.UserID, User: user, UserBot: facts.isBot, Team: cmd.TeamID, Channel: announceIn, Agent: a,
	})
	if refusal := c.pairingRefusal(cmd, user, a, err); refusal != "" {
		return refusal
	}
	switch out.Kind {
	case pairing.AlreadyPaired:
		return "<@" + user + "> is already paired with " + describe(a) + "; nothing changed."
	case pairing.Offered:
		if err := c.web.sendPairingOffer(ctx, out.Offer, a); err != nil {
			c.log.Warn("pairing offer not delivered", slog.String(logUser, user), slog.String(logAgent, a.EnsDomain), slog.Any(logError, err))
			if err := c.deps.Pairing.Withdraw(ctx, out.Offer.ID); err != nil {
				c.log.Warn("pairing offer not withdrawn", slog.Any(logError, err))
			}
			return "Could not send <@" + user + "> the offer right now; nothing changed."
		}
		c.audit(ctx, cmd, auditOffered, slog.String(logAgent, a.EnsDomain), slog.String("paired_user", user),
			slog.String("offer", out.Offer.ID))
		reply := "Sent <@" + user + "> an offer to pair with " + describe(a) +
			": the pairing starts when they accept it (within 24 hours)."
		return reply + replacementNotes(user, a.EnsDomain, out.Replaced, " if they accept")
	}
	c.audit(ctx, cmd, auditPaired, slog.String(logAgent, a.EnsDomain), slog.String("paired_user", user),
		slog.String("replaced_agent", out.Replaced.Agent), slog.String("replaced_user", out.Replaced.User))
	c.tellLoser(ctx, out.Replaced.User, a)
	if announceIn != "" {
		c.announce(ctx, announceIn, "<@"+cmd.UserID+"> paired <@"+user+"> with the human agent "+describe(a)+".")
	}
	return "Paired <@" + user + "> with " + describe(a) + ": their messages now count as the agent's." +
		replacementNotes(user, a.EnsDomain, out.Replaced, "")
}

// pairingRefusal renders a pairing the rules refused ("" when err is nil).
func (c *Commands) pairingRefusal(cmd slack.SlashCommand, user string, a ens.Agent, err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, pairing.ErrNotPerson):
		return "<@" + user + "> is a bot; only people can be paired with human agents. Nothing changed."
	case errors.Is(err, pairing.ErrNotHuman):
		return describe(a) + " is not a human agent; only human agents are paired with Slack users. Nothing changed."
	case errors.Is(err, pairing.ErrNoWallet):
		c.refused(cmd, "not the owner", slog.String(logAgent, a.EnsDomain))
		return "Only the owner of " + code(a.EnsDomain) + " can pair it, and you have no verified wallet: run /verify-wallet first. Nothing changed."
	case errors.Is(err, pairing.ErrNotOwner):
		c.refused(cmd, "not the owner", slog.String(logAgent, a.EnsDomain))
		return "Only the owner of " + code(a.EnsDomain) + " can pair it, and none of your verified wallets owns it. Nothing changed."
	case errors.Is(err, pairing.ErrOwnerUnknown):
		c.log.Warn("owner look-up failed", slog.String(logAgent, a.EnsDomain), slog.Any(logError, err))
		return "Could not read who owns " + code(a.EnsDomain) + " right now: " + lookupReason(err) + "."
	}
	c.log.Error("pairing failed", slog.String(logUser, cmd.UserID), slog.String(logAgent, a.EnsDomain), slog.Any(logError, err))
	return "Could not save the pairing right now; try again in a moment."
}

// replacementNotes tell what a pairing of user and agent lets go; when
// is appended to each note (" if they accept" for an offer).
func replacementNotes(user, agent string, r pairing.Replaced, when string) string {
	var notes string
	if r.Agent != "" {
		notes += "\nNote: <@" + user + "> was paired with " + code(r.Agent) + "; that pairing is replaced" + when + "."
	}
	if r.User != "" {
		notes += "\nNote: " + code(agent) + " was paired with <@" + r.User + ">; that pairing is replaced" + when + "."
	}
	return notes
}

// tellLoser tells a user, in a direct message, that their pairing with a
// was replaced; a failure is only logged.
func (c *Commands) tellLoser(ctx context.Context, user string, a ens.Agent) {
	if user == "" {
		return
	}
	text := "You are no longer paired with the human agent " + describe(a) + ": it was paired with someone else."
	if err := c.web.postNotice(ctx, user, text); err != nil {
		c.log.Warn("replaced pairing not told", slog.String(logUser, user), slog.Any(logError, err))
	}
}

// audit logs who did what, where and when.
func (c *Commands) audit(ctx context.Context, cmd slack.SlashCommand, action string, attrs ...slog.Attr) {
	base := []slog.Attr{
		slog.String(logAction, action), slog.String(logUser, cmd.UserID), slog.String("user_name", cmd.UserName),
		slog.String("team", cmd.TeamID), slog.String(logChannel, cmd.ChannelID), slog.Time("at", time.Now()),
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "audit", append(base, attrs...)...)
}

// refused logs a command refused for lack of rights.
func (c *Commands) refused(cmd slack.SlashCommand, why string, attrs ...slog.Attr) {
	base := []slog.Attr{
		slog.String("command", cmd.Command), slog.String(logUser, cmd.UserID), slog.String(logChannel, cmd.ChannelID),
		slog.String("reason", why),
	}
	c.log.LogAttrs(context.Background(), slog.LevelWarn, "command refused", append(base, attrs...)...)
}

// announce tells the channel what changed; a failure is only logged (the
// person who ran the command got the reply).
func (c *Commands) announce(ctx context.Context, channel, text string) {
	if err := c.web.postNotice(ctx, channel, text); err != nil {
		c.log.Warn("announcement not posted", slog.String(logChannel, channel), slog.Any(logError, err))
	}
}

// postNotice posts conclave's own mrkdwn text in a channel, as the bot,
// with unfurling off. The text is sent as it is: callers escape what they
// did not write.
func (w *WebAPI) postNotice(ctx context.Context, channel, text string) error {
	err := w.call(ctx, "chat.postMessage", false, func(ctx context.Context) error {
		_, _, err := w.api.PostMessageContext(ctx, channel,
			slack.MsgOptionText(text, false), slack.MsgOptionLinkNames(false),
			slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
		return err
	})
	if err != nil {
		return fmt.Errorf("bot: notice in %s: %w", channel, err)
	}
	return nil
}

// botInChannel asks Slack, uncached, whether conclave is a member of a
// channel. A private channel it cannot see counts as not a member.
func (w *WebAPI) botInChannel(ctx context.Context, channel string) (bool, error) {
	var ch *slack.Channel
	err := w.call(ctx, "conversations.info", true, func(ctx context.Context) (err error) {
		ch, err = w.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: channel})
		return err
	})
	if errorCode(err) == "channel_not_found" {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bot: channel %s: %w", channel, err)
	}
	return ch.IsMember, nil
}

// botName is conclave's user name in Slack, for "/invite @name".
func (w *WebAPI) botName(ctx context.Context) string {
	if name, ok := w.names.userName(ctx, w.identity().UserID); ok {
		return name
	}
	return "conclave"
}

// userFacts are what the commands ask Slack of a user.
type userFacts struct {
	isBot          bool
	workspaceAdmin bool // an admin or owner of the workspace
}

// checkUser looks a user up: whether it is a bot and whether a workspace
// admin or owner, or why it cannot be looked up (unknown, or Slack
// unreachable), as a reply.
func (w *WebAPI) checkUser(ctx context.Context, id string) (userFacts, string) {
	var u *slack.User
	err := w.call(ctx, "users.info", true, func(ctx context.Context) (err error) {
		u, err = w.api.GetUserInfoContext(ctx, id)
		return err
	})
	switch {
	case errorCode(err) == "user_not_found":
		return userFacts{}, "There is no Slack user " + id + " in this workspace; nothing changed."
	case err != nil:
		w.log.Warn("users.info failed", slog.String(logUser, id), slog.Any(logError, err))
		return userFacts{}, "Could not look up the Slack user " + id + " right now; try again in a moment."
	}
	return userFacts{isBot: u.IsBot, workspaceAdmin: u.IsAdmin || u.IsOwner || u.IsPrimaryOwner}, ""
}
