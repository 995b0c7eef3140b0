package templates

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Templates read the data through views, of two kinds holding the same
// values.
//
// The full views are maps. text/template prints "<no value>" for a missing
// map key and carries on at any depth, where a missing struct field stops
// the render; a person's map has methods, found before keys, that fail for
// the agent-only fields. The full views define what a template renders.
//
// The fast views are structs with the same exported fields. Reading a
// struct field costs text/template no allocation, where a map read costs
// two. A template that reads only fields that exist renders the same text
// from either kind; one that reads any other field fails on the fast
// views, and execute then renders it again on the full views. So the fast
// views change how long a render takes, never what it gives. They are
// never equal to anything (eq fails on them as it does on maps), never
// empty, and print as their full view prints (through Format), except
// where fmt shows types and addresses: %T, %p, and the type it names for
// an extra argument of printf.

// agentView is the full view of an agent: every member field is a key.
type agentView map[string]any

// personView is the full view of a person: Name and IsAgent, and methods
// failing for the agent-only fields.
type personView map[string]any

// agentFields is the fast view of an agent. text/template looks fields up
// in order: the most read come first.
type agentFields struct {
	IsAgent       bool
	Name          string
	EnsDomain     string
	Attributes    attributes
	Addresses     map[string]any
	Owner         string
	SessionFormat string
	StandsFor     string
	full          agentView
}

// personFields is the fast view of a person. Reading an agent-only field
// fails, as a missing field does, so the full view answers with its error.
type personFields struct {
	IsAgent       bool
	Name          string
	SessionFormat string // always empty: a person has no memory keys
	StandsFor     string // always empty: a person is no clone
	full          personView
}

// requestFields is the fast view of a request.
type requestFields struct {
	Content string
	Author  any
	req     Request
}

// messageFields is the fast view of a message.
type messageFields struct {
	Content    string
	Author     any
	InExchange bool
	Time       time.Time
	msg        Message
}

// dataFields is the fast view of the data.
type dataFields struct {
	ConversationId           string
	ChannelDescription       string
	ChannelMembers           []any
	ConversationMessageCount int
	MemorySessionId          string
	InitialRequest           requestFields
	LatestRequest            requestFields
	LatestPersonRequest      requestFields
	Request                  requestFields
	ConcludeReason           string
	KnownSessions            []string
	CloneOf                  any
	Messages                 []any
	ExchangeMessageCount     int
	Vars                     map[string]any
	data                     *Data
}

// memberViews are the two views of a member, built once by Person and
// Agent so that a render does not rebuild them.
type memberViews struct {
	full any // agentView or personView
	fast any // agentFields or personFields
}

func personViews(name string) memberViews {
	full := personView{"Name": name, "IsAgent": false, "SessionFormat": "", "StandsFor": ""}
	return memberViews{full: full, fast: personFields{Name: name, full: full}}
}

func agentViews(a AgentInfo) memberViews {
	addresses, attributes := anyMap(a.Addresses), attributesOf(a.Attributes)
	full := agentView{
		"Name":          a.Name,
		"IsAgent":       true,
		"EnsDomain":     a.EnsDomain,
		"Owner":         a.Owner,
		"Addresses":     addresses,
		"Attributes":    attributes,
		"SessionFormat": a.SessionFormat,
		"StandsFor":     a.StandsFor,
	}
	return memberViews{full: full, fast: agentFields{
		IsAgent: true, Name: a.Name, EnsDomain: a.EnsDomain, Owner: a.Owner,
		Addresses: addresses, Attributes: attributes, SessionFormat: a.SessionFormat, StandsFor: a.StandsFor, full: full,
	}}
}

// anyMap copies m into a map of any, so that a missing key reads the same
// ("<no value>") through .Attributes.x and through index.
func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// attributes are an agent's attributes as templates read them: keys in
// lower case, so that .Attributes.Mission, .Attributes.mission and index
// with either find the one value, whichever case the NFT's metadata used
// (see foldAttributeNames and index).
type attributes map[string]any

// attributesOf copies m with its keys lowercased. Of two keys differing
// only in case, the one written in lower case wins; else the one that
// sorts first.
func attributesOf(m map[string]string) attributes {
	out := make(attributes, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lower := strings.ToLower(k)
		if _, taken := out[lower]; !taken || k == lower {
			out[lower] = m[k]
		}
	}
	return out
}

// absentMember is a member field that holds nobody (CloneOf of an agent
// that is not a clone): every field prints "<no value>", and with and if
// take it as empty.
type absentMember map[string]any

// String prints a missing member as a missing field prints.
func (absentMember) String() string { return noValue }

// String is the agent's name, so {{.LatestRequest.Author}} and join print
// names.
func (m agentView) String() string {
	name, _ := m["Name"].(string)
	return name
}

// String is the person's name.
func (m personView) String() string {
	name, _ := m["Name"].(string)
	return name
}

// agentOnlyError reports an agent-only field read on a person.
type agentOnlyError struct {
	field  string
	member string
}

func (e *agentOnlyError) Error() string {
	return fmt.Sprintf("%s is only set for agents, and %q is a person (guard it with {{if .IsAgent}})", e.field, e.member)
}

// EnsDomain fails: a person has no ENS name.
func (m personView) EnsDomain() (string, error) { return "", m.agentOnly("EnsDomain") }

// Owner fails: a person has no owner.
func (m personView) Owner() (string, error) { return "", m.agentOnly("Owner") }

// Addresses fails: a person has no addresses.
func (m personView) Addresses() (map[string]any, error) { return nil, m.agentOnly("Addresses") }

// Attributes fails: a person has no attributes.
func (m personView) Attributes() (map[string]any, error) { return nil, m.agentOnly("Attributes") }

func (m personView) agentOnly(field string) error {
	return &agentOnlyError{field: field, member: m.String()}
}

// Format prints the agent as its full view prints.
func (v agentFields) Format(f fmt.State, verb rune) { formatLike(f, verb, v.full) }

// Format prints the person as its full view prints.
func (v personFields) Format(f fmt.State, verb rune) { formatLike(f, verb, v.full) }

// Format prints the request as its full view prints.
func (v requestFields) Format(f fmt.State, verb rune) { formatLike(f, verb, v.req.templateView()) }

// Format prints the message as its full view prints.
func (v messageFields) Format(f fmt.State, verb rune) { formatLike(f, verb, v.msg.templateView()) }

// Format prints the data as its full view prints.
func (v dataFields) Format(f fmt.State, verb rune) { formatLike(f, verb, v.data.templateView()) }

// formatLike prints full with the verb and flags f was given.
func formatLike(f fmt.State, verb rune, full any) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), full)
}

// view marks the views, which are never empty (for default).
type view interface{ isView() }

func (agentView) isView()     {}
func (personView) isView()    {}
func (agentFields) isView()   {}
func (personFields) isView()  {}
func (requestFields) isView() {}
func (messageFields) isView() {}
func (dataFields) isView()    {}

// absent reports whether m is the zero Member, which a member field that
// holds nobody is set to.
func (m Member) absent() bool { return !m.isAgent && m.name == "" && m.v.full == nil }

// optionalViews are the views of a member field that may hold nobody.
func (m Member) optionalViews() memberViews {
	if m.absent() {
		return memberViews{full: absentMember{}, fast: absentMember{}}
	}
	return m.views()
}

func (m Member) views() memberViews {
	if m.v.full != nil {
		return m.v
	}
	return personViews(m.name)
}

// templateView is the member's full view.
func (m Member) templateView() any { return m.views().full }

// templateView is the request's full view.
func (r Request) templateView() map[string]any {
	return map[string]any{"Content": r.Content, "Author": r.Author.templateView()}
}

func (r Request) fastView() requestFields {
	return requestFields{Content: r.Content, Author: r.Author.views().fast, req: r}
}

// templateView is the message's full view.
func (m Message) templateView() map[string]any {
	return map[string]any{"Author": m.Author.templateView(), "Content": m.Content, "Time": m.Time, "InExchange": m.InExchange}
}

func (m Message) fastView() messageFields {
	return messageFields{Content: m.Content, Author: m.Author.views().fast, InExchange: m.InExchange, Time: m.Time, msg: m}
}

// templateView is the full view of the data, the root value a template
// executes on.
func (d *Data) templateView() map[string]any {
	members := make([]any, len(d.ChannelMembers))
	for i, m := range d.ChannelMembers {
		members[i] = m.templateView()
	}
	messages := make([]any, len(d.Messages))
	for i, m := range d.Messages {
		messages[i] = m.templateView()
	}
	return map[string]any{
		"ConversationId":           d.ConversationId,
		"ChannelDescription":       d.ChannelDescription,
		"ChannelMembers":           members,
		"ConversationMessageCount": d.ConversationMessageCount,
		"MemorySessionId":          d.MemorySessionId,
		"InitialRequest":           d.InitialRequest.templateView(),
		"LatestRequest":            d.LatestRequest.templateView(),
		"LatestPersonRequest":      d.LatestPersonRequest.templateView(),
		"Request":                  d.Request.templateView(),
		"ConcludeReason":           d.ConcludeReason,
		"KnownSessions":            d.knownSessions(),
		"CloneOf":                  d.CloneOf.optionalViews().full,
		"Messages":                 messages,
		"ExchangeMessageCount":     d.ExchangeMessageCount,
		"Vars":                     d.vars(),
	}
}

// fastView is the fast view of the data.
func (d *Data) fastView() dataFields {
	members := make([]any, len(d.ChannelMembers))
	for i, m := range d.ChannelMembers {
		members[i] = m.views().fast
	}
	messages := make([]any, len(d.Messages))
	for i, m := range d.Messages {
		messages[i] = m.fastView()
	}
	return dataFields{
		ConversationId:           d.ConversationId,
		ChannelDescription:       d.ChannelDescription,
		ChannelMembers:           members,
		ConversationMessageCount: d.ConversationMessageCount,
		MemorySessionId:          d.MemorySessionId,
		InitialRequest:           d.InitialRequest.fastView(),
		LatestRequest:            d.LatestRequest.fastView(),
		LatestPersonRequest:      d.LatestPersonRequest.fastView(),
		Request:                  d.Request.fastView(),
		ConcludeReason:           d.ConcludeReason,
		KnownSessions:            d.knownSessions(),
		CloneOf:                  d.CloneOf.optionalViews().fast,
		Messages:                 messages,
		ExchangeMessageCount:     d.ExchangeMessageCount,
		Vars:                     d.vars(),
		data:                     d,
	}
}

// knownSessions is KnownSessions, never nil, so that it prints "[]" and
// ranges over nothing alike whether the engine set it or not.
func (d *Data) knownSessions() []string {
	if d.KnownSessions == nil {
		return []string{}
	}
	return d.KnownSessions
}

// vars is Vars as templates read it: a map of any, never nil, so that a
// variable no configuration defines prints "<no value>" at any depth.
func (d *Data) vars() map[string]any { return anyMap(d.Vars) }
