package grafana

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Query is one target of a dashboard panel, as Grafana loads it.
type Query struct {
	Dashboard, Panel, PanelType, RefID string
	// DatasourceUID is the target's datasource, else its panel's.
	DatasourceUID string
	// Language is promql, logql or traceql, from the datasource.
	Language string
	Expr     string
}

func (q Query) String() string {
	return fmt.Sprintf("%s / %q target %s", q.Dashboard, q.Panel, q.RefID)
}

var languageOf = map[string]string{PrometheusUID: "promql", LokiUID: "logql", TempoUID: "traceql"}

// Queries reads a dashboard's JSON and returns the targets of every panel,
// rows' panels included.
func Queries(dashboardFile string, raw []byte) ([]Query, error) {
	var d struct {
		Panels []panelJSON `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", dashboardFile, err)
	}
	var out []Query
	var walk func(panels []panelJSON) error
	walk = func(panels []panelJSON) error {
		for _, p := range panels {
			if err := walk(p.Panels); err != nil {
				return err
			}
			for _, t := range p.Targets {
				q := Query{Dashboard: dashboardFile, Panel: p.Title, PanelType: p.Type, RefID: t.RefID, DatasourceUID: p.Datasource.UID, Expr: t.Expr}
				if t.Datasource.UID != "" {
					q.DatasourceUID = t.Datasource.UID
				}
				if t.Query != "" {
					q.Expr = t.Query
				}
				lang, ok := languageOf[q.DatasourceUID]
				if !ok {
					return fmt.Errorf("%s: its datasource %q is none of the provisioned ones", q, q.DatasourceUID)
				}
				q.Language = lang
				out = append(out, q)
			}
		}
		return nil
	}
	return out, walk(d.Panels)
}

type panelJSON struct {
	Title      string      `json:"title"`
	Type       string      `json:"type"`
	Datasource refJSON     `json:"datasource"`
	Panels     []panelJSON `json:"panels"`
	Targets    []struct {
		RefID      string  `json:"refId"`
		Datasource refJSON `json:"datasource"`
		Expr       string  `json:"expr"`
		Query      string  `json:"query"`
	} `json:"targets"`
}

type refJSON struct {
	UID string `json:"uid"`
}

// grafanaIntervals are the built-in variables the dashboards use; each is a
// duration Grafana picks from the time range.
var grafanaIntervals = regexp.MustCompile(`\$__(rate_interval|interval|auto)\b`)

// Expanded is the query with Grafana's interval variables set to interval,
// as Grafana sends it. A variable the dashboards do not define is an error.
func (q Query) Expanded(interval string) (string, error) {
	expr := grafanaIntervals.ReplaceAllString(q.Expr, interval)
	if i := strings.IndexByte(expr, '$'); i >= 0 {
		return "", fmt.Errorf("%s uses a variable no dashboard defines: %s", q, expr[i:])
	}
	return expr, nil
}
