package templates

import "fmt"

// Templates read maps, not structs: text/template prints "<no value>" for
// a missing map key and carries on through any depth, where a missing
// struct field would stop the render.

// A member is one of two map types. An agent's holds every member field
// as a key, so reading one is a plain map lookup. A person's holds Name and
// IsAgent, and its methods, which come before keys, fail for the
// agent-only fields with an error naming the field and the person.

// agentView is an agent as templates see it.
type agentView map[string]any

// personView is a person as templates see it.
type personView map[string]any

func newPersonView(name string) personView {
	return personView{"Name": name, "IsAgent": false}
}

func newAgentView(a AgentInfo) agentView {
	return agentView{
		"Name":       a.Name,
		"IsAgent":    true,
		"EnsDomain":  a.EnsDomain,
		"Owner":      a.Owner,
		"Addresses":  anyMap(a.Addresses),
		"Attributes": anyMap(a.Attributes),
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

// templateView is an agentView or a personView.
func (m Member) templateView() any {
	if m.view != nil {
		return m.view
	}
	return newPersonView(m.name)
}

func (r Request) templateView() map[string]any {
	return map[string]any{"Content": r.Content, "Author": r.Author.templateView()}
}

// templateView is the root value a template executes on.
func (d *Data) templateView() map[string]any {
	members := make([]any, len(d.ChannelMembers))
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
