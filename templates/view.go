package templates

import "fmt"

// Templates read maps, not structs: text/template prints "<no value>" for
// a missing map key and carries on through any depth, where a missing
// struct field would stop the render. Methods on the map types come before
// keys, which is how agent-only fields fail on persons.

// memberView is a member as templates see it: keys Name and IsAgent, and
// the agent-only fields as methods that fail for persons.
type memberView map[string]any

// agentKey holds the agent-only fields of an agent's view. It cannot be
// written as a field name in a template.
const agentKey = "\x00agent"

type agentFields struct {
	ensDomain  string
	owner      string
	addresses  map[string]any
	attributes map[string]any
}

func personView(name string) memberView {
	return memberView{"Name": name, "IsAgent": false}
}

func agentView(a AgentInfo) memberView {
	return memberView{
		"Name":    a.Name,
		"IsAgent": true,
		agentKey: &agentFields{
			ensDomain:  a.EnsDomain,
			owner:      a.Owner,
			addresses:  anyMap(a.Addresses),
			attributes: anyMap(a.Attributes),
		},
	}
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

// agentOnlyError reports an agent-only field read on a person.
type agentOnlyError struct {
	field  string
	member string
}

func (e *agentOnlyError) Error() string {
	return fmt.Sprintf("%s is only set for agents, and %q is a person (guard it with {{if .IsAgent}})", e.field, e.member)
}

func (m memberView) agent(field string) (*agentFields, error) {
	if a, ok := m[agentKey].(*agentFields); ok {
		return a, nil
	}
	return nil, &agentOnlyError{field: field, member: m.String()}
}

// EnsDomain is the agent's full ENS name; an error for a person.
func (m memberView) EnsDomain() (string, error) {
	a, err := m.agent("EnsDomain")
	if err != nil {
		return "", err
	}
	return a.ensDomain, nil
}

// Owner is the agent's owner address; an error for a person.
func (m memberView) Owner() (string, error) {
	a, err := m.agent("Owner")
	if err != nil {
		return "", err
	}
	return a.owner, nil
}

// Addresses maps an address type to the agent's address; an error for a
// person.
func (m memberView) Addresses() (map[string]any, error) {
	a, err := m.agent("Addresses")
	if err != nil {
		return nil, err
	}
	return a.addresses, nil
}

// Attributes are the agent's attributes; an error for a person.
func (m memberView) Attributes() (map[string]any, error) {
	a, err := m.agent("Attributes")
	if err != nil {
		return nil, err
	}
	return a.attributes, nil
}

// String is the member's name, so {{.LatestRequest.Author}} and join print
// names.
func (m memberView) String() string {
	name, _ := m["Name"].(string)
	return name
}

func (m Member) templateView() memberView {
	if m.view != nil {
		return m.view
	}
	return personView(m.name)
}

func (r Request) templateView() map[string]any {
	return map[string]any{"Content": r.Content, "Author": r.Author.templateView()}
}

// templateView is the root value a template executes on.
func (d *Data) templateView() map[string]any {
	members := make([]memberView, len(d.ChannelMembers))
	for i, m := range d.ChannelMembers {
		members[i] = m.templateView()
	}
	return map[string]any{
		"ConversationId":           d.ConversationId,
		"ChannelDescription":       d.ChannelDescription,
		"ChannelMembers":           members,
		"ConversationMessageCount": d.ConversationMessageCount,
		"MemorySessionId":          d.MemorySessionId,
		"InitialRequest":           d.InitialRequest.templateView(),
		"LatestRequest":            d.LatestRequest.templateView(),
	}
}
