package templates

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// The built-in fixtures, one per role with prompts; fixture.json is the
// expert's, and the one shown in the documentation.
var (
	//go:embed fixture.json
	builtinFixture []byte
	//go:embed fixture-facilitator.json
	builtinFacilitatorFixture []byte
	//go:embed fixture-clone.json
	builtinCloneFixture []byte
)

// Fixture is sample data for rendering prompts outside a conversation:
// the fields every prompt receives, plus what the model would see around
// the prompts (for `conclave templates render`).
//
// In JSON the template fields keep their template names (ConversationId,
// ChannelMembers, …) and the others are lowercase (role, messages,
// session_history). The messages are also the template field .Messages,
// each with an optional "at" time and "in_exchange" (default true);
// ExchangeMessageCount defaults to the count of those in the exchange.
// A member is an object {"Name", "IsAgent", "EnsDomain",
// "Owner", "Addresses", "Attributes", "SessionFormat", "StandsFor"}; an author (or CloneOf) may instead be a string,
// the Name or EnsDomain of a channel member.
type Fixture struct {
	// Name says where the fixture came from, for messages.
	Name string
	// Role is the role the fixture was written for; empty when any.
	Role string
	// Data is what the prompts receive.
	Data Data
	// Messages are the thread messages the agent sees, oldest first.
	Messages []FixtureMessage
	// SessionHistory is the bound memory session's earlier entries, oldest
	// first, as stored.
	SessionHistory []HistoryEntry
}

// FixtureMessage is a thread message of a fixture.
type FixtureMessage struct {
	Author  Member
	Content string
}

// HistoryEntry is a memory session entry of a fixture: role is user,
// assistant or system; At, when it was stored (optional: an entry without
// one is shown as stored at an unknown date).
type HistoryEntry struct {
	Role    string    `json:"role"`
	Content string    `json:"content"`
	At      time.Time `json:"at,omitzero"`
}

// BuiltinFixture returns the fixture used when none is given: a claims
// desk with an expert (the agent itself, first), a facilitator, another
// expert, a human agent and a person. It is BuiltinFixtureFor(RoleExpert).
func BuiltinFixture() Fixture { return BuiltinFixtureFor(RoleExpert) }

// BuiltinFixtureFor returns the built-in fixture written for role: the same
// claims desk seen by its facilitator (Elen), its expert (Claudine) or a
// clone (Arnaud's twin), the agent itself first. A role without prompts
// gets the expert's.
func BuiltinFixtureFor(role string) Fixture {
	body := builtinFixture
	switch role {
	case RoleFacilitator:
		body = builtinFacilitatorFixture
	case RoleClone:
		body = builtinCloneFixture
	default:
		role = RoleExpert
	}
	f, err := ParseFixture("the built-in "+role+" fixture", body)
	if err != nil {
		panic(err) // the files are embedded and covered by tests
	}
	return f
}

// LoadFixture reads a fixture from a JSON file.
func LoadFixture(path string) (Fixture, error) {
	body, err := os.ReadFile(path) // #nosec G304 -- the template author names the fixture file
	if err != nil {
		return Fixture{}, fmt.Errorf("templates: fixture: %w", err)
	}
	return ParseFixture(path, body)
}

type fixtureJSON struct {
	Role                     string            `json:"role"`
	ConversationId           string            `json:"ConversationId"`
	ChannelDescription       string            `json:"ChannelDescription"`
	ChannelMembers           []memberJSON      `json:"ChannelMembers"`
	ConversationMessageCount int               `json:"ConversationMessageCount"`
	MemorySessionId          string            `json:"MemorySessionId"`
	InitialRequest           requestJSON       `json:"InitialRequest"`
	LatestRequest            requestJSON       `json:"LatestRequest"`
	LatestPersonRequest      *requestJSON      `json:"LatestPersonRequest"`
	Request                  *requestJSON      `json:"Request"`
	ConcludeReason           string            `json:"ConcludeReason"`
	KnownSessions            []string          `json:"KnownSessions"`
	CloneOf                  authorJSON        `json:"CloneOf"`
	ExchangeMessageCount     *int              `json:"ExchangeMessageCount"`
	Vars                     map[string]string `json:"Vars"`
	Messages                 []messageJSON     `json:"messages"`
	SessionHistory           []HistoryEntry    `json:"session_history"`
}

type memberJSON struct {
	Name       string            `json:"Name"`
	IsAgent    bool              `json:"IsAgent"`
	EnsDomain  string            `json:"EnsDomain"`
	Owner      string            `json:"Owner"`
	Addresses  map[string]string `json:"Addresses"`
	Attributes map[string]string `json:"Attributes"`
	// SessionFormat is an agent's key format (templates read it as
	// .SessionFormat; engine: key_format, else session_pattern).
	SessionFormat string `json:"SessionFormat"`
	// StandsFor is a clone's human agent, by ENS name (.StandsFor).
	StandsFor string `json:"StandsFor"`
}

type requestJSON struct {
	Content string     `json:"Content"`
	Author  authorJSON `json:"Author"`
}

type messageJSON struct {
	Author  authorJSON `json:"author"`
	Content string     `json:"content"`
	// At is when it was written; InExchange, whether it belongs to the
	// current exchange (default true). Templates read them in .Messages.
	At         time.Time `json:"at,omitzero"`
	InExchange *bool     `json:"in_exchange"`
}

// authorJSON is a member object, or a string naming a channel member.
type authorJSON struct {
	ref    string
	member *memberJSON
}

func (a *authorJSON) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"`)) {
		return json.Unmarshal(b, &a.ref)
	}
	a.member = new(memberJSON)
	return strictUnmarshal(b, a.member)
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// ParseFixture decodes a fixture; name is used in errors. Unknown keys,
// agent fields on a person and authors that name no channel member are
// errors.
func ParseFixture(name string, body []byte) (Fixture, error) {
	var fj fixtureJSON
	if err := strictUnmarshal(body, &fj); err != nil {
		return Fixture{}, fixtureError(name, body, err)
	}
	f, err := fj.fixture()
	if err != nil {
		return Fixture{}, fmt.Errorf("templates: fixture %s: %w", name, err)
	}
	f.Name = name
	return f, nil
}

func fixtureError(name string, body []byte, err error) error {
	var offset int64
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		offset = syntax.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	default:
		return fmt.Errorf("templates: fixture %s: %w", name, err)
	}
	line := 1 + bytes.Count(body[:min(int(offset), len(body))], []byte("\n"))
	return fmt.Errorf("templates: fixture %s:%d: %w", name, line, err)
}

func (fj *fixtureJSON) fixture() (Fixture, error) {
	if fj.Role != "" && Prompts(fj.Role) == nil {
		return Fixture{}, fmt.Errorf("role %q has no prompts (roles: %s)", fj.Role, strings.Join(Roles(), ", "))
	}
	f := Fixture{Role: fj.Role, SessionHistory: fj.SessionHistory}
	d := &f.Data
	d.ConversationId = fj.ConversationId
	d.ChannelDescription = fj.ChannelDescription
	d.ConversationMessageCount = fj.ConversationMessageCount
	d.MemorySessionId = fj.MemorySessionId
	for i := range fj.ChannelMembers {
		m, err := fj.ChannelMembers[i].member()
		if err != nil {
			return Fixture{}, fmt.Errorf("ChannelMembers[%d]: %w", i, err)
		}
		d.ChannelMembers = append(d.ChannelMembers, m)
	}
	var err error
	if d.InitialRequest.Author, err = fj.author(fj.InitialRequest.Author); err != nil {
		return Fixture{}, fmt.Errorf("InitialRequest: %w", err)
	}
	d.InitialRequest.Content = fj.InitialRequest.Content
	if d.LatestRequest.Author, err = fj.author(fj.LatestRequest.Author); err != nil {
		return Fixture{}, fmt.Errorf("LatestRequest: %w", err)
	}
	d.LatestRequest.Content = fj.LatestRequest.Content
	// Without one, the latest request of a person is the initial request,
	// as the engine has it when no person wrote after the first message.
	d.LatestPersonRequest = d.InitialRequest
	if r := fj.LatestPersonRequest; r != nil {
		if d.LatestPersonRequest.Author, err = fj.author(r.Author); err != nil {
			return Fixture{}, fmt.Errorf("LatestPersonRequest: %w", err)
		}
		d.LatestPersonRequest.Content = r.Content
	}
	// Without one, the exchange's request is the initial request, as the
	// engine has it in a thread never reopened.
	d.Request = d.InitialRequest
	if r := fj.Request; r != nil {
		if d.Request.Author, err = fj.author(r.Author); err != nil {
			return Fixture{}, fmt.Errorf("Request: %w", err)
		}
		d.Request.Content = r.Content
	}
	switch fj.ConcludeReason {
	case "", ConcludeEnd, ConcludePerson, ConcludeInactivity, ConcludeMaxTurns, ConcludeStalled, ConcludeBudget:
		d.ConcludeReason = fj.ConcludeReason
	default:
		return Fixture{}, fmt.Errorf("ConcludeReason %q is not one of %s, %s, %s, %s, %s, %s or empty",
			fj.ConcludeReason, ConcludeEnd, ConcludePerson, ConcludeInactivity, ConcludeMaxTurns, ConcludeStalled, ConcludeBudget)
	}
	d.KnownSessions = fj.KnownSessions
	if d.CloneOf, err = fj.author(fj.CloneOf); err != nil {
		return Fixture{}, fmt.Errorf("CloneOf: %w", err)
	}
	for i, mj := range fj.Messages {
		author, err := fj.author(mj.Author)
		if err != nil {
			return Fixture{}, fmt.Errorf("messages[%d]: %w", i, err)
		}
		f.Messages = append(f.Messages, FixtureMessage{Author: author, Content: mj.Content})
		in := mj.InExchange == nil || *mj.InExchange
		d.Messages = append(d.Messages, Message{Author: author, Content: mj.Content, Time: mj.At, InExchange: in})
		if in {
			d.ExchangeMessageCount++
		}
	}
	if fj.ExchangeMessageCount != nil {
		d.ExchangeMessageCount = *fj.ExchangeMessageCount
	}
	d.Vars = fj.Vars
	for i, h := range fj.SessionHistory {
		switch h.Role {
		case "user", "assistant", "system":
		default:
			return Fixture{}, fmt.Errorf("session_history[%d]: role %q is not user, assistant or system", i, h.Role)
		}
	}
	return f, nil
}

func (mj *memberJSON) member() (Member, error) {
	if mj.IsAgent {
		return Agent(AgentInfo{Name: mj.Name, EnsDomain: mj.EnsDomain, Owner: mj.Owner, Addresses: mj.Addresses, Attributes: mj.Attributes, SessionFormat: mj.SessionFormat, StandsFor: mj.StandsFor}), nil
	}
	if mj.EnsDomain != "" || mj.Owner != "" || mj.Addresses != nil || mj.Attributes != nil || mj.SessionFormat != "" || mj.StandsFor != "" {
		return Member{}, fmt.Errorf("member %q has agent fields but IsAgent is false", mj.Name)
	}
	return Person(mj.Name), nil
}

func (fj *fixtureJSON) author(a authorJSON) (Member, error) {
	switch {
	case a.member != nil:
		return a.member.member()
	case a.ref == "":
		return Member{}, nil
	}
	for _, mj := range fj.ChannelMembers {
		if mj.Name == a.ref || (mj.IsAgent && strings.EqualFold(mj.EnsDomain, a.ref)) {
			return mj.member()
		}
	}
	return Member{}, fmt.Errorf("author %q is not the Name or EnsDomain of a channel member", a.ref)
}
