package bot

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/conclavehq/conclave/internal/testclock"
)

// offerRig is a command rig where U1 owns hugo through a verified wallet,
// optionally with pairings made before.
func offerRig(t *testing.T, before ...[2]string) (*commandRig, *testclock.Clock) {
	t.Helper()
	clock := testclock.New(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	r := newCommandRig(t, commandRigOptions{now: clock.Now})
	ctx := testContext(t)
	if err := r.store.LinkWallet(ctx, "U1", keyAddress(testKey(t, 1)).Hex()); err != nil {
		t.Fatal(err)
	}
	for _, p := range before {
		if _, _, err := r.store.PairHuman(ctx, p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	return r, clock
}

func (r *commandRig) pairedWith(t *testing.T, user string) string {
	t.Helper()
	got, err := r.engine.PairedAgent(testContext(t), user)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (r *commandRig) audited(action string) bool {
	return strings.Contains(r.logs.String(), "action="+action)
}

const pairCmd = "/pair-slack-user-to-human-agent "

// TestPairingOfferMessage: the offer reaches the user as a direct message
// with an Accept and a Decline button carrying the offer, and nothing
// changes until it is answered.
func TestPairingOfferMessage(t *testing.T) {
	r, _ := offerRig(t)
	checkReply(t, r.command(t, "U1", "C1", pairCmd+"U3 "+hugo), "Sent <@U3> an offer to pair with Hugo")
	dms := r.dms("U3")
	if len(dms) != 1 {
		t.Fatalf("direct messages to U3: %v", r.fake.Posts())
	}
	if !strings.Contains(dms[0].Text, "<@U1> offers to pair you with the human agent Hugo") || dms[0].UnfurlLinks != "false" {
		t.Errorf("offer text %q, unfurl %q", dms[0].Text, dms[0].UnfurlLinks)
	}
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Style    string `json:"style"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(dms[0].Blocks, &blocks); err != nil {
		t.Fatal(err)
	}
	var buttons []string
	for _, b := range blocks {
		for _, e := range b.Elements {
			if b.Type == "actions" && e.Type == "button" && len(e.Value) == 32 {
				buttons = append(buttons, e.ActionID+"/"+e.Style)
			}
		}
	}
	if strings.Join(buttons, ",") != "pairing_accept/primary,pairing_decline/danger" {
		t.Errorf("buttons %v, want Accept and Decline carrying the offer id", buttons)
	}
	if got := r.pairedWith(t, "U3"); got != "" {
		t.Errorf("U3 is paired with %q before answering", got)
	}
	if posts := r.postTexts(); len(posts) != 0 {
		t.Errorf("announced before the answer: %q", posts)
	}
	if !r.audited("pairing_offered") || r.audited("human_paired") {
		t.Errorf("audit records:\n%s", r.logs)
	}
}

func TestPairingOfferAccepted(t *testing.T) {
	r, _ := offerRig(t)
	r.command(t, "U1", "C1", pairCmd+"U3 "+hugo)
	resp := r.press(t, "U3", "U3", "pairing_accept")
	if !resp.ReplaceOriginal || !strings.HasPrefix(resp.Text, "You accepted: you are now paired with Hugo — human — `"+hugo+"`") {
		t.Errorf("answer %+v", resp)
	}
	if got := r.pairedWith(t, "U3"); got != hugo {
		t.Errorf("U3 is paired with %q, want %s", got, hugo)
	}
	posts := r.postTexts()
	if len(posts) != 1 || !strings.HasPrefix(posts[0], "C1: <@U1> paired <@U3> with the human agent Hugo") || !strings.Contains(posts[0], "accepted by <@U3>") {
		t.Errorf("announcements %q", posts)
	}
	if !r.audited("human_paired") || !strings.Contains(r.logs.String(), "accepted_by=U3") {
		t.Errorf("no audit record of the pairing:\n%s", r.logs)
	}
	// A second press finds the offer spent.
	if resp := r.press(t, "U3", "U3", "pairing_accept"); !strings.Contains(resp.Text, "expired or was already answered") {
		t.Errorf("second press: %+v", resp)
	}
	if n := len(r.postTexts()); n != 1 {
		t.Errorf("%d announcements after a second press, want 1", n)
	}
}

func TestPairingOfferDeclined(t *testing.T) {
	r, _ := offerRig(t, [2]string{"U2", hugo})
	r.command(t, "U1", "C1", pairCmd+"U3 "+hugo)
	resp := r.press(t, "U3", "U3", "pairing_decline")
	if !resp.ReplaceOriginal || !strings.HasPrefix(resp.Text, "You declined") {
		t.Errorf("answer %+v", resp)
	}
	if got := r.pairedWith(t, "U3"); got != "" {
		t.Errorf("U3 is paired with %q after declining", got)
	}
	if got := r.pairedWith(t, "U2"); got != hugo {
		t.Errorf("U2 lost hugo (%q) though the offer was declined", got)
	}
	if dms := r.dms("U1"); len(dms) != 1 || !strings.Contains(dms[0].Text, "<@U3> declined your offer") {
		t.Errorf("the owner was not told: %v", dms)
	}
	if len(r.dms("U2")) != 0 || len(r.postTexts()) != 0 {
		t.Errorf("declining told U2 %v or announced %q", r.dms("U2"), r.postTexts())
	}
	if !r.audited("pairing_declined") || r.audited("human_paired") {
		t.Errorf("audit records:\n%s", r.logs)
	}
	if resp := r.press(t, "U3", "U3", "pairing_accept"); !strings.Contains(resp.Text, "expired or was already answered") || r.pairedWith(t, "U3") != "" {
		t.Errorf("accepting a declined offer: %+v", resp)
	}
}

func TestPairingOfferExpired(t *testing.T) {
	r, clock := offerRig(t)
	r.command(t, "U1", "C1", pairCmd+"U3 "+hugo)
	clock.Advance(24*time.Hour - time.Second)
	r.command(t, "U1", "C1", pairCmd+"W3 "+hugo) // a second offer, still young
	clock.Advance(2 * time.Second)
	dms := r.dms("U3")
	n := len(r.fake.CommandResponses())
	d, _ := r.fake.PressButton(dms[0], "U3", "pairing_accept")
	resps, err := r.fake.WaitCommandResponses(testContext(t), n+1)
	if err != nil || resps[len(resps)-1].Key != d.EnvelopeID || !strings.Contains(resps[len(resps)-1].Text, "expired") {
		t.Fatalf("answer to an expired offer: %v %v", resps, err)
	}
	if got := r.pairedWith(t, "U3"); got != "" {
		t.Errorf("U3 is paired with %q through an expired offer", got)
	}
	if resp := r.press(t, "W3", "W3", "pairing_accept"); !strings.HasPrefix(resp.Text, "You accepted") || r.pairedWith(t, "W3") != hugo {
		t.Errorf("the offer made later: %+v", resp)
	}
}

// TestPairingOfferReplaces: an existing pairing of the agent and of the
// user stands until Accept; then both are replaced, and the user who lost
// the agent is told in a direct message.
func TestPairingOfferReplaces(t *testing.T) {
	r, _ := offerRig(t, [2]string{"U2", hugo}, [2]string{"U3", iris})
	reply := r.command(t, "U1", "C1", pairCmd+"U3 "+hugo)
	for _, want := range []string{
		"Note: <@U3> was paired with `" + iris + "`; that pairing is replaced if they accept.",
		"Note: `" + hugo + "` was paired with <@U2>; that pairing is replaced if they accept.",
	} {
		checkReply(t, reply, want)
	}
	if r.pairedWith(t, "U2") != hugo || r.pairedWith(t, "U3") != iris || len(r.dms("U2")) != 0 {
		t.Fatalf("a pairing was replaced before Accept")
	}
	resp := r.press(t, "U3", "U3", "pairing_accept")
	if !strings.Contains(resp.Text, "Your pairing with `"+iris+"` is replaced.") {
		t.Errorf("answer %q", resp.Text)
	}
	if r.pairedWith(t, "U2") != "" || r.pairedWith(t, "U3") != hugo {
		t.Errorf("after Accept U2 has %q, U3 has %q", r.pairedWith(t, "U2"), r.pairedWith(t, "U3"))
	}
	if dms := r.dms("U2"); len(dms) != 1 || !strings.HasPrefix(dms[0].Text, "You are no longer paired with the human agent Hugo") {
		t.Errorf("U2 was not told: %v", dms)
	}
	if !strings.Contains(r.logs.String(), "replaced_user=U2") || !strings.Contains(r.logs.String(), "replaced_agent="+iris) {
		t.Errorf("audit record lacks the replacements:\n%s", r.logs)
	}
}

// Only the user an offer was made to can answer it.
func TestPairingOfferAnsweredBySomeoneElse(t *testing.T) {
	r, _ := offerRig(t)
	r.command(t, "U1", "C1", pairCmd+"U3 "+hugo)
	for _, action := range []string{"pairing_accept", "pairing_decline"} {
		resp := r.press(t, "U3", "U2", action)
		if resp.ReplaceOriginal || !strings.Contains(resp.Text, "not for you") {
			t.Errorf("%s by U2: %+v", action, resp)
		}
	}
	if r.pairedWith(t, "U2") != "" || r.pairedWith(t, "U3") != "" {
		t.Error("someone else's press paired")
	}
	if resp := r.press(t, "U3", "U3", "pairing_accept"); !strings.HasPrefix(resp.Text, "You accepted") {
		t.Errorf("the offered user could not accept after: %+v", resp)
	}
}

// An owner who sold the NFT between the offer and the answer: the offer
// no longer stands.
func TestPairingOfferOwnerChanged(t *testing.T) {
	r, _ := offerRig(t)
	r.command(t, "U1", "C1", pairCmd+"U3 "+hugo)
	r.ids.transfer(hugo, keyAddress(testKey(t, 2)).Hex())
	if resp := r.press(t, "U3", "U3", "pairing_accept"); !strings.Contains(resp.Text, "no longer owns") {
		t.Errorf("answer %+v", resp)
	}
	if r.pairedWith(t, "U3") != "" {
		t.Error("paired through an offer from a former owner")
	}
}
