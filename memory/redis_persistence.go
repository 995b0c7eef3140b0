package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrPersistenceUnknown reports that Redis would not say how it persists
// (CONFIG is renamed or denied, as managed services often do).
var ErrPersistenceUnknown = errors.New("memory: Redis persistence cannot be read")

// AppendOnly reports whether Redis writes its append-only file
// (appendonly yes): without it, a restart of Redis loses everything
// written since its last snapshot. The error wraps ErrPersistenceUnknown
// when CONFIG GET is not allowed.
func (s *Redis) AppendOnly(ctx context.Context) (bool, error) {
	res, err := s.c.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrPersistenceUnknown, err)
	}
	v, ok := res["appendonly"]
	if !ok {
		return false, fmt.Errorf("%w: CONFIG GET appendonly returned nothing", ErrPersistenceUnknown)
	}
	return strings.EqualFold(v, "yes"), nil
}
