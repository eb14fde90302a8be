//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/metadata"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
)

// tenantHeader is the request header the gateway reads the tenant from; gRPC
// sends metadata keys in lower case.
const tenantHeader = "x-scope-orgid"

// headerClient is one client of the gateway, on its own connection, sending
// its requests with its own x-scope-orgid header (none when header is empty).
type headerClient struct {
	header string
	// resourceTenant is the tenant_id put on the resources of its requests
	// (none when empty), for every request or, with everyOther, for every
	// other one.
	resourceTenant string
	everyOther     bool
	logs           plogotlp.GRPCClient
	traces         ptraceotlp.GRPCClient
	requests       []*crashRequest
}

func (c *headerClient) context(ctx context.Context) context.Context {
	if c.header == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, tenantHeader, c.header)
}

// resourceTenantOf is the tenant_id on the resources of request i of c ("" for none).
func (c *headerClient) resourceTenantOf(i int) string {
	if c.everyOther && i%2 == 1 {
		return ""
	}
	return c.resourceTenant
}

// tenantOf is the tenant the gateway must write request i of c under: the
// header's, else the resource's, else the default.
func (c *headerClient) tenantOf(i int, defaultTenant string) string {
	switch {
	case c.header != "":
		return c.header
	case c.resourceTenantOf(i) != "":
		return c.resourceTenantOf(i)
	default:
		return defaultTenant
	}
}

// TestClientHeaderChoosesTheTenant runs the shipped gateway with the tenant
// taken from the x-scope-orgid request header (include_metadata), with Loki
// and Tempo fakes behind it. Two clients send with their own header (one with
// a resource tenant_id naming the other client's tenant, which the header
// overrides), a third with none, whose records fall back to tenant_id or the
// default. Every request's logs are sent before its spans, so they wait in
// reqidstitch's hold (they carry req_id but no trace context, which their
// spans give them), and all clients' held logs are in the hold together.
// Every Loki push and every Tempo export must be under the tenant of the
// client that sent its records, and nothing under another's.
func TestClientHeaderChoosesTheTenant(t *testing.T) {
	const (
		requestsPerClient = 12
		defaultTenant     = "shared"
	)
	loki := &lokiPushes{t: t, tenants: map[string]int{}}
	lokiServer := httptest.NewServer(loki)
	defer lokiServer.Close()
	tempo := startSink(t)
	graphDir := t.TempDir()

	byHeader := func(exporter map[string]any) {
		tenant := mapAt(exporter, "tenant")
		tenant["from_metadata"] = tenantHeader
		tenant["default"] = defaultTenant
		mapAt(exporter, "sending_queue", "batch", "partition")["metadata_keys"] = []any{tenantHeader}
	}
	col := startCollector(t, "distribution/gateway.yaml", withEdits(onLoopback(t, "file_storage/queues"), func(cfg map[string]any) {
		mapAt(cfg, "receivers", "otlp", "protocols", "grpc")["include_metadata"] = true
		sampling := mapAt(cfg, "processors", "reqsampling")
		sampling["base_percentage"] = 100
		sampling["decision_wait"] = "2s"
		exporters := mapAt(cfg, "exporters")
		lokiCfg := mapAt(exporters, "loki")
		lokiCfg["endpoint"] = lokiServer.URL
		byHeader(lokiCfg)
		tempoCfg := mapAt(exporters, "tempo")
		tempoCfg["endpoint"], tempoCfg["tls"] = tempo.GRPCEndpoint, map[string]any{"insecure": true}
		byHeader(tempoCfg)
		graphCfg := mapAt(exporters, "eventgraph")
		graphCfg["backend"], graphCfg["embedded"] = "embedded", map[string]any{"path": filepath.Join(graphDir, "graph.db")}
	}))

	clients := []*headerClient{
		{header: "team-a", resourceTenant: "team-b"},
		{header: "team-b"},
		{resourceTenant: "team-c", everyOther: true},
	}
	wantTenant := map[string]string{} // req_id -> tenant
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	for n, c := range clients {
		conn := col.dialOTLP()
		c.logs, c.traces = plogotlp.NewGRPCClient(conn), ptraceotlp.NewGRPCClient(conn)
		for i := range requestsPerClient {
			r := newCrashRequest(rng, n*requestsPerClient+i, now)
			if tenant := c.resourceTenantOf(i); tenant != "" {
				r.logs.ResourceLogs().At(0).Resource().Attributes().PutStr("tenant_id", tenant)
				r.traces.ResourceSpans().At(0).Resource().Attributes().PutStr("tenant_id", tenant)
			}
			withoutTraceContext(r.logs)
			c.requests = append(c.requests, r)
			wantTenant[r.reqID] = c.tenantOf(i, defaultTenant)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Every client's logs first, one request at a time: they wait in the hold
	// for their spans, which come after all the logs.
	eachClient := func(send func(c *headerClient, r *crashRequest) error) {
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				for _, r := range c.requests {
					if err := send(c, r); err != nil {
						t.Errorf("client %q: %v", c.header, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	eachClient(func(c *headerClient, r *crashRequest) error {
		_, err := c.logs.Export(c.context(ctx), plogotlp.NewExportRequestFromLogs(r.logs))
		return err
	})
	time.Sleep(300 * time.Millisecond) // within hold::duration (2s): the logs are released by their spans
	eachClient(func(c *headerClient, r *crashRequest) error {
		_, err := c.traces.Export(c.context(ctx), ptraceotlp.NewExportRequestFromTraces(r.traces))
		return err
	})
	if t.Failed() {
		t.Fatalf("sending failed; collector log:\n%s", col.log())
	}

	wantLogs := len(wantTenant) * crashLogsPerRequest
	wantSpans := len(wantTenant) * crashSpansPerRequest
	if _, err := tempo.WaitFor(ctx, time.Minute, 0, func(c otlpsink.Counts) bool { return c.Spans >= wantSpans }); err != nil {
		t.Fatalf("tempo: %v\ncollector log:\n%s", err, col.log())
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, entries := loki.snapshot(); len(entries) >= wantLogs || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(3 * time.Second) // longer than the hold and a batch flush: anything more would be a duplicate

	held := scrapeCounter(t, col, "otelcol_processor_reqidstitch_records_held")
	if held < float64(wantLogs) {
		t.Errorf("reqidstitch held %v records, want every one of the %d logs (sent before their spans)", held, wantLogs)
	}

	lokiTenants, entries := loki.snapshot()
	logsByReq := map[string]int{}
	for _, e := range entries {
		reqID := e.metadata[golden.ReqID]
		logsByReq[reqID]++
		if want := wantTenant[reqID]; e.tenant != want {
			t.Errorf("loki: a log of %s (sent as %s) pushed under tenant %q", reqID, want, e.tenant)
		}
		if e.metadata[golden.TraceID] == "" {
			t.Errorf("loki: a log of %s left the hold without its span's trace context", reqID)
		}
	}
	spansByReq := map[string]int{}
	tempoTenants := map[string]int{}
	for tenant, payloads := range tempo.TracesByTenant() {
		for _, td := range payloads {
			tempoTenants[tenant]++
			for _, rs := range td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, span := range ss.Spans().All() {
						v, _ := span.Attributes().Get(golden.ReqID)
						spansByReq[v.Str()]++
						if want := wantTenant[v.Str()]; tenant != want {
							t.Errorf("tempo: a span of %s (sent as %s) exported under tenant %q", v.Str(), want, tenant)
						}
					}
				}
			}
		}
	}
	for reqID := range wantTenant {
		if logsByReq[reqID] != crashLogsPerRequest || spansByReq[reqID] != crashSpansPerRequest {
			t.Errorf("%s: %d logs and %d spans arrived, want %d and %d", reqID, logsByReq[reqID], spansByReq[reqID], crashLogsPerRequest, crashSpansPerRequest)
		}
	}
	if len(logsByReq) != len(wantTenant) || len(spansByReq) != len(wantTenant) {
		t.Errorf("records of %d (logs) and %d (spans) requests arrived, want %d", len(logsByReq), len(spansByReq), len(wantTenant))
	}
	t.Logf("loki pushes by tenant %v, tempo exports by tenant %v, %v records held", lokiTenants, tempoTenants, held)
	for _, tenants := range []map[string]int{lokiTenants, tempoTenants} {
		for _, want := range []string{"team-a", "team-b", "team-c", defaultTenant} {
			if tenants[want] == 0 {
				t.Errorf("nothing sent under tenant %s: %v", want, tenants)
			}
		}
	}
	if t.Failed() {
		t.Logf("collector log:\n%s", col.log())
	}
}

// withoutTraceContext makes ld's records plain-text logs of their request
// (req_id only), which reqidstitch holds until a span of the request arrives.
func withoutTraceContext(ld plog.Logs) {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				lr.SetTraceID(pcommon.NewTraceIDEmpty())
				lr.SetSpanID(pcommon.NewSpanIDEmpty())
			}
		}
	}
}

var counterSample = regexp.MustCompile(`^([a-z_]+?)(?:_total)?(\{[^}]*\})? ([0-9.e+]+)$`)

// scrapeCounter sums the samples of a counter on col's Prometheus endpoint
// that carry every one of labels (each written name="value").
func scrapeCounter(t *testing.T, col *collector, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + col.endpoints["service.telemetry.metrics.readers[0].pull.exporter.prometheus.port"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		m := counterSample.FindStringSubmatch(lines.Text())
		if m == nil || m[1] != name || !containsAll(m[2], labels) {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%s: %v", lines.Text(), err)
		}
		sum += v
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
