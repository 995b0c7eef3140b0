package templates

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// longRange matches a range over an integer of four digits or more.
var longRange = regexp.MustCompile(`range[^}]*\d{4}`)

// FuzzRenderData renders every built-in prompt of every role with message
// text, names and attributes taken from Slack and the chain: whatever they
// hold, the render succeeds (data is never executed, escaped or refused),
// and a prompt that prints the request prints it as it was.
func FuzzRenderData(f *testing.F) {
	for _, s := range []string{
		"My car was hit.", "{{ .ConversationId }}", "{{ template \"latest\" . }}", "{{ end }}{{", "<no value>",
		"bell\a nul\x00 sep\u2028 tab\t", "\xff\xfe invalid utf-8", strings.Repeat("long ", 3000), "", " ",
	} {
		f.Add(s, "Ada", "0x5B38Da6a701c568545dCfcB03FcB875f56beddC4", "claims")
	}
	f.Add("hi", "{{.}}", "{{ .Owner }}", "{{ index . 0 }}")
	set := open(f, "").Current()
	f.Fuzz(func(t *testing.T, content, name, owner, attr string) {
		agent := Agent(AgentInfo{
			Name: name, EnsDomain: testAgent, Owner: owner,
			Addresses:  map[string]string{"evm": owner},
			Attributes: map[string]string{"role": "expert", "expertise": attr, attr: content},
		})
		for _, author := range []Member{Person(name), agent} {
			d := Data{
				ConversationId:           content,
				ChannelDescription:       content,
				ChannelMembers:           []Member{agent, Person(name)},
				ConversationMessageCount: len(content),
				MemorySessionId:          attr,
				InitialRequest:           Request{Content: content, Author: author},
				LatestRequest:            Request{Content: content, Author: author},
			}
			for _, role := range Roles() {
				for _, prompt := range Prompts(role) {
					out, err := set.Render(testAgent, role, prompt, d)
					if err != nil {
						t.Fatalf("%s/%s with author %q: %v", role, prompt, author.Name(), err)
					}
					if role == RoleFacilitator && prompt == PromptDefault && strings.TrimSpace(content) != "" &&
						!strings.Contains(out, content) {
						t.Fatalf("%s/%s does not hold the request %q:\n%s", role, prompt, content, out)
					}
				}
			}
		}
	})
}

// FuzzTemplateText builds a config repository from one arbitrary
// template: it either renders, or fails with an *Error naming its file;
// the rest of the repository keeps working, and nothing panics.
func FuzzTemplateText(f *testing.F) {
	for _, s := range []string{
		"Answer {{ .LatestRequest.Content }}.", "{{ .LatestRequest.Author.EnsDomain }}", "{{ .Nope.Deeper }}",
		"{{ template \"members\" . }}", "{{ define \"x\" }}y{{ end }}", "{{ if }}", "{{ .LatestRequest.Content ",
		"line one\nline two\r\n{{ len .ChannelMembers }}", "{{ index .ChannelMembers 99 }}", " \n\t ", "{{/* c */}}",
		"{{ range .ChannelMembers }}{{ .Attributes.role }}{{ end }}", "{{ truncate 3 .LatestRequest.Content }}",
		"{{ join \", \" .ChannelMembers }}", "{{ now }}", "\xff{{", "{{ range 3 }}x{{ end }}",
	} {
		f.Add(s)
	}
	funcs := funcMap(FixedClock)
	builtin, err := loadBuiltin(funcs)
	if err != nil {
		f.Fatal(err)
	}
	d := BuiltinFixture().Data
	f.Fuzz(func(t *testing.T, text string) {
		if longRange.MatchString(text) {
			t.Skip("a range over a large number only measures how long the loop runs")
		}
		files := map[string]fileData{
			"expert/context-found.tmpl": {body: []byte(text), size: int64(len(text))},
			"expert/system.tmpl":        {body: []byte("You are an expert."), size: 18},
		}
		set := &Set{repo: buildRepo(files, func(rel string) string { return "repo/" + rel }, funcs), builtin: builtin}
		_, err := set.Render(testAgent, RoleExpert, PromptContextFound, d)
		var te *Error
		if err != nil && (!errors.As(err, &te) || te.File != "repo/expert/context-found.tmpl") {
			t.Fatalf("error %v (%T) does not name the template's file", err, err)
		}
		if out, err := set.Render(testAgent, RoleExpert, PromptSystem, d); err != nil || out != "You are an expert." {
			t.Fatalf("the other prompt broke: %q, %v", out, err)
		}
	})
}
