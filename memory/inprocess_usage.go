package memory

import (
	"context"
	"maps"
	"sync"
	"time"
)

// inUsage is the part of the in-process store that keeps the daily usage
// counters. It is guarded by the store's mutex, which a commit holds
// while it counts.
type inUsage struct {
	mu    *sync.Mutex // the store's
	clock func() time.Time
	days  map[string]map[string]string // day → field → value, as Redis keeps them
}

func newInUsage(mu *sync.Mutex, clock func() time.Time) inUsage {
	return inUsage{mu: mu, clock: clock, days: map[string]map[string]string{}}
}

// addUsage counts a commit's usage into today's counters and drops the
// days past UsageRetention; callers hold mu.
func (p *inUsage) addUsage(w usageWrites, now time.Time) {
	if len(w.incr) == 0 && len(w.names) == 0 {
		return
	}
	day := UsageDay(now)
	fields := p.days[day]
	if fields == nil {
		fields = map[string]string{}
		p.days[day] = fields
		oldest := UsageDay(now.Add(-UsageRetention))
		maps.DeleteFunc(p.days, func(d string, _ map[string]string) bool { return d < oldest })
	}
	for _, in := range w.incr {
		fields[in.field] = itoa(atoi(fields[in.field]) + in.by)
	}
	for _, n := range w.names {
		fields[n[0]] = n[1]
	}
}

// Usage implements UsageLog.
func (p *inUsage) Usage(_ context.Context, from, to time.Time) ([]UsageCount, error) {
	days, err := usageDays(from, to)
	if err != nil {
		return nil, usageErr(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []UsageCount
	for _, d := range days {
		out = append(out, usageCounts(d, p.days[d])...)
	}
	return out, nil
}

// Spent implements UsageLog.
func (p *inUsage) Spent(_ context.Context, person, channel string) (Spent, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fields := p.days[UsageDay(p.clock())]
	return spentOf(person, channel, func(f string) string { return fields[f] }), nil
}
