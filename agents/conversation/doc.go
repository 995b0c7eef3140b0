// Package conversation is one conversation's rules as data: its state
// (State), the state machine that is the only writer of it (Machine), the
// routing decisions and the bookkeeping of its outbox. It does no I/O and
// takes no context: the engine (package agents) gathers what a decision
// needs (identities, the thread, the time), calls it, and carries out the
// effects it returns (reaction changes, posts, notices).
//
// The engine gets a Machine from Load and never holds the State itself:
// it reads it through Machine.Read and changes it only through the
// Machine's methods. The compiler keeps it so.
package conversation

import "strings"

// Kinds of message authors, as the store records them.
const (
	KindPerson = "person" // a Slack user not paired to a human agent
	KindHuman  = "human"  // a Slack user paired to a human agent (Agent set)
	KindBot    = "bot"    // another app's bot: content only
	KindAgent  = "agent"  // a reply posted by conclave for an agent
)

// Role is an agent's role as routing sees it (the engine converts the
// identity's role).
type Role string

// The roles routing tells apart.
const (
	RoleFacilitator Role = "facilitator"
	RoleExpert      Role = "expert"
	RoleClone       Role = "clone"
	RoleHuman       Role = "human"
)

// The channel's start policies (the engine's StartAll and StartMention).
const (
	StartAll     = "all"
	StartMention = "mention"
)

// IsPersonKind reports whether a message of kind was written by a person
// or a human agent.
func IsPersonKind(kind string) bool { return kind == KindPerson || kind == KindHuman }

// LessTS orders Slack timestamps numerically.
func LessTS(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}
