package memory_test

import (
	"testing"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
)

// TestAppendOnly: the store reports the test Redis's appendonly setting
// as Redis itself does.
func TestAppendOnly(t *testing.T) {
	db := redistest.New(t)
	c := db.Client(t)
	res, err := c.ConfigGet(t.Context(), "appendonly").Result()
	if err != nil {
		t.Skipf("the test Redis denies CONFIG GET: %v", err)
	}
	s, err := memory.NewRedis(t.Context(), memory.RedisOptions{URL: db.URL, KeyPrefix: db.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	on, err := s.AppendOnly(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := res["appendonly"] == "yes"; on != want {
		t.Errorf("AppendOnly = %v, Redis says appendonly %q", on, res["appendonly"])
	}
}
