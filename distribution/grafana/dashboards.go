// Package grafana builds Loom's Grafana dashboards as code, with the Grafana
// Foundation SDK. `make generate` writes them to dashboards/*.json, which the
// provisioning files under provisioning/ load; the tests check the committed
// JSON against this code, the queries' syntax and names, and (test/e2e) every
// PromQL query against a real Prometheus scraping a running Loom.
package grafana

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/logs"
	"github.com/grafana/grafana-foundation-sdk/go/loki"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/tempo"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The datasource UIDs that provisioning/datasources/loom.yaml gives.
const (
	PrometheusUID = "loom-prometheus"
	LokiUID       = "loom-loki"
	TempoUID      = "loom-tempo"
)

// dashboardBuilder builds the classic dashboard JSON model, which Grafana's
// file provisioning loads; the SDK deprecates it in favour of the v2 schema,
// which only Grafana 12's new dashboard API reads.
//
//nolint:staticcheck // the classic model on purpose, see above
type dashboardBuilder = dashboard.DashboardBuilder

// Dashboard is one dashboard and the file it is written to.
type Dashboard struct {
	File    string
	builder *dashboardBuilder
}

// Dashboards are Loom's dashboards, in the order of their files.
func Dashboards() []Dashboard {
	return []Dashboard{
		{File: "loom-gpu.json", builder: gpuOverview()},
		{File: "loom-golden-fields.json", builder: goldenFieldQuality()},
		{File: "loom-sampling.json", builder: sampling()},
		{File: "loom-pipeline.json", builder: pipelineHealth()},
		{File: "loom-serving.json", builder: servingEngines()},
	}
}

// JSON is the dashboard as Grafana loads it.
func (d Dashboard) JSON() ([]byte, error) {
	built, err := d.builder.Build()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.File, err)
	}
	// Panel ids are unique within a dashboard; links to a panel use them.
	for i, p := range built.Panels {
		id := uint32(i + 1)
		if p.Panel != nil {
			p.Panel.Id = &id
		} else if p.RowPanel != nil {
			p.RowPanel.Id = id
		}
	}
	out, err := json.MarshalIndent(built, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func newDashboard(uid, title, description string) *dashboardBuilder {
	//nolint:staticcheck // the classic model, see dashboardBuilder
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"loom"}).
		Editable().
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("Loom").Type(dashboard.DashboardLinkTypeDashboards).Tags([]string{"loom"}).AsDropdown(true))
}

func ref(kind, uid string) common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr(kind), Uid: cog.ToPtr(uid)}
}

var (
	promDS  = ref("prometheus", PrometheusUID)
	lokiDS  = ref("loki", LokiUID)
	tempoDS = ref("tempo", TempoUID)
)

// prom is a PromQL target; refIDs are given in order by the panel helpers.
type prom struct{ expr, legend string }

// series is a time series panel of PromQL targets.
func series(title, description, unit string, targets ...prom) *timeseries.PanelBuilder {
	panel := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(promDS).
		Unit(unit).
		Height(8).
		Span(12).
		FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeTable).Placement(common.LegendPlacementBottom).ShowLegend(true).Calcs([]string{"lastNotNull", "max"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for i, target := range targets {
		panel.WithTarget(prometheus.NewDataqueryBuilder().
			Datasource(promDS).
			RefId(refID(i)).
			Expr(target.expr).
			LegendFormat(target.legend).
			Range())
	}
	return panel
}

// logSeries is a time series panel of a LogQL metric query.
func logSeries(title, description, expr, legend string) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(lokiDS).
		Height(8).
		Span(12).
		FillOpacity(10).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)).
		WithTarget(loki.NewDataqueryBuilder().Datasource(lokiDS).RefId("A").Expr(expr).LegendFormat(legend).QueryType("range"))
}

// logLines is a logs panel of a LogQL log query.
func logLines(title, description, expr string) *logs.PanelBuilder {
	return logs.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(lokiDS).
		Height(10).
		Span(24).
		ShowTime(true).
		EnableLogDetails(true).
		SortOrder(common.LogsSortOrderDescending).
		WithTarget(loki.NewDataqueryBuilder().Datasource(lokiDS).RefId("A").Expr(expr).QueryType("range").MaxLines(200))
}

// traces is a table of the traces a TraceQL query finds.
func traces(title, description, query string) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(tempoDS).
		Height(10).
		Span(24).
		WithTarget(tempo.NewDataqueryBuilder().Datasource(tempoDS).RefId("A").QueryType(string(tempo.TempoQueryTypeTraceql)).Query(query).Limit(50).TableType(tempo.SearchTableTypeTraces))
}

func refID(i int) string { return string(rune('A' + i)) }

func row(title string) *dashboard.RowBuilder { return dashboard.NewRowBuilder(title) }
