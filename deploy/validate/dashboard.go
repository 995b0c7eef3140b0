package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// dashboard is the part of a Grafana dashboard's JSON model that
// deploy/grafana writes. It is decoded refusing unknown fields, so a
// misspelt key (targets, gridPos, datasource) is an error; a panel's
// fieldConfig and options belong to its plugin and are kept as written.
type dashboard struct {
	Title         string   `json:"title"`
	UID           string   `json:"uid"`
	Description   string   `json:"description"`
	Tags          []string `json:"tags"`
	Timezone      string   `json:"timezone"`
	Editable      bool     `json:"editable"`
	GraphTooltip  int      `json:"graphTooltip"`
	SchemaVersion int      `json:"schemaVersion"`
	Version       int      `json:"version"`
	Refresh       string   `json:"refresh"`
	Time          struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Templating struct {
		List []dashboardVariable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// dashboardVariable is a template variable ($datasource, $namespace, $job).
type dashboardVariable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Datasource *datasourceRef `json:"datasource"`
	Query      string         `json:"query"`
	Refresh    int            `json:"refresh"`
	IncludeAll bool           `json:"includeAll"`
	AllValue   string         `json:"allValue"`
	Multi      bool           `json:"multi"`
	Sort       int            `json:"sort"`
}

// datasourceRef names a data source.
type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// panel is one panel, or a row holding none (rows are not collapsed).
type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Collapsed   bool           `json:"collapsed"`
	Datasource  *datasourceRef `json:"datasource"`
	GridPos     struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Targets []struct {
		RefID        string         `json:"refId"`
		Datasource   *datasourceRef `json:"datasource"`
		Expr         string         `json:"expr"`
		LegendFormat string         `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig json.RawMessage `json:"fieldConfig"`
	Options     json.RawMessage `json:"options"`
	Panels      []panel         `json:"panels"`
}

// dashboardDatasource is the data source every panel and query uses: the
// dashboard's variable, so an import picks its Prometheus.
const dashboardDatasource = "${datasource}"

// dashboardScope is the matcher every conclave_ series of a query carries,
// so that the $job variable picks one deployment.
const dashboardScope = `job=~"$job"`

// panelTypes are the panel plugins the dashboard may use (built into
// Grafana).
var panelTypes = []string{"row", "timeseries", "stat", "gauge", "bargauge", "table"}

// dashboardSeries are what the dashboard must show (SPEC §14.8: the alerts'
// subjects, and cost).
var dashboardSeries = []string{
	"conclave_turn_failures_total", "conclave_llm_request_duration_seconds_count",
	"conclave_posts_pending", "conclave_budget_used_ratio", "conclave_llm_tokens_total",
	"conclave_llm_cost_usd_total",
}

// checkDashboard decodes the dashboard at path strictly and checks it:
// a uid and title, a Prometheus data-source variable that every panel
// and query uses, unique panel ids and refIds, panels inside the
// 24-column grid that do not overlap, and queries whose brackets pair up
// and that read series conclave exports, scoped by $job.
func checkDashboard(path string, known map[string]bool) []string {
	data, err := os.ReadFile(path) // #nosec G304 G703 -- the repository's own dashboard, at a fixed path
	if err != nil {
		return []string{err.Error()}
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	if d.UID == "" || len(d.UID) > 40 || d.Title == "" {
		bad("needs a title and a uid of at most 40 characters")
	}
	if !slices.ContainsFunc(d.Templating.List, func(v dashboardVariable) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}) {
		bad("needs a variable datasource of type datasource (query prometheus)")
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != dashboardDatasource) {
			bad("variable %s must query %s", v.Name, dashboardDatasource)
		}
	}
	var exprs []string
	ids := map[int]bool{}
	var placed []panel
	for _, p := range d.Panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] || p.ID == 0 {
			bad("%s: ids must be unique and not 0", where)
		}
		ids[p.ID] = true
		if !slices.Contains(panelTypes, p.Type) {
			bad("%s: type %q is not one of %s", where, p.Type, strings.Join(panelTypes, ", "))
		}
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			bad("%s: gridPos %+v is outside the 24-column grid", where, g)
		}
		for _, q := range placed {
			if h := q.GridPos; g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				bad("%s overlaps panel %d", where, q.ID)
			}
		}
		placed = append(placed, p)
		if p.Type == "row" {
			if p.Collapsed || len(p.Panels) > 0 || len(p.Targets) > 0 {
				bad("%s: a row holds no panels or queries of its own", where)
			}
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != dashboardDatasource || len(p.Targets) == 0 {
			bad("%s: needs queries on %s", where, dashboardDatasource)
		}
		refs := map[string]bool{}
		for _, t := range p.Targets {
			exprs = append(exprs, t.Expr)
			switch {
			case t.RefID == "" || refs[t.RefID]:
				bad("%s: refIds must be unique", where)
			case t.Datasource == nil || t.Datasource.UID != dashboardDatasource:
				bad("%s: query %s must use %s", where, t.RefID, dashboardDatasource)
			case strings.TrimSpace(t.Expr) == "" || !balanced(t.Expr):
				bad("%s: query %s: %q is empty or its brackets do not pair up", where, t.RefID, t.Expr)
			}
			refs[t.RefID] = true
			if u := unknownMetrics(t.Expr, known); len(u) > 0 {
				bad("%s: query %s reads %s, which conclave does not export", where, t.RefID, strings.Join(u, ", "))
			}
			if u := unscoped(t.Expr, dashboardScope); len(u) > 0 {
				bad("%s: query %s reads %s without %s", where, t.RefID, strings.Join(u, ", "), dashboardScope)
			}
		}
	}
	for _, s := range dashboardSeries {
		if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, s) }) {
			bad("no panel shows %s", s)
		}
	}
	return problems
}
