package chaintest

import (
	"context"
	"testing"

	"github.com/conclavehq/conclave/ens"
)

// BenchmarkResolve measures one resolution on the simulated chain, cold
// (the cache forgot the name) and warm (a cache hit), and reports the
// eth_calls each makes as rpc-calls/op.
func BenchmarkResolve(b *testing.B) {
	w := newWorld(b)
	cases := []struct {
		name, ens string
		cold      bool
	}{
		{"6022/cold", "claudine.acme.137.protocol6022.eth", true},
		{"6022/warm", "claudine.acme.137.protocol6022.eth", false},
		{"6022-second-base/cold", "arnaud.acme.137.protocol6022.eth", true},
		{"6022-clone/cold", "arnaud-twin.acme.137.protocol6022.eth", true},
		{"standard/cold", "alice.eth", true},
		{"wildcard-ccip/cold", "bob.post.eth", true},
		{"wildcard-ccip/warm", "bob.post.eth", false},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			d, calls := w.directory(b, ens.Options{Gateway: ens.GatewayOptions{AllowHTTP: true, AllowPrivate: true}})
			ctx := context.Background()
			if _, err := d.Resolve(ctx, bc.ens); err != nil {
				b.Fatal(err)
			}
			calls.calls.Store(0)
			for b.Loop() {
				if bc.cold {
					d.Forget(bc.ens)
				}
				if _, err := d.Resolve(ctx, bc.ens); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(calls.calls.Load())/float64(b.N), "rpc-calls/op")
		})
	}
}
