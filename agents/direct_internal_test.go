package agents

import "testing"

// rosterOf maps a one-to-one DM ("D…") to DirectChannel when it is set,
// and leaves every other channel, and every DM without it, alone; the
// expert memory namespace follows.
func TestRosterOfDirectMessages(t *testing.T) {
	on := Options{DirectChannel: "C1", SessionScope: ScopeChannel}
	off := Options{SessionScope: ScopeChannel}
	for _, tt := range []struct {
		o       *Options
		channel string
		want    string
	}{
		{&on, "D7", "C1"}, {&on, "C2", "C2"}, {&on, "G3", "G3"}, {&off, "D7", "D7"},
	} {
		if got := tt.o.rosterOf(tt.channel); got != tt.want {
			t.Errorf("rosterOf(%s) with DirectChannel %q = %s, want %s", tt.channel, tt.o.DirectChannel, got, tt.want)
		}
		if got, want := expertNamespace(tt.o, tt.channel, "x.eth"), ExpertNamespace("x.eth", tt.want); got != want {
			t.Errorf("expertNamespace(%s) = %s, want %s", tt.channel, got, want)
		}
	}
}
