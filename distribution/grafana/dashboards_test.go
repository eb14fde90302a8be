package grafana

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/loom-otel/loom/distribution/grafana/querycheck"
)

var update = flag.Bool("update", false, "rewrite dashboards/*.json from the Go code")

func TestDashboardsAreGenerated(t *testing.T) {
	files := map[string]bool{}
	for _, d := range Dashboards() {
		files[d.File] = true
		got, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("dashboards", d.File)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil || string(want) != string(got) {
			t.Errorf("%s is not what the Go code builds (%v): run 'make generate'", path, err)
		}
	}
	committed, _ := filepath.Glob(filepath.Join("dashboards", "*.json"))
	for _, path := range committed {
		if !files[filepath.Base(path)] {
			t.Errorf("%s is built by no code: remove it or add it to Dashboards()", path)
		}
	}
}

// committedQueries are the targets of every committed dashboard.
func committedQueries(t *testing.T) []Query {
	t.Helper()
	var all []Query
	for _, d := range Dashboards() {
		raw, err := os.ReadFile(filepath.Join("dashboards", d.File))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			UID   string `json:"uid"`
			Title string `json:"title"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil || meta.UID == "" || meta.Title == "" {
			t.Fatalf("%s: no uid and title (%v)", d.File, err)
		}
		queries, err := Queries(d.File, raw)
		if err != nil {
			t.Fatal(err)
		}
		if len(queries) == 0 {
			t.Fatalf("%s has no queries", d.File)
		}
		all = append(all, queries...)
	}
	return all
}

// TestQueriesParseAndNameDocumentedMetrics checks every panel target:
// LogQL and TraceQL against their grammars (querycheck), a LogQL metric query
// in a graph and a log query in a logs panel, and every metric a PromQL
// query names is one Loom documents or a listed collector metric.
func TestQueriesParseAndNameDocumentedMetrics(t *testing.T) {
	docs, err := ReadDocumentation(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{}
	for _, doc := range docs {
		for _, m := range doc.Metrics {
			for _, name := range m.PrometheusNames() {
				known[name] = m.Doc
			}
		}
	}
	for _, name := range CollectorMetrics {
		known[name] = "core/contrib collector"
	}
	for name, doc := range UndocumentedLoomMetrics {
		known[name] = doc
	}
	for engine, names := range ServingEngineMetrics {
		for _, name := range names {
			known[name] = engine + "'s /metrics"
		}
	}
	used := map[string]bool{}
	refIDs := map[string]bool{}
	for _, q := range committedQueries(t) {
		if refIDs[q.String()] {
			t.Errorf("%s: two targets with one refId", q)
		}
		refIDs[q.String()] = true
		expr, err := q.Expanded("5m")
		if err != nil {
			t.Error(err)
			continue
		}
		switch q.Language {
		case "promql":
			names, err := querycheck.PromQLMetrics(expr)
			if err != nil || len(names) == 0 {
				t.Errorf("%s: %s: %v (no metric found)", q, expr, err)
			}
			for _, name := range names {
				used[name] = true
				if _, ok := known[name]; !ok {
					t.Errorf("%s: metric %s is in no Loom documentation.md and not a listed collector metric", q, name)
				}
			}
		case "logql":
			parsed, err := querycheck.ParseLogQL(expr)
			if err != nil {
				t.Errorf("%s: %v", q, err)
			} else if parsed.Metric != (q.PanelType != "logs") {
				t.Errorf("%s: a %s panel needs a LogQL %s", q, q.PanelType, map[bool]string{true: "metric query", false: "log query"}[q.PanelType != "logs"])
			}
		case "traceql":
			if _, err := querycheck.ParseTraceQL(expr); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	}
	for _, name := range CollectorMetrics {
		if !used[name] {
			t.Errorf("CollectorMetrics lists %s, which no panel uses", name)
		}
	}
}

func TestDocumentedMetricNames(t *testing.T) {
	for _, tt := range []struct {
		metric DocumentedMetric
		want   []string
	}{
		{DocumentedMetric{Name: "hw.gpu.utilization", Unit: "1", Type: "Gauge"}, []string{"hw_gpu_utilization_ratio"}},
		{DocumentedMetric{Name: "hw.gpu.memory.usage", Unit: "By", Type: "Sum"}, []string{"hw_gpu_memory_usage_bytes"}},
		{DocumentedMetric{Name: "nvidia.ioctl.calls", Unit: "{call}", Type: "Sum", Monotonic: true}, []string{"nvidia_ioctl_calls_total"}},
		{DocumentedMetric{Name: "hw.energy", Unit: "J", Type: "Sum", Monotonic: true}, []string{"hw_energy_joules_total"}},
		{DocumentedMetric{Name: "otelcol_processor_reqsampling_pending_bytes", Unit: "By", Type: "Gauge", Internal: true}, []string{"otelcol_processor_reqsampling_pending_bytes"}},
		{DocumentedMetric{Name: "otelcol_processor_reqsampling_decisions", Unit: "{request}", Type: "Sum", Monotonic: true, Internal: true}, []string{"otelcol_processor_reqsampling_decisions"}},
	} {
		if got := tt.metric.PrometheusNames(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.metric.Name, got, tt.want)
		}
	}
	doc, err := parseDocumentation("doc", []byte(strings.Join([]string{
		"# gpu", "## Default Metrics", "### hw.power", "Power.",
		"| Unit | Metric Type | Value Type | Stability |", "| ---- | ---- | ---- | ---- |", "| W | Gauge | Double | Development |",
		"#### Attributes", "| Name | Description | Values | Requirement Level |", "| --- | --- | --- | --- |",
		"| hw.gpu.task | The engine. | Str: ``general``, ``encoder`` | Recommended |", "| process.pid | The pid. | Any Int | Recommended |",
		"## Resource Attributes", "| Name | Description | Values | Enabled |", "| --- | --- | --- | --- |", "| gpu.id | The GPU. | Any Str | true |",
		"## Internal Telemetry", "### otelcol_x", "X.",
		"| Unit | Metric Type | Value Type | Monotonic | Stability |", "| --- | --- | --- | --- | --- |", "| {e} | Sum | Int | true | Development |",
	}, "\n")))
	metrics := doc.Metrics
	if err != nil || len(metrics) != 2 || metrics[0].Unit != "W" || metrics[0].Internal || !metrics[1].Internal || !metrics[1].Monotonic {
		t.Fatalf("parseDocumentation: %+v, %v", doc, err)
	}
	want := []DocumentedAttribute{{Name: "hw.gpu.task", Type: "Str", Values: []string{"general", "encoder"}}, {Name: "process.pid", Type: "Int"}}
	if !reflect.DeepEqual(metrics[0].Attributes, want) || len(doc.ResourceAttributes) != 1 || doc.ResourceAttributes[0].Name != "gpu.id" {
		t.Errorf("attributes: %+v, resource attributes %+v", metrics[0].Attributes, doc.ResourceAttributes)
	}
}

// TestProvisioning checks the datasource file: the UIDs the dashboards use,
// and the pivots: req_id to Tempo as TraceQL and to the rca page, trace_id to
// its trace, and Tempo's spans to their request's logs as LogQL.
func TestProvisioning(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("provisioning", "datasources", "loom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, Type, UID, URL string
			JSONData             map[string]any `yaml:"jsonData"`
		}
	}
	if err := yaml.Unmarshal(raw, &file); err != nil || file.APIVersion != 1 {
		t.Fatalf("datasources: %v (apiVersion %d)", err, file.APIVersion)
	}
	byUID := map[string]map[string]any{}
	for _, ds := range file.Datasources {
		if want := map[string]string{PrometheusUID: "prometheus", LokiUID: "loki", TempoUID: "tempo"}[ds.UID]; want != ds.Type {
			t.Errorf("datasource %s: type %s, want %s", ds.UID, ds.Type, want)
		}
		if !strings.HasPrefix(ds.URL, "${LOOM_") {
			t.Errorf("datasource %s: URL %q does not come from the environment", ds.UID, ds.URL)
		}
		byUID[ds.UID] = ds.JSONData
	}
	if len(byUID) != 3 {
		t.Fatalf("want the Prometheus, Loki and Tempo datasources, got %v", byUID)
	}

	// Grafana turns $$ into $ and fills ${__value.raw} with the field's value.
	clicked := func(template, value string) string {
		return strings.ReplaceAll(strings.ReplaceAll(template, "$${", "${"), "${__value.raw}", value)
	}
	const reqID = "req-1715234890123-a1b2c3"
	var toTrace, toSpans, toRCA bool
	for _, field := range byUID[LokiUID]["derivedFields"].([]any) {
		f := field.(map[string]any)
		if f["matcherType"] != "label" {
			t.Errorf("derived field %v: matcherType %v, want label (structured metadata)", f["name"], f["matcherType"])
		}
		url := f["url"].(string)
		switch {
		case f["matcherRegex"] == "trace_id" && f["datasourceUid"] == TempoUID:
			toTrace = clicked(url, "0af7651916cd43dd8448eb211c80319c") == "0af7651916cd43dd8448eb211c80319c"
		case f["matcherRegex"] == "req_id" && f["datasourceUid"] == TempoUID:
			parsed, err := querycheck.ParseTraceQL(clicked(url, reqID))
			if err != nil {
				t.Errorf("the req_id → Tempo link: %v", err)
				continue
			}
			toSpans = slices.Equal(parsed.Attributes, []string{"span.req_id"}) && strings.Contains(clicked(url, reqID), `"`+reqID+`"`)
		case f["matcherRegex"] == "req_id" && f["datasourceUid"] == nil:
			toRCA = strings.HasPrefix(url, "${LOOM_RCA_URL}/") && strings.HasSuffix(clicked(url, reqID), "/requests/"+reqID)
		}
	}
	if !toTrace || !toSpans || !toRCA {
		t.Errorf("Loki's derived fields: trace_id → trace %v, req_id → { span.req_id = … } %v, req_id → rca /requests/{req_id} %v", toTrace, toSpans, toRCA)
	}

	logs := byUID[TempoUID]["tracesToLogsV2"].(map[string]any)
	query := strings.ReplaceAll(logs["query"].(string), `$${__span.tags["req_id"]}`, reqID)
	parsed, err := querycheck.ParseLogQL(query)
	if err != nil {
		t.Fatalf("tracesToLogsV2 query: %v", err)
	}
	if logs["datasourceUid"] != LokiUID || logs["customQuery"] != true || !slices.Contains(parsed.FilterLabels, "req_id") {
		t.Errorf("Tempo's traces-to-logs does not find a span's request by req_id: %v", logs)
	}
	if dest := byUID[PrometheusUID]["exemplarTraceIdDestinations"].([]any)[0].(map[string]any); dest["datasourceUid"] != TempoUID {
		t.Errorf("Prometheus exemplars do not open Tempo: %v", dest)
	}
}
