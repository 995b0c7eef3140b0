package agents_test

import (
	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/memory"
)

// storePorts is each of the engine's ports on the store, as one store
// (memory's, or a test's wrapper of it) is them all; the engine takes
// them one by one (Deps).
type storePorts interface {
	agents.Inbound
	agents.Conversations
	agents.Locks
	agents.Sessions
	agents.Registry
	agents.Pairings
}

// Both stores satisfy the engine's ports, without knowing them.
var (
	_ storePorts = (*memory.InProcess)(nil)
	_ storePorts = (*memory.Redis)(nil)
)
