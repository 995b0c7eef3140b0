package memory_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/conclavehq/conclave/memory"
	"github.com/conclavehq/conclave/memory/redistest"
	"github.com/conclavehq/conclave/memory/storetest"
)

// BenchmarkTraceTotalBound is a commit adding a 1 KB trace, conversations
// taken in turn from 20,000, once 10,000 have one: under trace.max_bytes
// (nothing goes), and at a bound that keeps about 10,000 conversations'
// traces (each commit evicts the least recently traced). It reports the round trips per
// commit (the lock taken before it included).
func BenchmarkTraceTotalBound(b *testing.B) {
	body := storetest.TraceBody(1, 1000)
	for _, bound := range []struct {
		name  string
		bytes int
	}{{"under", 0}, {"at", 10_000 * 1_020}} {
		for _, store := range []string{"in-process", "redis", "redis-cluster-path"} {
			b.Run(bound.name+"/"+store, func(b *testing.B) {
				o := memory.Options{TraceTotalMaxBytes: bound.bytes}
				var s memory.Store
				var trips *redistest.RoundTrips
				if store == "in-process" {
					s = memory.NewInProcess(o)
				} else {
					r, t := redistest.New(b).CountedStore(b, o)
					if store == "redis-cluster-path" {
						r.ParkSessions()
					}
					s, trips = r, t
				}
				commit := func(i int) {
					id := fmt.Sprintf("conv-%d", i%20_000)
					l, err := s.AcquireLock(b.Context(), id, time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					c := memory.Commit{Conversation: memory.Conversation{ID: id, Channel: "C1", ThreadTS: id}, Release: true,
						Traces: []memory.TurnTrace{{TurnID: fmt.Sprintf("t%d", i), Body: body}}}
					if _, err := s.Commit(b.Context(), l, c); err != nil {
						b.Fatal(err)
					}
				}
				const kept = 10_000
				for i := range kept { // fills the store up to the bound
					commit(i)
				}
				n := 0
				var before int64
				if trips != nil {
					before = trips.Count()
				}
				for i := kept; b.Loop(); i++ {
					commit(i)
					n++
				}
				if trips != nil {
					b.ReportMetric(float64(trips.Count()-before)/float64(n), "trips/commit")
				}
			})
		}
	}
}
