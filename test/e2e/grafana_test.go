//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"golang.org/x/sys/unix"

	"github.com/loom-otel/loom/distribution/grafana"
	"github.com/loom-otel/loom/distribution/grafana/querycheck"
	"github.com/loom-otel/loom/internal/workload"
)

// noDataHere are the PromQL targets that cannot return data on this machine,
// and why; every other target must.
var noDataHere = map[string]string{
	"otelcol_exporter_send_failed_spans":                "no span export fails here (the test's Loki fails some log pushes instead)",
	"otelcol_processor_reqsampling_handed_over_records": "one gateway: no request has another owner",
	"otelcol_processor_reqsampling_taken_over_records":  "one gateway: no other hands requests over",
	"otelcol_processor_reqidstitch_hold_dropped":        "reqidstitch's next consumer (reqsampling) refuses nothing here",
}

// dataByChanceHere are the PromQL targets that may or may not return data
// here, depending on timing, and why: excused when empty, fine when not.
var dataByChanceHere = map[string]string{
	"otelcol_processor_reqsampling_late_records":  "a record is late only when its batch reaches the gateway after its request's decision_wait",
	"otelcol_processor_reqsampling_late_failures": "as late records, and only when the late record shows a failure",
	"otelcol_processor_reqidstitch_evicted":       "the tables' TTLs outlast the test; a rule's key table fills only on some runs",
}

// notInThisTraffic are the label names LogQL queries filter on that this
// test's records cannot carry, and why.
var notInThisTraffic = map[string]string{
	"nvidia_xid":  "XID records come from NVML, and this machine has no GPU",
	"gpu_id":      "a driver call's gpu.id is the UUID NVML gives /dev/nvidiaN; the traced device here is /dev/null",
	"k8s_pod_uid": "read from a process's cgroup inside a container; the test runs outside one",
}

// TestDashboardsShowRealData runs the shipped agent and gateway configs with
// Loom's own workload, a driver call burst the gpu receiver traces for real,
// and NVML metric fixtures named after the receiver's documentation.md (no
// GPU here), with a real Prometheus scraping both tiers; then every PromQL
// target of every dashboard must return data from that Prometheus, and every
// label a LogQL query filters on and every attribute a TraceQL query names
// must be on what the gateway wrote to Loki and Tempo.
func TestDashboardsShowRealData(t *testing.T) {
	prometheusBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("no prometheus binary: `make test-deps` installs Debian's prometheus package")
	}
	loki := &lokiPushes{t: t, tenants: map[string]int{}}
	var pushes atomic.Int64
	lokiServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One push in five, from the second on, is refused as Loki refuses an
		// over-long line: a permanent failure, for the failed-sends and
		// rejections panels. A run sends about six pushes, fewer on a loaded
		// machine that batches more: refusing the fifth left them empty then.
		if pushes.Add(1)%5 == 2 {
			// Refused, but sent: the label check below reads what the gateway
			// sent, and a refused push may hold every record of one kind.
			loki.ServeHTTP(httptest.NewRecorder(), r)
			http.Error(w, "entry for stream '{service_name=\"x\"}' has 300000 bytes, greater than the limit (line too long)", http.StatusBadRequest)
			return
		}
		loki.ServeHTTP(w, r)
	}))
	defer lokiServer.Close()
	tempo := startSink(t)

	gateway := startCollector(t, "distribution/gateway.yaml", withEdits(onLoopback(t, "file_storage/queues"), func(cfg map[string]any) {
		mapAt(cfg, "exporters", "loki")["endpoint"] = lokiServer.URL
		mapAt(cfg, "exporters", "tempo")["endpoint"] = tempo.GRPCEndpoint
		graph := mapAt(cfg, "exporters", "eventgraph")
		graph["backend"] = "embedded"
		mapAt(graph, "embedded")["path"] = filepath.Join(t.TempDir(), "graph.db")
		sampling := mapAt(cfg, "processors", "reqsampling")
		sampling["decision_wait"] = "2s"
		sampling["max_requests"] = 50 // the volume guard decides early
	}))
	gpuMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	agent := startCollector(t, "distribution/agent.yaml", withEdits(onLoopback(t, "file_storage/agent"), func(cfg map[string]any) {
		mapAt(cfg, "exporters", "load_balancing")["resolver"] = map[string]any{"static": map[string]any{"hostnames": []any{gateway.endpoints["receivers.otlp.protocols.grpc.endpoint"]}}}
		exporter := mapAt(cfg, "exporters", "prometheus")
		exporter["endpoint"] = gpuMetrics
		exporter["resource_to_telemetry_conversion"] = map[string]any{"enabled": true} // as the chart sets it
		metrics := mapAt(cfg, "service", "pipelines", "metrics")
		metrics["receivers"] = append(metrics["receivers"].([]any), "otlp") // the NVML fixtures
		// The traced driver calls are the test's own: no span will ever cover
		// them, and they should not wait an SDK's batch delay for one.
		mapAt(cfg, "processors", "reqidstitch/agent", "gpu_attribution")["wait"] = "2s"
		gpu := mapAt(cfg, "receivers", "gpu")
		gpu["host_name"] = "e2e-gpu-node"
		gpu["collection_interval"] = "1s"
		gpu["ioctl"] = map[string]any{
			"devices":          []any{map[string]any{"path": "/dev/null"}},
			"driver_version":   "595.45.04",
			"slow_threshold":   "1ns",
			"ring_buffer_size": 4096, // small: the burst below overflows it
		}
	}))

	telemetry := "service.telemetry.metrics.readers[0].pull.exporter.prometheus.port"
	prometheus := startPrometheus(t, prometheusBin, map[string][]string{
		"agent":   {agent.endpoints[telemetry], gpuMetrics},
		"gateway": {gateway.endpoints[telemetry]},
	})

	stopFixtures := sendNVMLFixtures(t, agent)
	defer stopFixtures()
	failDriverCalls(t, 3000)
	sendWorkload(t, agent, workload.GRPC, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3, workload.HotInputs},
		Affected:  0.15,
		Requests:  1500,
		Rate:      2500,
		Seed:      23,
	})

	queries := dashboardQueries(t, func(file string) bool { return file != servingDashboard })
	checked, excused := checkPromQL(t, prometheus, queries)
	t.Logf("%d PromQL targets return data from Prometheus, %d have none here as noDataHere and dataByChanceHere allow", checked, excused)
	t.Logf("Loki got %d pushes, refused %d", pushes.Load(), (pushes.Load()+3)/5)
	if t.Failed() {
		t.Logf("agent log:\n%s\ngateway log:\n%s", agent.log(), gateway.log())
	}

	checkLogQLNames(t, queries, loki)
	checkTraceQLNames(t, queries, tempo.Traces())
}

// servingDashboard is checked against the serving engines' fixtures
// (TestServingEngineMetrics), not against Loom's own traffic.
const servingDashboard = "loom-serving.json"

// dashboardQueries are the queries of the committed dashboards whose file keep says to check.
func dashboardQueries(t *testing.T, keep func(file string) bool) []grafana.Query {
	t.Helper()
	var queries []grafana.Query
	for _, d := range grafana.Dashboards() {
		if !keep(d.File) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(repoRoot, "distribution", "grafana", "dashboards", d.File))
		if err != nil {
			t.Fatal(err)
		}
		qs, err := grafana.Queries(d.File, raw)
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, qs...)
	}
	return queries
}

// checkPromQL evaluates every PromQL target of queries in p until each
// returns data (those noDataHere and dataByChanceHere name excepted), for up to 90 s, and fails
// the test for those that never do; it returns how many returned data and
// how many were excused.
func checkPromQL(t *testing.T, p *prometheusServer, queries []grafana.Query) (withData, excused int) {
	t.Helper()
	// Prometheus scrapes every second; rates need two samples in their window.
	var empty, stale map[string]string
	var checked int
	deadline := time.Now().Add(90 * time.Second)
	for {
		empty, stale, checked, excused = map[string]string{}, map[string]string{}, 0, 0
		for _, q := range queries {
			if q.Language != "promql" {
				continue
			}
			expr, err := q.Expanded("1m")
			if err != nil {
				t.Fatal(err)
			}
			series, err := p.query(expr)
			if err != nil {
				t.Fatalf("%s: Prometheus refuses %s: %v", q, expr, err)
			}
			checked++
			switch {
			case names(expr, noDataHere) && series > 0:
				stale[q.String()] = expr
			case series == 0 && (names(expr, noDataHere) || names(expr, dataByChanceHere)):
				excused++
			case series == 0:
				empty[q.String()] = expr
			}
		}
		if len(empty) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for q, expr := range empty {
		t.Errorf("%s returns no data: %s", q, expr)
	}
	for q, expr := range stale {
		t.Errorf("%s returns data, so noDataHere's entry for it is stale: %s", q, expr)
	}
	return checked - len(empty) - excused, excused
}

// names reports whether a query names one of the metrics of excuses.
func names(expr string, excuses map[string]string) bool {
	metrics, _ := querycheck.PromQLMetrics(expr)
	return slices.ContainsFunc(metrics, func(name string) bool { _, ok := excuses[name]; return ok })
}

type prometheusServer struct {
	url string
}

// startPrometheus runs Prometheus on a free loopback port, scraping the
// targets of each tier every second with the tier as a label.
func startPrometheus(t *testing.T, bin string, tiers map[string][]string) *prometheusServer {
	t.Helper()
	var config strings.Builder
	config.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	for tier, targets := range tiers {
		quoted, _ := json.Marshal(targets)
		fmt.Fprintf(&config, "  - job_name: loom-%s\n    static_configs:\n      - targets: %s\n        labels: {tier: %s}\n", tier, quoted, tier)
	}
	dir := t.TempDir()
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	out := &syncBuffer{}
	cmd := exec.Command(bin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	p := &prometheusServer{url: "http://" + addr}
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := client.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// query evaluates expr now and returns how many series it yields.
func (p *prometheusServer) query(expr string) (int, error) {
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("%s", body.Error)
	}
	return len(body.Data.Result), nil
}

// sendNVMLFixtures sends, every half second until stopped, the metrics the
// gpu receiver's documentation.md lists for NVML (two GPUs, every resource
// attribute, every value of each metric's first enumerated attribute), as the
// receiver would on a GPU node; the ioctl tracer's metrics are real.
func sendNVMLFixtures(t *testing.T, agent *collector) (stop func()) {
	t.Helper()
	docs, err := grafana.ReadDocumentation(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(docs, func(d grafana.Documentation) bool {
		return d.File == filepath.Join("receiver", "gpureceiver", "documentation.md")
	})
	if i < 0 {
		t.Fatal("no receiver/gpureceiver/documentation.md")
	}
	doc := docs[i]
	client := pmetricotlp.NewGRPCClient(agent.dialOTLP())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 1; ; round++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(nvmlFixtures(doc, round)))
			cancel()
			if err != nil {
				t.Errorf("sending the NVML fixtures: %v", err)
				return
			}
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

func nvmlFixtures(doc grafana.Documentation, round int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	now := pcommon.NewTimestampFromTime(time.Now())
	for gpu := range 2 {
		rm := md.ResourceMetrics().AppendEmpty()
		for _, a := range doc.ResourceAttributes {
			switch {
			case a.Name == "host.name":
				rm.Resource().Attributes().PutStr(a.Name, "e2e-gpu-node")
			case a.Type == "Int":
				rm.Resource().Attributes().PutInt(a.Name, int64(gpu))
			default:
				rm.Resource().Attributes().PutStr(a.Name, fmt.Sprintf("e2e-%s-%d", a.Name, gpu))
			}
		}
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("github.com/loom-otel/loom/receiver/gpureceiver")
		for _, m := range doc.Metrics {
			if m.Internal || strings.HasPrefix(m.Name, "nvidia.ioctl.") {
				continue
			}
			metric := sm.Metrics().AppendEmpty()
			metric.SetName(m.Name)
			metric.SetUnit(m.Unit)
			var points pmetric.NumberDataPointSlice
			if m.Type == "Sum" {
				sum := metric.SetEmptySum()
				sum.SetIsMonotonic(m.Monotonic)
				sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
				points = sum.DataPoints()
			} else {
				points = metric.SetEmptyGauge().DataPoints()
			}
			for _, attrs := range fixtureAttributes(m.Attributes) {
				dp := points.AppendEmpty()
				dp.SetTimestamp(now)
				// Counters grow each round; other values stay put.
				value := 0.5
				if m.Monotonic {
					value = float64(10 * round)
				}
				if m.ValueType == "Int" {
					dp.SetIntValue(int64(value*10) + 1)
				} else {
					dp.SetDoubleValue(value)
				}
				attrs.CopyTo(dp.Attributes())
			}
		}
	}
	return md
}

// fixtureAttributes gives one attribute set per value of the first
// enumerated attribute, the other attributes at a fixed value.
func fixtureAttributes(attrs []grafana.DocumentedAttribute) []pcommon.Map {
	variants := []string{""}
	for _, a := range attrs {
		if len(a.Values) > 0 {
			variants = a.Values
			break
		}
	}
	var out []pcommon.Map
	for _, variant := range variants {
		m := pcommon.NewMap()
		varied := false
		for _, a := range attrs {
			switch {
			case len(a.Values) > 0 && !varied:
				m.PutStr(a.Name, variant)
				varied = true
			case len(a.Values) > 0:
				m.PutStr(a.Name, a.Values[0])
			case a.Type == "Int":
				m.PutInt(a.Name, 4242)
			default:
				m.PutStr(a.Name, "e2e")
			}
		}
		out = append(out, m)
	}
	return out
}

// failDriverCalls makes n NV_ESC_RM_ALLOC_MEMORY calls on /dev/null whose
// parameters hold NV_ERR_NO_MEMORY: each is a failed call for the tracer
// (the agent's gpu receiver traces /dev/null here), and together they
// overflow its small ring buffer.
func failDriverCalls(t *testing.T, n int) {
	t.Helper()
	fd, err := unix.Open("/dev/null", unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Close(fd) }()
	params := make([]byte, 56) // NVOS02 with fd: status at 40
	binary.NativeEndian.PutUint32(params[40:], 0x51)
	const rmAllocMemory = 0xC0384627
	for range n {
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), rmAllocMemory, uintptr(unsafe.Pointer(&params[0])))
	}
	runtime.KeepAlive(params)
}

var lokiLabelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)=`)

// checkLogQLNames matches the labels each LogQL query selects and filters on
// with what the gateway pushed: stream labels, structured metadata, and,
// for a query with a json stage, the keys of the JSON lines as Loki's parser
// names them.
func checkLogQLNames(t *testing.T, queries []grafana.Query, loki *lokiPushes) {
	t.Helper()
	_, entries := loki.snapshot()
	if len(entries) == 0 {
		t.Fatal("the gateway pushed nothing to Loki")
	}
	streamLabels, metadata, jsonKeys := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		for _, m := range lokiLabelName.FindAllStringSubmatch(e.labels, -1) {
			streamLabels[m[1]] = true
		}
		for k := range e.metadata {
			metadata[k] = true
		}
		var line map[string]any
		if json.Unmarshal([]byte(e.line), &line) == nil {
			for k := range line {
				jsonKeys[sanitizeLabel(k)] = true
			}
		}
	}
	checked := 0
	for _, q := range queries {
		if q.Language != "logql" {
			continue
		}
		expr, _ := q.Expanded("1m")
		parsed, err := querycheck.ParseLogQL(expr)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		checked++
		for _, label := range parsed.StreamLabels {
			if !streamLabels[label] {
				t.Errorf("%s selects streams by %s, a label no pushed stream has", q, label)
			}
		}
		for _, label := range parsed.FilterLabels {
			found := streamLabels[label] || metadata[label] || slices.Contains(parsed.Parsers, "json") && jsonKeys[label]
			if _, excused := notInThisTraffic[label]; !found && !excused {
				t.Errorf("%s filters on %s, which no pushed entry carries (labels, structured metadata%s)", q, label,
					map[bool]string{true: ", JSON line keys", false: ""}[slices.Contains(parsed.Parsers, "json")])
			}
		}
	}
	t.Logf("%d LogQL queries name labels the pushed entries carry (%d entries)", checked, len(entries))
}

// sanitizeLabel is how Loki's json parser names a key: other characters than
// letters, digits and _ become _.
func sanitizeLabel(key string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, key)
}

// checkTraceQLNames matches the attributes each TraceQL query names with
// the spans the gateway sent to Tempo.
func checkTraceQLNames(t *testing.T, queries []grafana.Query, traces []ptrace.Traces) {
	t.Helper()
	spanAttrs, resourceAttrs := map[string]bool{}, map[string]bool{}
	for _, td := range traces {
		for _, rs := range td.ResourceSpans().All() {
			for k := range rs.Resource().Attributes().All() {
				resourceAttrs[k] = true
			}
		}
		forEachSpan(td, func(span ptrace.Span) {
			for k := range span.Attributes().All() {
				spanAttrs[k] = true
			}
		})
	}
	if len(spanAttrs) == 0 {
		t.Fatal("the gateway sent no span to Tempo")
	}
	for _, q := range queries {
		if q.Language != "traceql" {
			continue
		}
		parsed, err := querycheck.ParseTraceQL(q.Expr)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		for _, attr := range parsed.Attributes {
			scope, name, _ := strings.Cut(attr, ".")
			found := map[string]bool{"span": spanAttrs[name], "resource": resourceAttrs[name], "": spanAttrs[name] || resourceAttrs[name]}[scope]
			if !found {
				t.Errorf("%s names %s, which no span sent to Tempo carries", q, attr)
			}
		}
		t.Logf("%s: every attribute it names is on the spans sent to Tempo: %v", q, parsed.Attributes)
	}
}
