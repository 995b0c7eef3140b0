package agents_test

import (
	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/memory"
)

// Both stores satisfy the engine's ports, without knowing them.
var (
	_ agents.Store = (*memory.InProcess)(nil)
	_ agents.Store = (*memory.Redis)(nil)
)
