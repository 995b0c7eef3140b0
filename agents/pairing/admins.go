package pairing

import (
	"fmt"
	"slices"
)

// Everyone, as the one entry of slack.admins, lets anyone add and remove
// agents.
const Everyone = "*"

// Admins are the Slack users who may add and remove a channel's agents at
// run time (slack.admins): the users listed; everyone when the list is
// ["*"]; and when it is empty — the default, so that a fresh install is
// not open to every member — the workspace's admins and owners (Slack's
// users.info is_admin / is_owner, which the transport looks up).
type Admins []string

// WorkspaceRoles reports whether May needs to know if the user is a
// workspace admin or owner (the list is empty), so that the transport
// asks Slack only then.
func (a Admins) WorkspaceRoles() bool { return len(a) == 0 }

// May reports whether user may add and remove agents; workspaceAdmin is
// whether Slack says the user is an admin or owner of the workspace (it
// matters only when WorkspaceRoles).
func (a Admins) May(user string, workspaceAdmin bool) bool {
	switch {
	case len(a) == 0:
		return workspaceAdmin
	case slices.Contains(a, Everyone):
		return true
	default:
		return slices.Contains(a, user)
	}
}

// Who says, for the start-up log and refusals, who may add and remove
// agents.
func (a Admins) Who() string {
	switch {
	case len(a) == 0:
		return "workspace admins and owners"
	case slices.Contains(a, Everyone):
		return "everyone"
	case len(a) == 1:
		return "1 listed user"
	default:
		return fmt.Sprintf("%d listed users", len(a))
	}
}
