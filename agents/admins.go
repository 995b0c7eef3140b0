package agents

import "slices"

// Admins are the Slack users who may add and remove a channel's agents at
// run time (slack.admins). When none are listed, anyone may.
type Admins []string

// May reports whether user may add and remove agents.
func (a Admins) May(user string) bool {
	return len(a) == 0 || slices.Contains(a, user)
}
