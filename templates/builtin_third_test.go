package templates

import (
	"strings"
	"testing"
)

// The built-in default's "thread is long" rule counts the current
// exchange, not the whole thread; the request is quoted once and cut to
// 600 characters; what the person added is quoted, their bare :end: (with
// emoji) never.
func TestBuiltinDefaultWorksOnTheExchange(t *testing.T) {
	render := facilitatorRenderer(t, open(t, ""), PromptDefault)
	const long = "The thread is already long"
	d := BuiltinFixtureFor(RoleFacilitator).Data
	d.ConversationMessageCount, d.ExchangeMessageCount = 30, 2
	if got := render(d); strings.Contains(got, long) {
		t.Errorf("a short exchange in a long thread is told the thread is long:\n%s", got)
	}
	d.ExchangeMessageCount = 12
	if got := render(d); !strings.Contains(got, long) {
		t.Errorf("a long exchange is not told so:\n%s", got)
	}

	d = BuiltinFixtureFor(RoleFacilitator).Data
	alice := d.Request.Author
	d.Request.Content = strings.Repeat("a", 700)
	d.Messages = []Message{
		{Author: alice, Content: d.Request.Content, InExchange: true},
		{Author: alice, Content: "CLM-2025-00177", InExchange: true},
		{Author: alice, Content: "🏁 :end:", InExchange: true},
	}
	got := render(d)
	if !strings.Contains(got, `"`+strings.Repeat("a", 600)+`"`) || strings.Contains(got, strings.Repeat("a", 601)) {
		t.Errorf("the request is not cut to 600 characters:\n%s", got)
	}
	if strings.Count(got, strings.Repeat("a", 600)) != 1 {
		t.Errorf("the request is quoted more than once:\n%s", got)
	}
	if !strings.Contains(got, `What the people added since: Alice Martin: "CLM-2025-00177".`) || strings.Contains(got, "🏁") {
		t.Errorf("the person's answer is not quoted as added, or their :end: is quoted:\n%s", got)
	}
}
