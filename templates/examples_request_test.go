package templates

import (
	"strings"
	"testing"
)

// The example repository's facilitator works on the exchange, as the
// built-ins do (SPEC §14.2): after a follow-up reopened the thread and an
// expert answered it, the request to answer is the follow-up, quoted
// once; the thread's first message is earlier context, and the expert's
// answer material. What the person added since is quoted; a bare :end:
// is not.
func TestExampleFacilitatorAnswersTheRequest(t *testing.T) {
	render := facilitatorRenderer(t, open(t, "testdata/examples"), PromptDefault)
	d := followUpData()
	got := render(d)
	for _, want := range []string{
		`The request to answer, from Alice Martin: "And the side mirror, is it covered too?".`,
		`The latest message, from Claudine (expert), is material for the answer, not a new request.`,
		`The thread began earlier, with: "Customer C45653 reports water damage`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the example default lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "And the side mirror") != 1 || strings.Contains(got, "Original request") {
		t.Errorf("the example default does not quote the request once, or still calls the first message the request:\n%s", got)
	}

	alice := d.Request.Author
	d.Messages = append(d.Messages,
		Message{Author: alice, Content: d.Request.Content, InExchange: true},
		Message{Author: alice, Content: "The mirror was cracked, not broken.", InExchange: true},
		Message{Author: alice, Content: "🏁 :end:", InExchange: true})
	d.ExchangeMessageCount = 12
	got = render(d)
	if !strings.Contains(got, `Alice Martin added: "The mirror was cracked, not broken.".`) || strings.Contains(got, "🏁") {
		t.Errorf("what the person added is not quoted, or their :end: is:\n%s", got)
	}
	if !strings.Contains(got, "This exchange is long") {
		t.Errorf("a long exchange is not told so:\n%s", got)
	}
}

// facilitatorRenderer renders prompt of lib for Elen, the facilitator,
// failing the test on an error.
func facilitatorRenderer(t *testing.T, lib *Library, prompt string) func(Data) string {
	return func(d Data) string {
		t.Helper()
		got, err := lib.Current().Render("elen.acme.137.protocol6022.eth", RoleFacilitator, prompt, d)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
}
