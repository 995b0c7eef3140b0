package gcpace

import (
	"runtime/debug"
	"testing"
)

func TestSet(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)

	if p, fromEnv := Set(func(string) string { return "" }); p != Percent || fromEnv {
		t.Errorf("Set without GOGC = %d, %v; want %d, false", p, fromEnv, Percent)
	}
	if got := debug.SetGCPercent(100); got != Percent {
		t.Errorf("pace after Set = %d, want %d", got, Percent)
	}

	// GOGC set: the pace the runtime took from it stays.
	debug.SetGCPercent(150)
	env := map[string]string{"GOGC": "150"}
	if p, fromEnv := Set(func(k string) string { return env[k] }); p != 150 || !fromEnv {
		t.Errorf("Set with GOGC=150 = %d, %v; want 150, true", p, fromEnv)
	}
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("pace after Set with GOGC = %d, want 150", got)
	}
}
