package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/conclavehq/conclave/memory"
)

// usageGroupings are the --by values of conclave usage.
var usageGroupings = []string{memory.UsageByPerson, memory.UsageByChannel, memory.UsageByAgent, "model"}

// runUsage prints what the model calls of a period cost, one row per
// person, channel, agent or model, from the store's daily counters.
func runUsage(ctx context.Context, args []string, e env) error {
	fs := newFlags("usage", e)
	load := configFlag(fs, e)
	since := fs.Duration("since", 24*time.Hour, "how far back to count; the counters are per UTC day, so every day the period touches counts whole")
	by := fs.String("by", memory.UsageByAgent, "one row per person, channel, agent or model")
	asJSON := fs.Bool("json", false, "print one JSON object a line")
	if err := parseFlags(fs, args, e); err != nil {
		return err
	}
	if !slices.Contains(usageGroupings, *by) {
		return fmt.Errorf("%w: --by must be person, channel, agent or model (got %q)", errUsage, *by)
	}
	if *since <= 0 {
		return fmt.Errorf("%w: --since must be a positive duration such as 24h or 720h (got %s)", errUsage, *since)
	}
	cfg, _, err := load()
	if err != nil {
		return err
	}
	store, err := openRedis(ctx, "usage", cfg, "")
	if err != nil {
		return err
	}
	defer store.Close()
	now := time.Now()
	counts, err := store.Usage(ctx, now.Add(-*since), now)
	if err != nil {
		return err
	}
	rows, total := usageRows(counts, *by, pricesOf(cfg.LLM))
	if *asJSON {
		return writeUsageJSON(e.stdout, rows)
	}
	return writeUsageTable(e.stdout, rows, total, *by)
}

// usageRow is one line of the report.
type usageRow struct {
	Group        string   `json:"group"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	Calls        int64    `json:"calls"`
	CostUSD      *float64 `json:"cost_usd"` // null when none of its models has a price
}

// usageRows sums the counters into one row per group of by, the most
// tokens first, and their total. Every call counts once per kind of
// group, so the agents' counters make the models' rows and the total.
// A row's cost adds up its priced models.
func usageRows[P interface{ Cost(in, out int64) float64 }](counts []memory.UsageCount, by string, prices map[string]P) ([]usageRow, usageRow) {
	kind := by
	if by == "model" {
		kind = memory.UsageByAgent
	}
	var rows []usageRow
	at := map[string]int{}
	total := usageRow{Group: "total"}
	add := func(r *usageRow, c memory.UsageCount) {
		r.InputTokens += c.InputTokens
		r.OutputTokens += c.OutputTokens
		r.Calls += c.Calls
		if p, ok := prices[c.Model]; ok {
			cost := p.Cost(c.InputTokens, c.OutputTokens)
			if r.CostUSD != nil {
				cost += *r.CostUSD
			}
			r.CostUSD = &cost
		}
	}
	for _, c := range counts {
		if c.By == memory.UsageByAgent {
			add(&total, c)
		}
		if c.By != kind {
			continue
		}
		group := c.Group
		switch {
		case by == "model":
			group = c.Model
		case c.Name != "":
			group = c.Name + " (" + c.Group + ")"
		}
		i, ok := at[group]
		if !ok {
			i = len(rows)
			at[group] = i
			rows = append(rows, usageRow{Group: group})
		}
		add(&rows[i], c)
	}
	slices.SortStableFunc(rows, func(a, b usageRow) int {
		return cmp.Or(cmp.Compare(b.InputTokens+b.OutputTokens, a.InputTokens+a.OutputTokens), cmp.Compare(a.Group, b.Group))
	})
	return rows, total
}

func writeUsageJSON(w io.Writer, rows []usageRow) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func writeUsageTable(w io.Writer, rows []usageRow, total usageRow, by string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tinput tokens\toutput tokens\tcalls\tcost (USD)\t\n", by)
	for _, r := range append(rows, total) {
		cost := "-"
		if r.CostUSD != nil {
			cost = fmt.Sprintf("%.4f", *r.CostUSD)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", r.Group, r.InputTokens, r.OutputTokens, r.Calls, cost)
	}
	return tw.Flush()
}
