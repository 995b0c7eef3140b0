package agents_test

import "github.com/conclavehq/conclave/agents"
import "testing"

func TestAdminsMay(t *testing.T) {
	tests := []struct {
		admins         agents.Admins
		user           string
		workspaceAdmin bool
		want           bool
	}{
		// Empty (the default): the workspace's admins and owners only.
		{nil, "U1", false, false},
		{agents.Admins{}, "U1", false, false},
		{nil, "U1", true, true},
		{agents.Admins{}, "U1", true, true},
		// ["*"]: everyone.
		{agents.Admins{agents.Everyone}, "U1", false, true},
		{agents.Admins{agents.Everyone}, "W9", true, true},
		// A list: those listed, whatever their role in the workspace.
		{agents.Admins{"U1", "W2"}, "U1", false, true},
		{agents.Admins{"U1", "W2"}, "W2", false, true},
		{agents.Admins{"U1", "W2"}, "U3", false, false},
		{agents.Admins{"U1", "W2"}, "U3", true, false},
		{agents.Admins{"U1"}, "", false, false},
	}
	for _, tt := range tests {
		if got := tt.admins.May(tt.user, tt.workspaceAdmin); got != tt.want {
			t.Errorf("%v.May(%q, %v) = %v, want %v", tt.admins, tt.user, tt.workspaceAdmin, got, tt.want)
		}
	}
}

func TestAdminsWho(t *testing.T) {
	for _, tt := range []struct {
		admins agents.Admins
		roles  bool
		want   string
	}{
		{nil, true, "workspace admins and owners"},
		{agents.Admins{agents.Everyone}, false, "everyone"},
		{agents.Admins{"U1"}, false, "1 listed user"},
		{agents.Admins{"U1", "W2"}, false, "2 listed users"},
	} {
		if got := tt.admins.Who(); got != tt.want {
			t.Errorf("%v.Who() = %q, want %q", tt.admins, got, tt.want)
		}
		if got := tt.admins.WorkspaceRoles(); got != tt.roles {
			t.Errorf("%v.WorkspaceRoles() = %v, want %v", tt.admins, got, tt.roles)
		}
	}
}
