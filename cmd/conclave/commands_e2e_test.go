package main

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/conclavehq/conclave/agents/llm/llmfake"
	"github.com/conclavehq/conclave/bot/fakeslack"
)

const (
	testAdmin   = testPerson // may add and remove agents
	testOutside = "U0002"    // may not
	hugoENS     = "hugo.acme.137.protocol6022.eth"
	publicURL   = "https://conclave.example.test"
)

// TestCommandsEndToEnd drives the slash commands and the wallet page
// through the real `conclave run` wiring: an admin adds an agent, an
// outsider is refused, a wallet is verified on the page served by conclave
// (a forged and a replayed signature refused), the owner of a human agent
// pairs themself with it, and their next message counts as the agent's.
func TestCommandsEndToEnd(t *testing.T) {
	key, err := crypto.ToECDSA(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	owner := crypto.PubkeyToAddress(key.PublicKey).Hex()
	r := newRig(t, fakeslack.Options{Users: []fakeslack.User{{ID: testOutside, Name: "bob", RealName: "Bob Stone"}}})
	r.llm.Reply(llmfake.Text("Welcome, Hugo."))
	path := r.config(t, `
[[agents]]
ens = "`+claudineENS+`"
name = "Claudine"
role = "expert"

[[agents]]
ens = "`+hugoENS+`"
name = "Hugo"
role = "human"
owner = "`+owner+`"
`)
	rewrite(t, path, "[slack]\n", "[slack]\nadmins = [\""+testAdmin+"\"]\n")
	rewrite(t, path, "[http]\n", "[http]\npublic_url = \""+publicURL+"\"\n")
	p := start(t, path, nil)
	want := func(t *testing.T, got, want string) {
		t.Helper()
		if !strings.Contains(got, want) {
			t.Errorf("reply %q lacks %q", got, want)
		}
	}

	t.Run("agents", func(t *testing.T) {
		want(t, r.command(t, p, testOutside, "/add-agent "+claudineENS), "Only conclave's admins")
		want(t, r.command(t, p, testAdmin, "/add-agent "+claudineENS+" extra words here"), "Usage: /add-agent")
		want(t, r.command(t, p, testAdmin, "/add-agent "+claudineENS), "Added Claudine — expert")
		want(t, r.command(t, p, testAdmin, "/remove-agent "+elenENS), "cannot be removed at run time")
		list := r.command(t, p, testOutside, "/list-agents")
		if list != "To call an agent, write its full name, as shown in code (copy it); a short name such as the first word calls no one.\n"+
			"Elen — facilitator — `"+elenENS+"`\nClaudine — expert — `"+claudineENS+"`" {
			t.Errorf("list:\n%s", list)
		}
		posts := r.slack.Posts()
		if len(posts) != 1 || posts[0].Channel != testChannel || !strings.Contains(posts[0].Text, "<@"+testAdmin+"> added Claudine") {
			t.Errorf("announcements: %+v", posts)
		}
		if !strings.Contains(p.logs.String(), `"action":"agent_added"`) {
			t.Error("no audit record of the addition")
		}
	})

	t.Run("wallet and pairing", func(t *testing.T) {
		want(t, r.command(t, p, testAdmin, "/pair-slack-user-to-human-agent "+testAdmin+" "+hugoENS), "run /verify-wallet first")
		reply := r.command(t, p, testAdmin, "/verify-wallet")
		m := regexp.MustCompile(`<` + regexp.QuoteMeta(publicURL) + `(/wallet/[0-9a-f]+)\|`).FindStringSubmatch(reply)
		if m == nil {
			t.Fatalf("no wallet link in %q", reply)
		}
		page := "http://" + p.addr + m[1]
		if status, _ := fetch(t, http.MethodGet, page, nil); status != http.StatusOK {
			t.Fatalf("wallet page: %d", status)
		}
		status, body := fetch(t, http.MethodGet, page+"/message?address="+strings.ToLower(owner), nil)
		msg, _ := body["message"].(string)
		if status != http.StatusOK || !strings.HasPrefix(msg, "conclave.example.test wants you to sign in with your Ethereum account:\n"+owner+"\n") {
			t.Fatalf("message: %d %q", status, msg)
		}
		forger, _ := crypto.ToECDSA(bytes.Repeat([]byte{8}, 32))
		if status, body := fetch(t, http.MethodPost, page, map[string]string{"address": owner, "signature": sign(t, forger, msg)}); status != http.StatusForbidden {
			t.Errorf("forged signature: %d %v", status, body)
		}
		good := map[string]string{"address": owner, "signature": sign(t, key, msg)}
		if status, body := fetch(t, http.MethodPost, page, good); status != http.StatusOK {
			t.Fatalf("signature: %d %v", status, body)
		}
		if status, body := fetch(t, http.MethodPost, page, good); status != http.StatusGone {
			t.Errorf("replayed signature: %d %v", status, body)
		}
		eph := r.slack.Ephemerals()
		if len(eph) != 1 || eph[0].User != testAdmin || !strings.Contains(eph[0].Text, owner) {
			t.Errorf("Slack notices: %+v", eph)
		}

		want(t, r.command(t, p, testOutside, "/pair-slack-user-to-human-agent "+testOutside+" "+hugoENS), "Only the owner")
		want(t, r.command(t, p, testAdmin, "/pair-slack-user-to-human-agent <@"+testAdmin+"|ada> "+hugoENS), "Paired <@"+testAdmin+"> with Hugo — human")
		if posts := r.slack.Posts(); !strings.Contains(posts[len(posts)-1].Text, "paired <@"+testAdmin+"> with the human agent Hugo") {
			t.Errorf("last post: %q", posts[len(posts)-1].Text)
		}
	})

	t.Run("a paired user speaks as the human agent", func(t *testing.T) {
		n := len(r.slack.Posts())
		r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testAdmin, Text: "Hello from the claims desk."})
		reqs, err := r.llm.Wait(waitCtx(t), 1)
		if err != nil {
			t.Fatalf("no turn: %v\n%s", err, p.logs)
		}
		var history []string
		for _, m := range reqs[0].Messages {
			history = append(history, m.Content)
		}
		if joined := strings.Join(history, "\n"); !strings.Contains(joined, "Hugo ("+hugoENS+"): Hello from the claims desk.") {
			t.Errorf("the message is not attributed to the human agent:\n%s", joined)
		}
		if _, err := r.slack.WaitPosts(waitCtx(t), n+1); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an offer to another user, accepted with its button", func(t *testing.T) {
		want(t, r.command(t, p, testAdmin, "/pair-slack-user-to-human-agent "+testOutside+" "+hugoENS), "Sent <@"+testOutside+"> an offer")
		var offer *fakeslack.Post
		for _, post := range r.slack.Posts() {
			if post.Channel == testOutside {
				offer = &post
			}
		}
		if offer == nil {
			t.Fatalf("no offer was sent to %s: %v", testOutside, postTexts(r.slack))
		}
		n, posts := len(r.slack.CommandResponses()), len(r.slack.Posts())
		d, ok := r.slack.PressButton(*offer, testOutside, "pairing_accept")
		if !ok {
			t.Fatalf("the offer has no Accept button: %s", offer.Blocks)
		}
		if _, err := r.slack.WaitAck(waitCtx(t), d.Key()); err != nil {
			t.Fatalf("the press was not acknowledged: %v", err)
		}
		resps, err := r.slack.WaitCommandResponses(waitCtx(t), n+1)
		if err != nil || !strings.HasPrefix(resps[n].Text, "You accepted") {
			t.Fatalf("answer %v, %v\n%s", resps, err, p.logs)
		}
		after, err := r.slack.WaitPosts(waitCtx(t), posts+2)
		if err != nil {
			t.Fatalf("%v\n%s", err, p.logs)
		}
		var told, announced bool
		for _, post := range after[posts:] {
			told = told || post.Channel == testAdmin && strings.Contains(post.Text, "no longer paired")
			announced = announced || post.Channel == testChannel && strings.Contains(post.Text, "paired <@"+testOutside+"> with the human agent Hugo")
		}
		if !told || !announced {
			t.Errorf("told the previous user %v, announced %v: %q", told, announced, postTexts(r.slack))
		}
	})
}

// command sends a slash command line ("/name args") by user in
// testChannel and returns the response conclave gave to it.
func (r *rig) command(t *testing.T, p *process, user, line string) string {
	t.Helper()
	name, text, _ := strings.Cut(line, " ")
	n := len(r.slack.CommandResponses())
	d := r.slack.SendSlashCommand(fakeslack.SlashCommand{Command: name, Text: text, UserID: user, ChannelID: testChannel, ChannelName: "claims"})
	resps, err := r.slack.WaitCommandResponses(waitCtx(t), n+1)
	if err != nil {
		t.Fatalf("%.40q: no reply: %v\n%s", line, err, p.logs)
	}
	for _, resp := range resps {
		if resp.Key == d.EnvelopeID {
			return resp.Text
		}
	}
	t.Fatalf("%.40q: no reply of its own", line)
	return ""
}

// sign signs msg as a wallet's personal_sign does.
func sign(t *testing.T, key *ecdsa.PrivateKey, msg string) string {
	t.Helper()
	sig, err := crypto.Sign(accounts.TextHash([]byte(msg)), key)
	if err != nil {
		t.Fatal(err)
	}
	sig[crypto.RecoveryIDOffset] += 27
	return hexutil.Encode(sig)
}

// fetch makes a request with an optional JSON body and decodes a JSON answer.
func fetch(t *testing.T, method, url string, body any) (int, map[string]any) {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	rd := bytes.NewReader(raw)
	req, err := http.NewRequestWithContext(waitCtx(t), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
