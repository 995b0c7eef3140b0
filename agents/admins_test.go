package agents

import "testing"

func TestAdminsMay(t *testing.T) {
	tests := []struct {
		admins Admins
		user   string
		want   bool
	}{
		{nil, "U1", true},
		{Admins{}, "U1", true},
		{Admins{"U1", "W2"}, "U1", true},
		{Admins{"U1", "W2"}, "W2", true},
		{Admins{"U1", "W2"}, "U3", false},
		{Admins{"U1"}, "", false},
	}
	for _, tt := range tests {
		if got := tt.admins.May(tt.user); got != tt.want {
			t.Errorf("%v.May(%q) = %v, want %v", tt.admins, tt.user, got, tt.want)
		}
	}
}
