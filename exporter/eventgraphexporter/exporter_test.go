package eventgraphexporter

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/exporter/eventgraphexporter/internal/metadata"
	"github.com/loom-otel/loom/exporter/eventgraphexporter/internal/metadatatest"
	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jtest"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/memstorage"
)

// request returns one small request: a span and a log record logged in it.
func request(reqID string, at time.Time) (ptrace.Traces, plog.Logs) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	resource(rs.Resource())
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("model/forward")
	span.SetTraceID(traceID)
	span.SetSpanID(spanA)
	span.SetStartTimestamp(pcommonTimeAt(at))
	span.SetEndTimestamp(pcommonTimeAt(at.Add(time.Second)))
	span.Attributes().PutStr(golden.ReqID, reqID)

	ld := oneLog(func(lr plog.LogRecord) {
		lr.SetTimestamp(pcommonTimeAt(at.Add(time.Millisecond)))
		lr.SetTraceID(traceID)
		lr.SetSpanID(spanA)
		lr.Body().SetStr("forward done")
		lr.Attributes().PutStr(golden.ReqID, reqID)
	})
	return td, ld
}

// TestLogsAndTracesShareOneGraph: the component's two exporters write one
// store; the log record becomes the span's child whichever arrives first.
func TestLogsAndTracesShareOneGraph(t *testing.T) {
	cfg := embeddedConfig(t)
	p := startPipeline(t, cfg, nil)
	td, ld := request("req-1715234890123-a1b2c3", t0)
	ctx := context.Background()
	require.NoError(t, p.logs.ConsumeLogs(ctx, ld))
	require.NoError(t, p.traces.ConsumeTraces(ctx, td))
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	metadatatest.AssertEqualExporterEventgraphEventsWritten(t, p.tt, []metricdata.DataPoint[int64]{{Value: 2}}, opts...)
	metadatatest.AssertEqualExporterEventgraphEdgesWritten(t, p.tt, []metricdata.DataPoint[int64]{{Value: 1}}, opts...)
	p.shutdown(t)

	store := openEmbedded(t, cfg.Embedded.Path)
	timeline, err := store.Timeline(ctx, "req-1715234890123-a1b2c3")
	require.NoError(t, err)
	require.Len(t, timeline, 2)
	g, err := store.Neighbourhood(ctx, timeline[1].ID, 1)
	require.NoError(t, err)
	assert.Contains(t, g.Edges, eventgraph.Edge{From: timeline[1].ID, To: timeline[0].ID, Type: eventgraph.EdgeChildOf})
}

// TestRecordCannotTakeOverAnotherRequestsEvent sends a record that carries
// the event.id of another request's log record (as a client that skips
// reqidstitch could): the store refuses it, the exporter counts it, and the
// victim's timeline is unchanged.
func TestRecordCannotTakeOverAnotherRequestsEvent(t *testing.T) {
	cfg := embeddedConfig(t)
	p := startPipeline(t, cfg, nil)
	const victimReq, intruderReq = "req-1715234890123-a1b2c3", "req-1715234890999-zzzzzz"
	_, victim := request(victimReq, t0)
	ctx := context.Background()
	require.NoError(t, p.logs.ConsumeLogs(ctx, victim))
	store, ok := LookupStore(metadatatest.NewSettings(p.tt).ID)
	require.True(t, ok)
	before, err := store.Timeline(ctx, victimReq)
	require.NoError(t, err)
	require.Len(t, before, 1)

	forged := oneLog(func(lr plog.LogRecord) {
		lr.SetTimestamp(pcommonTimeAt(t0.Add(time.Hour)))
		lr.Body().SetStr("forged")
		lr.Attributes().PutStr(golden.ReqID, intruderReq)
		lr.Attributes().PutStr(golden.EventID, before[0].ID)
	})
	require.NoError(t, p.logs.ConsumeLogs(ctx, forged))
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	metadatatest.AssertEqualExporterEventgraphEventsRefused(t, p.tt, []metricdata.DataPoint[int64]{{Value: 1}}, opts...)
	after, err := store.Timeline(ctx, victimReq)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	intruder, err := store.Timeline(ctx, intruderReq)
	require.NoError(t, err)
	assert.Empty(t, intruder)
}

// The running exporter's store is found by its component ID, for the rca
// extension, and only while it runs.
func TestStoreIsFoundByComponentID(t *testing.T) {
	p := startPipeline(t, embeddedConfig(t), nil)
	td, _ := request("req-1715234890123-a1b2c3", t0)
	require.NoError(t, p.traces.ConsumeTraces(context.Background(), td))
	store, ok := LookupStore(metadatatest.NewSettings(p.tt).ID)
	require.True(t, ok)
	timeline, err := store.Timeline(context.Background(), "req-1715234890123-a1b2c3")
	require.NoError(t, err)
	assert.Len(t, timeline, 1)
	p.shutdown(t)
	_, ok = LookupStore(metadatatest.NewSettings(p.tt).ID)
	assert.False(t, ok)
}

func TestNotStartedIsRetryable(t *testing.T) {
	e, err := newGraphExporter(embeddedConfig(t), exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	_, ld := request("req-1715234890123-a1b2c3", t0)
	err = e.pushLogs(context.Background(), ld)
	assert.ErrorIs(t, err, errNotStarted)
	assert.False(t, consumererror.IsPermanent(err))
}

func TestEmbeddedRetentionPrunes(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.Embedded.Retention = RetentionConfig{MaxAge: time.Hour, CheckInterval: 10 * time.Millisecond}
	p := startPipeline(t, cfg, nil)
	td, _ := request("req-1715234890123-a1b2c3", t0) // long before now
	require.NoError(t, p.traces.ConsumeTraces(context.Background(), td))
	require.Eventually(t, func() bool {
		m, err := p.tt.GetMetric("otelcol_exporter_eventgraph_events_pruned")
		if err != nil {
			return false
		}
		sum := m.Data.(metricdata.Sum[int64])
		return len(sum.DataPoints) == 1 && sum.DataPoints[0].Value == 1
	}, 5*time.Second, 10*time.Millisecond)
}

// TestNeo4jOutage: while the database is unreachable, records wait in the
// queue, writes fail retryably and the component reports a recoverable
// error; when it is back, the records are written and the status is OK.
func TestNeo4jOutage(t *testing.T) {
	srv := neo4jtest.Shared(t)
	srv.Clear(t)
	proxy := startProxy(t, srv.URI[len("bolt://"):])
	cfg := neo4jConfig(srv)
	cfg.Neo4j.URI = "bolt://" + proxy.addr
	cfg.QueueConfig = createDefaultConfig().(*Config).QueueConfig
	cfg.RetryConfig.Enabled = true
	cfg.RetryConfig.InitialInterval = 50 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 200 * time.Millisecond
	cfg.TimeoutConfig.Timeout = 5 * time.Second

	p := startPipeline(t, cfg, nil) // the database is down at start: no failure
	td, ld := request("req-1715234890123-a1b2c3", t0)
	require.NoError(t, p.traces.ConsumeTraces(context.Background(), td))
	require.NoError(t, p.logs.ConsumeLogs(context.Background(), ld))
	require.Eventually(t, func() bool {
		return slices.Contains(p.host.reported(), componentstatus.StatusRecoverableError)
	}, 10*time.Second, 20*time.Millisecond)
	errs, err := p.tt.GetMetric("otelcol_exporter_eventgraph_write_errors")
	require.NoError(t, err)
	point := errs.Data.(metricdata.Sum[int64]).DataPoints[0]
	assert.Equal(t, attribute.NewSet(attribute.String("error_kind", "retryable")), point.Attributes)

	proxy.set(true)
	require.Eventually(t, func() bool {
		return srv.Count(t, `MATCH (e:Event {req_id: 'req-1715234890123-a1b2c3'}) RETURN count(e)`, nil) == 2
	}, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		statuses := p.host.reported()
		return statuses[len(statuses)-1] == componentstatus.StatusOK
	}, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, int64(1), srv.Count(t, `MATCH (:Event)-[r:CHILD_OF]->(:Event) RETURN count(r)`, nil))
}

// TestPersistentQueueSurvivesRestart: records queued while Neo4j is down are
// written by the next exporter instance that opens the same storage.
func TestPersistentQueueSurvivesRestart(t *testing.T) {
	srv := neo4jtest.Shared(t)
	srv.Clear(t)
	proxy := startProxy(t, srv.URI[len("bolt://"):])
	storageID := component.MustNewIDWithName("file_storage", "eventgraph")
	host := &statusHost{extensions: memstorage.Host{storageID: memstorage.New()}}
	cfg := neo4jConfig(srv)
	cfg.Neo4j.URI = "bolt://" + proxy.addr
	queue := exporterhelper.NewDefaultQueueConfig()
	queue.StorageID = &storageID
	cfg.QueueConfig = createDefaultConfig().(*Config).QueueConfig
	*cfg.QueueConfig.Get() = queue
	cfg.RetryConfig.Enabled = true
	cfg.RetryConfig.InitialInterval = time.Minute // the first instance never gets to retry
	cfg.TimeoutConfig.Timeout = 2 * time.Second

	first := startPipeline(t, cfg, host)
	_, ld := request("req-1715234890123-a1b2c3", t0)
	require.NoError(t, first.logs.ConsumeLogs(context.Background(), ld))
	require.Eventually(t, func() bool {
		return slices.Contains(host.reported(), componentstatus.StatusRecoverableError)
	}, 10*time.Second, 20*time.Millisecond)
	first.shutdown(t)

	// The second instance may retry soon and wait long: on a loaded machine
	// its first write can outlast the first instance's short timeout.
	cfg.RetryConfig.InitialInterval = 200 * time.Millisecond
	cfg.TimeoutConfig.Timeout = 15 * time.Second
	proxy.set(true)
	startPipeline(t, cfg, host)
	require.Eventually(t, func() bool {
		return srv.Count(t, `MATCH (e:Event {req_id: 'req-1715234890123-a1b2c3'}) RETURN count(e)`, nil) == 1
	}, 20*time.Second, 50*time.Millisecond)
}

func pcommonTimeAt(at time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(at) }
