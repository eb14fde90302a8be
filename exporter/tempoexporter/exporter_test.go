package tempoexporter

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/exporter/tempoexporter/internal/metadatatest"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/memstorage"
	"github.com/loom-otel/loom/internal/tenant"
)

// tempoSink stands in for Tempo's distributor behind a real OTLP receiver:
// it records each export with the tenant header it arrived with.
type tempoSink struct {
	// fail, when set, answers the tenant's attempt (from 0); the receiver turns
	// a plain error into a retryable gRPC/HTTP status.
	fail func(attempt int, tenant string) error

	mu       sync.Mutex
	exports  []export
	attempts map[string]int
}

type export struct {
	tenant string
	td     ptrace.Traces
}

func (s *tempoSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *tempoSink) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	var id string
	if v := client.FromContext(ctx).Metadata.Get(tenant.Header); len(v) > 0 {
		id = v[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attempts == nil {
		s.attempts = map[string]int{}
	}
	attempt := s.attempts[id]
	s.attempts[id]++
	s.exports = append(s.exports, export{tenant: id, td: td})
	if s.fail != nil {
		return s.fail(attempt, id)
	}
	return nil
}

func (s *tempoSink) received() []export {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]export(nil), s.exports...)
}

// spansByTenant maps tenant -> span name -> span attributes.
func (s *tempoSink) spansByTenant() map[string]map[string]map[string]any {
	out := map[string]map[string]map[string]any{}
	for _, e := range s.received() {
		if out[e.tenant] == nil {
			out[e.tenant] = map[string]map[string]any{}
		}
		for _, rs := range e.td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					out[e.tenant][span.Name()] = span.Attributes().AsRaw()
				}
			}
		}
	}
	return out
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// startReceiver runs the collector's own OTLP receiver, with client metadata,
// on a free port and returns its address.
func startReceiver(t testing.TB, http bool, next consumer.Traces) string {
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	addr := freeAddr(t)
	if http {
		h := cfg.Protocols.HTTP.GetOrInsertDefault()
		h.ServerConfig.NetAddr.Endpoint = addr
		h.ServerConfig.IncludeMetadata = true
	} else {
		g := cfg.Protocols.GRPC.GetOrInsertDefault()
		g.NetAddr.Endpoint = addr
		g.IncludeMetadata = true
	}
	r, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, next)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
	return addr
}

// testConfig sends to addr over gRPC or HTTP, synchronously (no queue, no
// retry), routing tenants by tenant_id.
func testConfig(addr string, http bool) *Config {
	cfg := createDefaultConfig().(*Config)
	if http {
		cfg.HTTP.GetOrInsertDefault().Endpoint = "http://" + addr
	} else {
		cfg.ClientConfig.Endpoint = addr
		cfg.ClientConfig.TLS.Insecure = true
	}
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	cfg.Tenant.FromAttribute = "tenant_id"
	cfg.Tenant.Default = "shared"
	return cfg
}

func startExporter(t testing.TB, cfg *Config, set exporter.Settings) exporter.Traces {
	exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return exp
}

func TestExportToOTLPReceiver(t *testing.T) {
	for name, http := range map[string]bool{"grpc": false, "http": true} {
		t.Run(name, func(t *testing.T) {
			sink := &tempoSink{}
			addr := startReceiver(t, http, sink)
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			exp := startExporter(t, testConfig(addr, http), metadatatest.NewSettings(tt))

			td := testTraces()
			td.ResourceSpans().At(0).Resource().Attributes().PutStr("tenant_id", "team-a")
			// A span attribute never picks the tenant: only the resource's, set by a trusted tier.
			td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).Attributes().PutStr("tenant_id", "team-b")
			tokenizer := td.ResourceSpans().AppendEmpty()
			tokenizer.Resource().Attributes().PutStr("service.name", "tokenizer")
			tokenizer.Resource().Attributes().PutStr("tenant_id", "team-b")
			tokenize := tokenizer.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
			tokenize.SetName("tokenize")
			tokenize.Attributes().PutStr(golden.ReqID, "req-1715234890123-a1b2c3")
			require.NoError(t, exp.ConsumeTraces(context.Background(), td))

			assert.Len(t, sink.received(), 3, "one export per tenant")
			got := sink.spansByTenant()
			assert.Equal(t, map[string]any{
				golden.ReqID:    "req-1715234890123-a1b2c3",
				golden.ModelVer: "llama3-8b-v2.1.4",
				golden.GPUMemMb: int64(12450),
			}, got["team-a"]["forward"], "golden fields are span attributes")
			assert.Equal(t, "req-1715234890123-a1b2c3", got["team-b"]["tokenize"][golden.ReqID])
			assert.Equal(t, "team-b", got["team-a"]["decode"]["tenant_id"], "kept as an attribute, never the tenant")
			assert.Contains(t, got["shared"], "route", "spans without the attribute go to the default tenant")

			metadatatest.AssertEqualExporterTempoTenantClients(t, tt, []metricdata.DataPoint[int64]{{Value: 3}},
				metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
			metadatatest.AssertEqualExporterTempoAttributesPromoted(t, tt, []metricdata.DataPoint[int64]{{Value: 5}},
				metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
		})
	}
}

func TestNoTenantNoHeader(t *testing.T) {
	sink := &tempoSink{}
	cfg := testConfig(startReceiver(t, false, sink), false)
	cfg.Tenant.FromAttribute, cfg.Tenant.Default = "", ""
	exp := startExporter(t, cfg, metadatatest.NewSettings(componenttest.NewTelemetry()))
	require.NoError(t, exp.ConsumeTraces(context.Background(), testTraces()))
	require.Len(t, sink.received(), 1)
	assert.Empty(t, sink.received()[0].tenant, "no X-Scope-OrgID for a single-tenant Tempo")
}

func TestInvalidTenantDropped(t *testing.T) {
	sink := &tempoSink{}
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	exp := startExporter(t, testConfig(startReceiver(t, false, sink), false), metadatatest.NewSettings(tt))
	td := testTraces()
	td.ResourceSpans().At(1).Resource().Attributes().PutStr("tenant_id", "tenant/../other")
	valid := int64(td.SpanCount() - td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().Len())
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	assert.NotContains(t, sink.spansByTenant()["shared"], "route")
	metadatatest.AssertEqualExporterTempoSpansDropped(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("drop_reason", "invalid_tenant"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())

	// exporterhelper's own counter: the dropped span is not reported as sent.
	sent, err := tt.GetMetric("otelcol_exporter_sent_spans")
	require.NoError(t, err)
	var sentSpans int64
	for _, dp := range sent.Data.(metricdata.Sum[int64]).DataPoints {
		sentSpans += dp.Value
	}
	assert.Equal(t, valid, sentSpans, "every span but the dropped one")
	var received int64
	for _, e := range sink.received() {
		received += int64(e.td.SpanCount())
	}
	assert.Equal(t, valid, received)
}

func TestRetryOnlyFailedTenants(t *testing.T) {
	sink := &tempoSink{fail: func(attempt int, id string) error {
		if id == "team-b" && attempt == 0 {
			return errors.New("ingester unavailable")
		}
		return nil
	}}
	cfg := testConfig(startReceiver(t, false, sink), false)
	cfg.RetryConfig.Enabled = true
	cfg.RetryConfig.InitialInterval = time.Millisecond
	exp := startExporter(t, cfg, metadatatest.NewSettings(componenttest.NewTelemetry()))
	td := testTraces()
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("tenant_id", "team-a")
	td.ResourceSpans().At(1).Resource().Attributes().PutStr("tenant_id", "team-b")
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))

	exports := map[string]int{}
	for _, e := range sink.received() {
		exports[e.tenant]++
	}
	assert.Equal(t, map[string]int{"team-a": 1, "team-b": 2}, exports, "team-a is not sent twice")
}

func TestRetryAllTenantsAfterSplit(t *testing.T) {
	sink := &tempoSink{fail: func(attempt int, _ string) error {
		if attempt == 0 {
			return errors.New("ingester unavailable")
		}
		return nil
	}}
	cfg := testConfig(startReceiver(t, false, sink), false)
	cfg.RetryConfig.Enabled = true
	cfg.RetryConfig.InitialInterval = time.Millisecond
	exp := startExporter(t, cfg, metadatatest.NewSettings(componenttest.NewTelemetry()))
	td := testTraces()
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("tenant_id", "team-a")
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))

	exports := sink.received()
	require.Len(t, exports, 4, "both tenants fail once, then both are resent")
	spans := 0
	for _, e := range exports {
		for _, rs := range e.td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					assert.NotEmpty(t, span.Name(), "a retry resends the spans the split moved, not emptied ones")
					spans++
				}
			}
		}
	}
	assert.Equal(t, 6, spans, "three spans, each sent twice")
}

// TestPersistentQueueSurvivesRestart: spans queued while Tempo is down are sent
// by the next exporter instance that opens the same storage.
func TestPersistentQueueSurvivesRestart(t *testing.T) {
	var up atomic.Bool
	sink := &tempoSink{fail: func(int, string) error {
		if !up.Load() {
			return errors.New("down")
		}
		return nil
	}}
	storageID := component.MustNewIDWithName("file_storage", "tempo")
	host := memstorage.Host{storageID: memstorage.New()}
	cfg := testConfig(startReceiver(t, false, sink), false)
	queue := exporterhelper.NewDefaultQueueConfig()
	queue.StorageID = &storageID
	cfg.QueueConfig = configoptional.Some(queue)
	cfg.RetryConfig.Enabled = true
	cfg.RetryConfig.InitialInterval = time.Minute // the first instance never gets to retry

	set := metadatatest.NewSettings(componenttest.NewTelemetry()) // one component ID for both instances
	start := func() exporter.Traces {
		exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
		require.NoError(t, err)
		require.NoError(t, exp.Start(context.Background(), host))
		return exp
	}
	first := start()
	require.NoError(t, first.ConsumeTraces(context.Background(), testTraces()))
	require.Eventually(t, func() bool { return len(sink.received()) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, first.Shutdown(context.Background()))

	up.Store(true)
	second := start()
	defer func() { require.NoError(t, second.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool { return len(sink.received()) == 2 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "req-1715234890123-a1b2c3", sink.spansByTenant()["shared"]["forward"][golden.ReqID])
}

// withHeaders is the context of a request that came with the given headers,
// as a receiver with include_metadata hands it on.
func withHeaders(headers map[string][]string) context.Context {
	return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(headers)})
}

// TestClientMetadataChoosesTheTenant: a request's x-scope-orgid header picks
// the tenant of its spans over their resource attribute, through a persistent
// queue whose batches are partitioned by it; without the header the attribute
// or the default applies, and an invalid or repeated header drops the spans.
func TestClientMetadataChoosesTheTenant(t *testing.T) {
	sink := &tempoSink{}
	storageID := component.MustNewIDWithName("file_storage", "tempo")
	cfg := testConfig(startReceiver(t, false, sink), false)
	cfg.Tenant.FromMetadata = "x-scope-orgid"
	queue := exporterhelper.NewDefaultQueueConfig()
	queue.StorageID = &storageID
	queue.Batch = configoptional.Some(exporterhelper.BatchConfig{FlushTimeout: 10 * time.Millisecond, Sizer: exporterhelper.RequestSizerTypeItems, MinSize: 1000})
	queue.Batch.Get().Partition.MetadataKeys = []string{"x-scope-orgid"}
	cfg.QueueConfig = configoptional.Some(queue)
	require.NoError(t, cfg.Validate())
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	exp, err := NewFactory().CreateTraces(context.Background(), metadatatest.NewSettings(tt), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), memstorage.Host{storageID: memstorage.New()}))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })

	// Each request's spans say who sent them; the first resource also names team-c.
	send := func(ctx context.Context, sentBy string) {
		td := testTraces()
		td.ResourceSpans().At(0).Resource().Attributes().PutStr("tenant_id", "team-c")
		for _, rs := range td.ResourceSpans().All() {
			rs.Resource().Attributes().PutStr("sent_by", sentBy)
		}
		require.NoError(t, exp.ConsumeTraces(ctx, td))
	}
	for range 2 {
		send(withHeaders(map[string][]string{"x-scope-orgid": {"team-a"}}), "a")
		send(withHeaders(map[string][]string{"X-Scope-Orgid": {"team-b"}}), "b")
	}
	send(context.Background(), "no header")
	send(withHeaders(map[string][]string{"x-scope-orgid": {"a/b"}}), "invalid header")
	send(withHeaders(map[string][]string{"x-scope-orgid": {"team-a", "team-b"}}), "two headers")

	perRequest := testTraces().SpanCount()
	require.Eventually(t, func() bool {
		n := 0
		for _, e := range sink.received() {
			n += e.td.SpanCount()
		}
		return n == 5*perRequest
	}, 5*time.Second, 10*time.Millisecond)
	senders := map[string]map[string]int{} // tenant -> sent_by -> spans
	for _, e := range sink.received() {
		for _, rs := range e.td.ResourceSpans().All() {
			sentBy, _ := rs.Resource().Attributes().Get("sent_by")
			if senders[e.tenant] == nil {
				senders[e.tenant] = map[string]int{}
			}
			senders[e.tenant][sentBy.Str()] += spanCount(rs)
		}
	}
	assert.Equal(t, map[string]map[string]int{
		"team-a": {"a": 2 * perRequest},
		"team-b": {"b": 2 * perRequest},
		"team-c": {"no header": 2},
		"shared": {"no header": 1},
	}, senders)
	metadatatest.AssertEqualExporterTempoSpansDropped(t, tt, []metricdata.DataPoint[int64]{
		{Value: int64(2 * perRequest), Attributes: attribute.NewSet(attribute.String("drop_reason", "invalid_tenant"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}
