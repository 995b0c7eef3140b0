// Package gcpace sets how often the garbage collector of a conclave
// process runs.
//
// conclave's live heap is small (tens of MB) while a turn allocates
// about 130 KB that it drops at once (requests, responses, the thread's
// JSON). With Go's default pace (GOGC=100: collect when the heap doubles)
// the collector ran some 25 times a second under load and took about a
// sixth of the process's CPU, counting the goroutines' stacks it shrinks
// at each cycle and the next turns grow again. Collecting when the heap
// triples lets the heap reach three times what a collection leaves
// instead of two, for about a tenth less CPU per turn
// (docs/BENCHMARKS.md).
package gcpace

import (
	"runtime/debug"
)

// Percent is the collector's pace conclave runs at (GOGC's unit): a
// collection when the heap has grown by this percentage of what the last
// one left.
const Percent = 200

// Set sets the pace to Percent unless the GOGC environment variable sets
// one, and returns the pace in effect and where it came from.
func Set(getenv func(string) string) (percent int, fromEnv bool) {
	if getenv("GOGC") != "" {
		// The runtime read it at start; reading it back restores it.
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p, true
	}
	debug.SetGCPercent(Percent)
	return Percent, false
}
