package bot

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/conclavehq/conclave/bot/fakeslack"
)

func TestDirectMessageGetsHelp(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{})
	ctx := testContext(t)
	ignored := []fakeslack.Delivery{
		r.fake.SendMessage(fakeslack.Message{Channel: "D1", User: "UBOT", BotID: "BBOT", Text: "conclave's own post"}),
		r.fake.SendMessage(fakeslack.Message{Channel: "D1", User: "UB2", BotID: "B2", Subtype: "bot_message", Text: "another app"}),
		r.fake.SendMessage(fakeslack.Message{Channel: "G9", ChannelType: "mpim", User: "U1", Text: "a group DM"}),
	}
	d := r.fake.SendMessage(fakeslack.Message{Channel: "D1", User: "U1", Text: "hello? what can you do"})
	posts, err := r.fake.WaitPosts(ctx, 1)
	if err != nil {
		t.Fatalf("no help posted: %v\n%s", err, r.logs)
	}
	for _, ig := range append(ignored, d) {
		if _, err := r.fake.WaitAck(ctx, ig.Key()); err != nil {
			t.Errorf("envelope %s not acknowledged: %v", ig.Key(), err)
		}
	}
	if len(posts) != 1 {
		t.Fatalf("posts = %v, want the help once", r.postTexts())
	}
	p := posts[0]
	if p.Channel != "D1" || p.Username != "" || p.UnfurlLinks != "false" {
		t.Errorf("help posted in %s as %q (unfurl_links %q), want in D1 as conclave with unfurling off", p.Channel, p.Username, p.UnfurlLinks)
	}
	for _, want := range []string{"conclave", "Start a conversation", ":end:", "/list-agents", "/add-agent", "/remove-agent", "/verify-wallet", "/pair-slack-user-to-human-agent"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("help lacks %q:\n%s", want, p.Text)
		}
	}
	if evs := r.rec.ackedEvents(); len(evs) != 0 {
		t.Errorf("a DM reached the engine: %+v", evs)
	}
}

func TestAppHomeShowsHelpAndTheUsersChannelsAgents(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{})
	ctx := testContext(t)
	r.fake.AddChannel(fakeslack.Channel{ID: "C1", Name: "claims", Members: []string{"U1", "U2"}})
	r.fake.AddChannel(fakeslack.Channel{ID: "C2", Name: "ops", Members: []string{"U1"}})
	r.fake.AddChannel(fakeslack.Channel{ID: "C4", Name: "secret", IsPrivate: true, Members: []string{"U1"}})
	r.fake.AddChannel(fakeslack.Channel{ID: "C5", Name: "elsewhere", Members: []string{"U2"}})
	for ch, name := range map[string]string{"C4": claudine, "C5": amir} {
		if _, err := r.engine.AddAgent(ctx, ch, name); err != nil {
			t.Fatal(err)
		}
	}

	messagesTab := r.fake.SendAppHomeOpened("U1", "messages")
	d := r.fake.SendAppHomeOpened("U1", "home")
	views, err := r.fake.WaitViews(ctx, 1)
	if err != nil {
		t.Fatalf("no App Home published: %v\n%s", err, r.logs)
	}
	for _, del := range []fakeslack.Delivery{messagesTab, d} {
		if _, err := r.fake.WaitAck(ctx, del.Key()); err != nil {
			t.Errorf("envelope %s not acknowledged: %v", del.Key(), err)
		}
	}
	if len(views) != 1 || views[0].UserID != "U1" || views[0].Type != "home" {
		t.Fatalf("views = %+v, want one home view for U1 (the messages tab publishes nothing)", views)
	}
	texts := views[0].SectionTexts()
	all := strings.Join(texts, "\n")
	for _, want := range []string{helpText, "*#claims*\nElen — facilitator — `" + elen + "`", "*#secret*\nClaudine — expert — `" + claudine + "`"} {
		if !slices.Contains(texts, want) {
			t.Errorf("App Home lacks %q; it shows:\n%s", want, all)
		}
	}
	for _, absent := range []string{"#ops", "#elsewhere", amir} {
		if strings.Contains(all, absent) {
			t.Errorf("App Home shows %q, a channel without agents or not the user's:\n%s", absent, all)
		}
	}
	if raw := string(views[0].Blocks); !json.Valid(views[0].Blocks) {
		t.Errorf("blocks are not JSON: %s", raw)
	}
}

func TestAppHomeWithoutChannelsSaysHowToStart(t *testing.T) {
	r := newCommandRig(t, commandRigOptions{})
	r.fake.SendAppHomeOpened("U2", "home")
	views, err := r.fake.WaitViews(testContext(t), 1)
	if err != nil {
		t.Fatalf("no App Home published: %v\n%s", err, r.logs)
	}
	all := strings.Join(views[0].SectionTexts(), "\n")
	if !strings.Contains(all, helpText) || !strings.Contains(all, "None of your channels has agents yet") {
		t.Errorf("App Home of a user in no channel with agents:\n%s", all)
	}
}
