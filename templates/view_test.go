package templates

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"
)

// renderOn renders t on one kind of view only, as execute does on each.
func renderOn(t *template.Template, root any) (string, error) {
	var b output
	err := t.Execute(&b, root)
	return b.String(), err
}

// viewData is data in the shapes templates meet: each role's fixture with
// its authors, person and agent authors, and sparse data.
func viewData() map[string]Data {
	out := map[string]Data{
		"zero":         {},
		"unnamed":      {ChannelMembers: []Member{Person(""), {}}, LatestRequest: Request{Author: Person("")}},
		"bare agent":   {ChannelMembers: []Member{Agent(AgentInfo{})}, InitialRequest: Request{Author: Agent(AgentInfo{})}},
		"empty member": {ChannelMembers: []Member{{}}},
	}
	for _, role := range Roles() {
		d := BuiltinFixtureFor(role).Data
		person, agent := authors(d.ChannelMembers)
		out[role+" fixture"] = d
		out[role+" person authors"] = withAuthor(d, person)
		out[role+" agent authors"] = withAuthor(d, agent)
	}
	return out
}

// checkViewsAgree renders src on the fast and on the full views of every
// viewData: when the fast views render, the full views must render the
// same text (the full views define the result; the fast ones may only
// fail, and execute then falls back).
func checkViewsAgree(t *testing.T, src string, data map[string]Data) {
	t.Helper()
	tmpl, err := parseFile("view.tmpl", src, funcMap(FixedClock))
	if err != nil {
		return
	}
	for name, d := range data {
		fast, fastErr := renderOn(tmpl, d.fastView())
		if fastErr != nil {
			continue
		}
		full, fullErr := renderOn(tmpl, d.templateView())
		switch {
		case fullErr != nil:
			t.Errorf("%s with %s: the fast views render %q where the full views fail: %v", src, name, fast, fullErr)
		case fast != full && !strings.Contains(fast, "%!(EXTRA "):
			// fmt names the type of each extra argument of printf.
			t.Errorf("%s with %s: the fast views render\n%q\nthe full views\n%q", src, name, fast, full)
		}
	}
}

// TestFastViewsRenderLikeFullViews applies every way a template can use a
// value — printing it with each fmt verb, functions, comparisons, indexing,
// ranging, fields that exist and fields that do not — to the data, a
// request, agents, persons, the member list and a map.
func TestFastViewsRenderLikeFullViews(t *testing.T) {
	values := []string{
		".", "$", ".LatestRequest", ".InitialRequest", ".LatestRequest.Author", ".InitialRequest.Author",
		"(index .ChannelMembers 0)", "(index .ChannelMembers 1)", "(index .ChannelMembers 4)", ".ChannelMembers",
		".LatestRequest.Author.Attributes", "(default .LatestRequest.Author .Foo)", "(or .Foo .InitialRequest.Author)",
		"(and .LatestRequest .LatestRequest.Author)", "(slice .ChannelMembers 1)",
	}
	uses := []string{
		"{{X}}", `{{printf "%v|%+v|%#v|%s|%q|%x|%X|%d|%t|%8.3v|%-6s|%08v" X X X X X X X X X X X X}}`,
		"{{len X}}", `{{index X "Name"}}`, "{{index X 0}}", "{{range $k, $v := X}}{{$k}}={{$v}};{{end}}",
		"{{range X}}{{.}};{{end}}", "{{if X}}y{{else}}n{{end}}", "{{with X}}{{.}}{{end}}", "{{not X}}",
		"{{and X 1}}", "{{or X 1}}", "{{eq X X}}", `{{ne X "a"}}`, "{{eq X .LatestRequest.Author}}", "{{lt X 1}}",
		"{{eq X nil}}", "{{html X}}", "{{js X}}", "{{urlquery X}}", "{{print X 1}}", "{{println X X}}",
		`{{join "," X}}`, "{{lower X}}", "{{upper X}}", "{{trim X}}", "{{truncate 3 X}}", `{{default "d" X}}`,
		`{{X | default "d"}}`, "{{slice X 0}}", "{{call X}}", "{{X.Format}}", "{{X.String}}", "{{X.isView}}",
		"{{X.full}}", "{{X.req}}", "{{X.data}}", "{{X.Name}}", "{{X.Foo}}", "{{X.Foo.Bar}}", "{{X.EnsDomain}}",
		"{{X.Owner}}", "{{X.Addresses.evm}}", "{{X.Content}}", "{{X.Author.Name}}", "{{X.Author}}", "{{X.IsAgent}}",
		"{{X.Attributes.role}}", "{{X.ChannelMembers}}", "{{X.ConversationMessageCount}}",
		`{{define "t"}}{{.}}|{{.Name}}{{end}}{{template "t" X}}`, "{{$x := X}}{{$x}}{{$x.Name}}",
	}
	data := viewData()
	for _, use := range uses {
		for _, value := range values {
			checkViewsAgree(t, strings.ReplaceAll(use, "X", value), data)
		}
	}
}

// Only %T and %p show the difference between the two kinds of view.
var typeVerbs = regexp.MustCompile(`%[-+# 0-9.*\[\]]*[Tp]`)

// FuzzViewsAgree renders arbitrary templates on both kinds of view.
func FuzzViewsAgree(f *testing.F) {
	for _, s := range []string{
		"{{.LatestRequest.Author}}", "{{printf \"%#v\" .}}", "{{range .ChannelMembers}}{{.Name}}{{.Foo}}{{end}}",
		"{{with .InitialRequest.Author}}{{if .IsAgent}}{{.EnsDomain}}{{end}}{{end}}", "{{default 1 .LatestRequest}}",
		"{{eq .LatestRequest.Author .InitialRequest.Author}}", "{{len .}}", "{{range $k, $v := .}}{{$k}}{{end}}",
	} {
		f.Add(s)
	}
	data := map[string]Data{}
	for name, d := range viewData() {
		if strings.HasSuffix(name, "fixture") || name == "zero" || name == "unnamed" {
			data[name] = d
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		if longRange.MatchString(src) || typeVerbs.MatchString(src) {
			t.Skip("a long range only measures a loop; the T and p verbs name representations")
		}
		checkViewsAgree(t, src, data)
	})
}

// TestViewsExposeNoFunctions walks everything a template can reach from
// its data, on both kinds of view: no function, channel or pointer (call
// has nothing to call), and no method but the harmless ones listed.
func TestViewsExposeNoFunctions(t *testing.T) {
	allowed := map[string]string{
		"templates.agentView":     "String",
		"templates.personView":    "Addresses Attributes EnsDomain Owner String",
		"templates.agentFields":   "Format",
		"templates.personFields":  "Format",
		"templates.requestFields": "Format",
		"templates.dataFields":    "Format",
		"templates.messageFields": "Format",
		"templates.absentMember":  "String",
	}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		if !v.IsValid() {
			return
		}
		if v.Kind() == reflect.Interface {
			walk(path, v.Elem())
			return
		}
		typ := v.Type()
		if typ == reflect.TypeFor[time.Time]() {
			// .Messages' .Time, as now returns one: its methods read the
			// value or return a new one, and it holds no exported field.
			return
		}
		var methods []string
		for i := range reflect.PointerTo(typ).NumMethod() {
			methods = append(methods, reflect.PointerTo(typ).Method(i).Name)
		}
		if got := strings.Join(methods, " "); got != allowed[typ.String()] {
			t.Errorf("%s: %s has methods %q, want %q", path, typ, got, allowed[typ.String()])
		}
		switch v.Kind() {
		case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Pointer:
			t.Errorf("%s: templates can reach a %s", path, v.Kind())
		case reflect.Map:
			for _, k := range v.MapKeys() {
				walk(path+"."+k.String(), v.MapIndex(k))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(fmt.Sprintf("%s[%d]", path, i), v.Index(i))
			}
		case reflect.Struct:
			for i := range typ.NumField() {
				if typ.Field(i).IsExported() {
					walk(path+"."+typ.Field(i).Name, v.Field(i))
				}
			}
		}
	}
	for name, d := range viewData() {
		walk(name+" (fast)", reflect.ValueOf(d.fastView()))
		walk(name+" (full)", reflect.ValueOf(d.templateView()))
	}
}
