package redistest_test

import (
	"net"
	"testing"

	"github.com/conclavehq/conclave/memory/redistest"
)

// TestPrefixCleanup: a test's keys are gone when it ends, other keys stay.
func TestPrefixCleanup(t *testing.T) {
	outer := redistest.New(t)
	c := outer.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, outer.Prefix+"keep", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var inner redistest.DB
	t.Run("writes", func(t *testing.T) {
		inner = redistest.New(t)
		if inner.Prefix == outer.Prefix {
			t.Fatal("two tests share a prefix")
		}
		for _, k := range []string{"a", "{tag}:b", "c:d"} {
			if err := c.Set(ctx, inner.Prefix+k, "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n, err := c.Keys(ctx, inner.Prefix+"*").Result(); err != nil || len(n) != 0 {
		t.Errorf("keys left after the test: %q, %v", n, err)
	}
	if n, err := c.Exists(ctx, outer.Prefix+"keep").Result(); err != nil || n != 1 {
		t.Errorf("another test's key was deleted: %v, %v", n, err)
	}
}

// TestServerRestartKeepsData: a dedicated server restarts on its port with
// its data.
func TestServerRestartKeepsData(t *testing.T) {
	srv := redistest.Start(t)
	db := redistest.WithPrefix(t, srv.URL())
	c := db.Client(t)
	if err := c.Set(t.Context(), db.Prefix+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	if v, err := c.Get(t.Context(), db.Prefix+"k").Result(); err != nil || v != "v" {
		t.Errorf("after a restart: %q, %v; want v", v, err)
	}
}

// TestProxyDownAndUp: through a proxy that is down, Redis is refused and a
// connection open before is cut; once it is up the same URL works again.
func TestProxyDownAndUp(t *testing.T) {
	proxy, db := redistest.NewProxy(t, redistest.New(t))
	c := db.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, db.Prefix+"k", "v", 0).Err(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	proxy.Down()
	if _, err := net.Dial("tcp", proxy.Addr()); err == nil {
		t.Error("the proxy accepted a connection while down")
	}
	if err := c.Get(ctx, db.Prefix+"k").Err(); err == nil {
		t.Error("a command went through while the proxy was down")
	}
	proxy.Up()
	if v, err := c.Get(ctx, db.Prefix+"k").Result(); err != nil || v != "v" {
		t.Errorf("once up again: %q, %v; want v", v, err)
	}
}
