package pairing

import "testing"

func TestAdminsMay(t *testing.T) {
	tests := []struct {
		admins         Admins
		user           string
		workspaceAdmin bool
		want           bool
	}{
		// Empty (the default): the workspace's admins and owners only.
		{nil, "U1", false, false},
		{Admins{}, "U1", false, false},
		{nil, "U1", true, true},
		{Admins{}, "U1", true, true},
		// ["*"]: everyone.
		{Admins{Everyone}, "U1", false, true},
		{Admins{Everyone}, "W9", true, true},
		// A list: those listed, whatever their role in the workspace.
		{Admins{"U1", "W2"}, "U1", false, true},
		{Admins{"U1", "W2"}, "W2", false, true},
		{Admins{"U1", "W2"}, "U3", false, false},
		{Admins{"U1", "W2"}, "U3", true, false},
		{Admins{"U1"}, "", false, false},
	}
	for _, tt := range tests {
		if got := tt.admins.May(tt.user, tt.workspaceAdmin); got != tt.want {
			t.Errorf("%v.May(%q, %v) = %v, want %v", tt.admins, tt.user, tt.workspaceAdmin, got, tt.want)
		}
	}
}

func TestAdminsWho(t *testing.T) {
	for _, tt := range []struct {
		admins Admins
		roles  bool
		want   string
	}{
		{nil, true, "workspace admins and owners"},
		{Admins{Everyone}, false, "everyone"},
		{Admins{"U1"}, false, "1 listed user"},
		{Admins{"U1", "W2"}, false, "2 listed users"},
	} {
		if got := tt.admins.Who(); got != tt.want {
			t.Errorf("%v.Who() = %q, want %q", tt.admins, got, tt.want)
		}
		if got := tt.admins.WorkspaceRoles(); got != tt.roles {
			t.Errorf("%v.WorkspaceRoles() = %v, want %v", tt.admins, got, tt.roles)
		}
	}
}
