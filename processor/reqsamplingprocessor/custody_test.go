package reqsamplingprocessor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatarequest "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/internal/custody"
	"github.com/loom-otel/loom/internal/custody/custodytest"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
)

func TestEachPipelineGetsItsOwnRecordsWithItsContext(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 100
	c := &clock{now: t0}
	ticks := make(chan chan struct{})
	cfg.options = append(cfg.options, withClock(c.Now), withTicks(ticks))
	f := NewFactory()
	set := processortest.NewNopSettings(metadata.Type)
	sinks := map[string]*consumertest.LogsSink{"a": {}, "b": {}}
	for _, tenant := range []string{"a", "b"} {
		p, err := f.CreateLogs(context.Background(), set, cfg, sinks[tenant])
		require.NoError(t, err)
		require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
		defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
		ctx := client.NewContext(context.Background(), client.Info{
			Metadata: client.NewMetadata(map[string][]string{"x-tenant": {tenant}}),
		})
		require.NoError(t, p.ConsumeLogs(ctx, logsOf(rec{reqID: "req-" + tenant})))
	}
	c.advance(cfg.DecisionWait)
	tick := make(chan struct{})
	ticks <- tick
	<-tick

	for tenant, sink := range sinks {
		require.Len(t, sink.AllLogs(), 1, "pipeline %s", tenant)
		assert.Equal(t, "req-"+tenant, reqIDOf(sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes()))
		assert.Equal(t, []string{tenant}, client.FromContext(sink.Contexts()[0]).Metadata.Get("x-tenant"),
			"the client metadata it came with")
	}
}

// crash closes the storage as a killed process leaves it: what was written
// stays, nothing more is; the harness's sinks no longer count.
func (h *harness) crash() {
	require.NoError(h.t, h.sampler().journal.Close(context.Background()))
}

// fromTenant is the context of a call whose client sent the header x-tenant.
func fromTenant(tenant string) context.Context {
	return client.NewContext(context.Background(), client.Info{
		Metadata: client.NewMetadata(map[string][]string{"x-tenant": {tenant}}),
	})
}

// storedHarness runs id's processors with storage in dir.
func storedHarness(t *testing.T, dir string, id component.ID, next ...*custodytest.StuckLogs) *harness {
	t.Helper()
	cfg := onlyPolicies(PolicyConfig{Name: "errors", Type: Errors, Errors: ErrorsConfig{MinSeverity: "error"}})
	cfg.Storage = &custodytest.ID
	logSink, traceSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	var nextLogs consumer.Logs = logSink
	if len(next) > 0 {
		nextLogs = next[0]
	}
	h := newHarnessOn(t, cfg, custodytest.FileStorage(t, dir), id, nextLogs, traceSink)
	h.logSink, h.traceSink = logSink, traceSink
	return h
}

func TestRecordsWaitingForADecisionSurviveACrash(t *testing.T) {
	dir := t.TempDir()
	id := component.MustNewIDWithName(metadata.Type.String(), "stored")
	before := storedHarness(t, dir, id)
	before.send(tracesOf(rec{reqID: "failing", service: "api", root: true, end: 10}, rec{reqID: "healthy", service: "api", root: true, end: 10}), plog.NewLogs())
	require.NoError(t, before.logs.ConsumeLogs(fromTenant("a"), logsOf(rec{reqID: "failing", severity: plog.SeverityNumberError}, rec{reqID: "healthy"})))
	before.tick()
	before.crash()
	require.Zero(t, before.logSink.LogRecordCount()+before.traceSink.SpanCount(), "nothing was decided before the crash")

	after := storedHarness(t, dir, id)
	after.wait(time.Minute)
	got := after.out()
	assert.Equal(t, 2, got.records("failing"), "the failing request's log and span, decided after the restart")
	assert.Zero(t, got.records("healthy"))
	assert.Equal(t, []string{"a"}, client.FromContext(after.logSink.Contexts()[0]).Metadata.Get("x-tenant"),
		"with the client metadata it came with")
	after.shutdown()

	again := storedHarness(t, dir, id)
	again.wait(time.Minute)
	assert.Zero(t, again.out().records("failing"), "passed on once, then deleted from storage")
}

func TestADecidedBatchIsReplayedAsItWasPassedOn(t *testing.T) {
	dir := t.TempDir()
	id := component.MustNewIDWithName(metadata.Type.String(), "replayed")
	stuck := custodytest.NewStuckLogs()
	before := storedHarness(t, dir, id, stuck)
	defer stuck.Release()
	require.NoError(t, before.logs.ConsumeLogs(fromTenant("a"), logsOf(rec{reqID: "failing", severity: plog.SeverityNumberError}, rec{reqID: "healthy"})))
	before.clock.advance(time.Minute)
	go before.tick()
	<-stuck.Called
	before.crash()

	after := storedHarness(t, dir, id)
	require.Len(t, after.logSink.AllLogs(), 1, "replayed at start, without waiting for a decision")
	var m plog.ProtoMarshaler
	passedOn, err := m.MarshalLogs(stuck.AllLogs()[0])
	require.NoError(t, err)
	replayed, err := m.MarshalLogs(after.logSink.AllLogs()[0])
	require.NoError(t, err)
	assert.Equal(t, passedOn, replayed, "a redelivery is identical: decision, annotations and all")
	assert.Equal(t, []string{"a"}, client.FromContext(after.logSink.Contexts()[0]).Metadata.Get("x-tenant"),
		"with the client metadata it came with")
}

func TestStorageRefusesTwoPipelinesOfOneSignal(t *testing.T) {
	cfg := defaultConfig()
	cfg.Storage = &custodytest.ID
	f := NewFactory()
	set := processortest.NewNopSettings(metadata.Type)
	a, err := f.CreateLogs(context.Background(), set, cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	b, err := f.CreateLogs(context.Background(), set, cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	err = a.Start(context.Background(), custodytest.FileStorage(t, t.TempDir()))
	assert.ErrorContains(t, err, "processors::reqsampling::storage: reqsampling is in 2 logs pipelines")
	require.NoError(t, a.Shutdown(context.Background()))
	require.NoError(t, b.Shutdown(context.Background()))
}

// journalOf opens the storage id's sampler keeps its entries in.
func journalOf(t *testing.T, host component.Host, id component.ID) *custody.Journal {
	t.Helper()
	j, err := custody.Open(context.Background(), host, custodytest.ID, component.KindProcessor, id, "", "processors::"+id.String()+"::storage")
	require.NoError(t, err)
	return j
}

// lastRunLeft is a sampler named name with a file_storage of its own and
// its journal open, to write what a last run left there.
func lastRunLeft(t *testing.T, name string) (component.ID, component.Host, *custody.Journal) {
	t.Helper()
	id := component.MustNewIDWithName(metadata.Type.String(), name)
	host := custodytest.FileStorage(t, t.TempDir())
	return id, host, journalOf(t, host, id)
}

// storedRoot is request reqID's root span as a journal entry holds it.
func storedRoot(t *testing.T, reqID string) []byte {
	t.Helper()
	data, err := pdatarequest.MarshalTraces(context.Background(), tracesOf(rec{reqID: reqID, service: "api", root: true, end: 10}))
	require.NoError(t, err)
	return data
}

// The collector starts one pipeline's processors before another pipeline's
// exporters: a signal's records must not be replayed before its processor
// starts, or they reach an exporter that is not running.
func TestASignalsRecordsAreReplayedWhenItsProcessorStarts(t *testing.T) {
	id, host, j := lastRunLeft(t, "replayedlate")
	logs, err := pdatarequest.MarshalLogs(context.Background(), logsOf(rec{reqID: "decided"}))
	require.NoError(t, err)
	require.NoError(t, j.Keep(context.Background(),
		custody.Entry{Seq: j.Next(decidedKind(signalTraces)), Data: storedRoot(t, "decided")},
		custody.Entry{Seq: j.Next(arrivedKind(signalTraces)), Data: storedRoot(t, "waiting")},
		custody.Entry{Seq: j.Next(decidedKind(signalLogs)), Data: logs}))
	require.NoError(t, j.Close(context.Background()))

	cfg := defaultConfig()
	cfg.BasePercentage = 100
	cfg.Storage = &custodytest.ID
	c := &clock{now: t0}
	ticks := make(chan chan struct{})
	cfg.options = append(cfg.options, withClock(c.Now), withTicks(ticks))
	tick := func() {
		c.advance(time.Minute)
		ack := make(chan struct{})
		ticks <- ack
		<-ack
	}
	set := processortest.NewNopSettings(metadata.Type)
	set.ID = id
	f := NewFactory()
	logSink, traceSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	var tracesStarted atomic.Bool
	tracesPipeline, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		assert.True(t, tracesStarted.Load(), "spans passed on before their pipeline started")
		return traceSink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	lp, err := f.CreateLogs(context.Background(), set, cfg, logSink)
	require.NoError(t, err)
	tp, err := f.CreateTraces(context.Background(), set, cfg, tracesPipeline)
	require.NoError(t, err)
	defer func() {
		require.NoError(t, lp.Shutdown(context.Background()))
		require.NoError(t, tp.Shutdown(context.Background()))
	}()

	require.NoError(t, lp.Start(context.Background(), host))
	assert.Equal(t, 1, logSink.LogRecordCount(), "the decided log, at once")
	tick()
	assert.Zero(t, traceSink.SpanCount())

	tracesStarted.Store(true)
	require.NoError(t, tp.Start(context.Background(), host))
	assert.Equal(t, 1, traceSink.SpanCount(), "the decided span, at once")
	tick()
	assert.Equal(t, 2, traceSink.SpanCount(), "and the waiting one, once decided")
}

// Entries that cannot be replayed, of a kind this build does not know or of
// a signal no pipeline uses any more, are deleted from storage at start,
// not kept for ever.
func TestEntriesThatCannotBeReplayedAreDropped(t *testing.T) {
	id, host, j := lastRunLeft(t, "orphans")
	require.NoError(t, j.Keep(context.Background(),
		custody.Entry{Seq: j.Next(decidedKind(signalTraces)), Data: storedRoot(t, "orphan")},
		custody.Entry{Seq: j.Next(custody.Kind(99)), Data: []byte("from a later build")}))
	require.NoError(t, j.Close(context.Background()))

	cfg := defaultConfig()
	cfg.Storage = &custodytest.ID
	set := processortest.NewNopSettings(metadata.Type)
	set.ID = id
	p, err := NewFactory().CreateLogs(context.Background(), set, cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), host))
	require.NoError(t, p.Shutdown(context.Background()))

	j = journalOf(t, host, id)
	defer func() { require.NoError(t, j.Close(context.Background())) }()
	left, err := j.Replay(context.Background())
	require.NoError(t, err)
	assert.Empty(t, left, "the traces entry, with no traces pipeline, and the unknown one")
}
