package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// UsageRetention is how long a day's usage counters are kept: the usage
// report reaches back a year and a bit, whatever the trace retention.
const UsageRetention = 400 * 24 * time.Hour

// Usage is what one turn spent on one model, as the endpoint reported it.
// A commit carrying it adds it to the counters of the store's current
// UTC day, atomically with the rest of the commit.
type Usage struct {
	Person       string // Slack user id of the exchange's person ("" when none)
	PersonName   string // their display name, for the report
	Channel      string // the conversation's channel
	Agent        string // the agent's ENS name
	AgentName    string // its display name, for the report
	Model        string // the model asked for
	InputTokens  int64
	OutputTokens int64
	Calls        int64 // model calls made
}

// Usage groups: what a UsageCount counts by.
const (
	UsageByPerson  = "person"
	UsageByChannel = "channel"
	UsageByAgent   = "agent"
)

// UsageCount is one counter group of one day: what a person, a channel
// or an agent spent on one model.
type UsageCount struct {
	Day          string // YYYY-MM-DD, UTC
	By           string // UsageByPerson, UsageByChannel or UsageByAgent
	Group        string // the person's user id, the channel id or the agent's ENS name
	Name         string // the group's display name when one was recorded
	Model        string
	InputTokens  int64
	OutputTokens int64
	Calls        int64
}

// Spent is what today's (UTC) counters hold of a turn's budgets, in
// tokens (input and output).
type Spent struct {
	Person    int64
	Channel   int64
	Workspace int64
}

// UsageLog keeps the daily usage counters that commits write.
type UsageLog interface {
	// Usage reads the counters of the UTC days from from's through to's,
	// oldest first; days without usage read as nothing. An error when to
	// is before from.
	Usage(ctx context.Context, from, to time.Time) ([]UsageCount, error)
	// Spent reads today's token totals of a person (none when ""), a
	// channel (none when "") and the workspace, today being the store
	// clock's UTC day.
	Spent(ctx context.Context, person, channel string) (Spent, error)
}

// UsageDay is the day a time counts in: its UTC date.
func UsageDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// The hash fields of a day's counters. A group's counter is
// "<by>␟<group>␟<model>␟<i|o|c>"; a budget's total
// "t␟<by>␟<group>" (by p, c or w, the workspace's group empty); a
// display name "n␟<by>␟<group>". IDs and model names hold no ␟.
const (
	usageSep    = "\x1f"
	usageTotal  = "t"
	usageName   = "n"
	totalPerson = "p"
	totalChan   = "c"
	totalSpace  = "w"
)

// usageIncrement is one counter's increment.
type usageIncrement struct {
	field string
	by    int64
}

// usageWrites is what a commit's usage does to its day's counters.
type usageWrites struct {
	incr  []usageIncrement
	names [][2]string // field, name
}

func usageField(by, group, model, counter string) string {
	return by + usageSep + group + usageSep + model + usageSep + counter
}

func totalField(by, group string) string { return usageTotal + usageSep + by + usageSep + group }

// usageWritesOf turns a commit's usage into counter increments, merged
// per field so that a commit of many turns makes each increment once.
func usageWritesOf(us []Usage) (usageWrites, error) {
	var w usageWrites
	at := map[string]int{}
	add := func(field string, by int64) {
		if by == 0 {
			return
		}
		if i, ok := at[field]; ok {
			w.incr[i].by += by
			return
		}
		at[field] = len(w.incr)
		w.incr = append(w.incr, usageIncrement{field, by})
	}
	named := map[string]bool{}
	name := func(by, group, n string) {
		f := usageName + usageSep + by + usageSep + group
		if n == "" || group == "" || named[f] {
			return
		}
		named[f] = true
		w.names = append(w.names, [2]string{f, n})
	}
	for _, u := range us {
		if err := checkUsage(u); err != nil {
			return usageWrites{}, err
		}
		tokens := u.InputTokens + u.OutputTokens
		for _, g := range [...]struct{ by, group string }{
			{UsageByPerson, u.Person}, {UsageByChannel, u.Channel}, {UsageByAgent, u.Agent},
		} {
			if g.group == "" {
				continue
			}
			add(usageField(g.by, g.group, u.Model, "i"), u.InputTokens)
			add(usageField(g.by, g.group, u.Model, "o"), u.OutputTokens)
			add(usageField(g.by, g.group, u.Model, "c"), u.Calls)
		}
		if u.Person != "" {
			add(totalField(totalPerson, u.Person), tokens)
		}
		add(totalField(totalChan, u.Channel), tokens)
		add(totalField(totalSpace, ""), tokens)
		name(UsageByPerson, u.Person, u.PersonName)
		name(UsageByAgent, u.Agent, u.AgentName)
	}
	return w, nil
}

// checkUsage refuses what the counters cannot hold.
func checkUsage(u Usage) error {
	switch {
	case u.Channel == "" || u.Agent == "" || u.Model == "":
		return errors.New("usage needs a channel, an agent and a model")
	case u.InputTokens < 0 || u.OutputTokens < 0 || u.Calls < 0:
		return fmt.Errorf("usage of %s: negative counts", u.Agent)
	}
	for _, s := range [...]string{u.Person, u.Channel, u.Agent, u.Model} {
		if strings.Contains(s, usageSep) {
			return fmt.Errorf("usage of %s: %q holds a unit separator", u.Agent, s)
		}
	}
	return nil
}

// usageDays lists the days from from's through to's.
func usageDays(from, to time.Time) ([]string, error) {
	from, to = from.UTC(), to.UTC()
	first := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
	last := time.Date(to.Year(), to.Month(), to.Day(), 0, 0, 0, 0, time.UTC)
	if last.Before(first) {
		return nil, fmt.Errorf("usage from %s to %s: the end is before the start", UsageDay(from), UsageDay(to))
	}
	if last.Sub(first) > UsageRetention {
		first = last.Add(-UsageRetention)
	}
	var days []string
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		days = append(days, UsageDay(d))
	}
	return days, nil
}

// usageCounts reads one day's counters (its hash fields and values) into
// counts, one per group and model, ordered by group and model. A
// field it does not know is skipped (a later version's).
func usageCounts(day string, fields map[string]string) []UsageCount {
	names := map[string]string{}
	for f, v := range fields {
		if rest, ok := strings.CutPrefix(f, usageName+usageSep); ok {
			names[rest] = v
		}
	}
	var out []UsageCount
	at := map[string]int{}
	for f, v := range fields {
		parts := strings.Split(f, usageSep)
		if len(parts) != 4 {
			continue
		}
		by, group, model, counter := parts[0], parts[1], parts[2], parts[3]
		if by != UsageByPerson && by != UsageByChannel && by != UsageByAgent {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		key := by + usageSep + group + usageSep + model
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, UsageCount{Day: day, By: by, Group: group, Model: model,
				Name: names[by+usageSep+group]})
		}
		switch counter {
		case "i":
			out[i].InputTokens += n
		case "o":
			out[i].OutputTokens += n
		case "c":
			out[i].Calls += n
		}
	}
	slices.SortFunc(out, func(a, b UsageCount) int {
		return cmp.Or(strings.Compare(a.By, b.By), strings.Compare(a.Group, b.Group), strings.Compare(a.Model, b.Model))
	})
	return out
}

// spentOf reads the budget totals of a day's fields (missing ones read
// as 0).
func spentOf(person, channel string, get func(field string) string) Spent {
	n := func(f string) int64 { return atoi(get(f)) }
	var s Spent
	if person != "" {
		s.Person = n(totalField(totalPerson, person))
	}
	if channel != "" {
		s.Channel = n(totalField(totalChan, channel))
	}
	s.Workspace = n(totalField(totalSpace, ""))
	return s
}

// spentFields are the hash fields a SpentQuery reads.
func spentFields(q *SpentQuery) []string {
	fields := []string{totalField(totalSpace, "")}
	if q.Channel != "" {
		fields = append(fields, totalField(totalChan, q.Channel))
	}
	for _, p := range q.People {
		if p != "" {
			fields = append(fields, totalField(totalPerson, p))
		}
	}
	return fields
}

// spentFound reads what q asks of a day's fields, keyed by person.
func spentFound(q *SpentQuery, get func(field string) string) map[string]Spent {
	out := map[string]Spent{"": spentOf("", q.Channel, get)}
	for _, p := range q.People {
		out[p] = spentOf(p, q.Channel, get)
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func usageErr(err error) error { return fmt.Errorf("memory: usage: %w", err) }
