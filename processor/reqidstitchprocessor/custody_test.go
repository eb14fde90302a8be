package reqidstitchprocessor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/internal/custody/custodytest"
	"github.com/loom-otel/loom/processor/reqidstitchprocessor/internal/metadata"
)

func stored(c *Config) { c.Storage = &custodytest.ID }

func TestHeldRecordsSurviveACrash(t *testing.T) {
	dir := t.TempDir()
	before := newHarnessOn(t, custodytest.FileStorage(t, dir), nil, stored)
	require.NoError(t, before.logs.ConsumeLogs(fromTenant("a"), logsOf(rec{service: "x", at: t0, name: "waits for its span", attrs: reqIDAttr(reqA)})))
	require.Empty(t, before.outLogs(), "held")

	after := newHarnessOn(t, custodytest.FileStorage(t, custodytest.Snapshot(t, dir)), nil, stored)
	require.Empty(t, after.outLogs(), "held again, for a binding")
	after.consumeTraces(tracesOf(rootA))
	after.tick(100 * time.Millisecond)
	logs := after.outLogs()
	require.Len(t, logs, 1, "the held log, bound after the restart")
	assert.Equal(t, traceID(1), logs[0].TraceID())
	assert.Equal(t, []string{"a"}, client.FromContext(after.logOut.Contexts()[0]).Metadata.Get("x-tenant"),
		"with the client metadata it came with")
	after.shutdown()

	before.shutdown() // passes the held log on, and deletes it
	again := newHarnessOn(t, custodytest.FileStorage(t, dir), nil, stored)
	again.tick(time.Minute)
	assert.Empty(t, again.outLogs(), "passed on once, then deleted from storage")
}

func TestStitchedRecordsAreReplayedAsTheyWerePassedOn(t *testing.T) {
	dir := t.TempDir()
	stuck := custodytest.NewStuckLogs()
	before := newHarnessOn(t, custodytest.FileStorage(t, dir), stuck, stored)
	before.consumeLogs(logsOf(rec{service: "x", at: t0, name: "waits for its span", attrs: reqIDAttr(reqA)}))
	before.consumeTraces(tracesOf(rootA))
	swept := make(chan struct{})
	go func() { before.tick(100 * time.Millisecond); close(swept) }()
	<-stuck.Called
	snapshot := custodytest.Snapshot(t, dir)
	stuck.Release()
	<-swept

	after := newHarnessOn(t, custodytest.FileStorage(t, snapshot), nil, stored)
	require.Len(t, after.logOut.AllLogs(), 1, "passed on at start, not held again")
	var m plog.ProtoMarshaler
	passedOn, err := m.MarshalLogs(stuck.AllLogs()[0])
	require.NoError(t, err)
	replayed, err := m.MarshalLogs(after.logOut.AllLogs()[0])
	require.NoError(t, err)
	assert.Equal(t, passedOn, replayed, "a redelivery is identical: trace context, event.id and all")
}

// fromTenant is the context of a call whose client sent the header x-tenant.
func fromTenant(tenant string) context.Context {
	return client.NewContext(context.Background(), client.Info{
		Metadata: client.NewMetadata(map[string][]string{"x-tenant": {tenant}}),
	})
}

func TestHeldRecordsGoOnWithTheirClientsContext(t *testing.T) {
	h := newHarness(t, nil)
	for _, tenant := range []string{"a", "b", "a"} {
		require.NoError(t, h.logs.ConsumeLogs(fromTenant(tenant), logsOf(rec{service: "x", at: t0, name: tenant, attrs: reqIDAttr(reqA)})))
	}
	h.tick(time.Minute)
	require.Len(t, h.logOut.AllLogs(), 2, "one call per client")
	for i, ld := range h.logOut.AllLogs() {
		tenant := client.FromContext(h.logOut.Contexts()[i]).Metadata.Get("x-tenant")
		require.Len(t, tenant, 1)
		var bodies []string
		forEachLog(ld, func(_ plog.ResourceLogs, lr plog.LogRecord) { bodies = append(bodies, lr.Body().Str()) })
		for _, b := range bodies {
			assert.Equal(t, tenant[0], b, "each record with its own client's metadata")
		}
	}
}

// Two logs pipelines share the component's index, not their holds: each
// pipeline's held records go on to that pipeline, filled from spans the
// traces pipeline saw.
func TestEachPipelineGetsItsOwnHeldRecords(t *testing.T) {
	h := newHarness(t, nil)
	other := new(consumertest.LogsSink)
	otherLogs := h.addLogsPipeline(other)
	// Neither request has a span yet: both records wait, each in its pipeline's hold.
	h.consumeLogs(logsOf(rec{service: "model", at: t0, name: "first", attrs: reqIDAttr(reqA)}))
	require.NoError(t, otherLogs.ConsumeLogs(context.Background(), logsOf(rec{service: "model", at: t0, name: "second", attrs: reqIDAttr(reqB)})))
	rootB := rootA
	rootB.trace, rootB.span, rootB.attrs = traceID(2), spanID(3), reqIDAttr(reqB)
	h.consumeTraces(tracesOf(rootA, rootB))
	h.tick(time.Millisecond)

	mine := h.outLogs()
	require.Len(t, mine, 1)
	assert.Equal(t, "first", mine[0].Body().Str())
	assert.Equal(t, traceID(1), mine[0].TraceID(), "bound by the traces pipeline's span")
	require.Equal(t, 1, other.LogRecordCount())
	theirs := other.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "second", theirs.Body().Str())
	assert.Equal(t, traceID(2), theirs.TraceID())
}

func TestStorageRefusesTwoPipelinesOfOneSignal(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	stored(cfg)
	set := processortest.NewNopSettings(metadata.Type)
	a, err := f.CreateLogs(context.Background(), set, cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	b, err := f.CreateLogs(context.Background(), set, cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	err = a.Start(context.Background(), custodytest.FileStorage(t, t.TempDir()))
	assert.ErrorContains(t, err, "processors::reqidstitch::storage: reqidstitch is in 2 logs pipelines")
	require.NoError(t, a.Shutdown(context.Background()))
	require.NoError(t, b.Shutdown(context.Background()))
}

// refusingLogs refuses its first calls with err, then keeps what it gets.
type refusingLogs struct {
	consumertest.LogsSink
	refusals int
	err      error
}

func (r *refusingLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if r.refusals > 0 {
		r.refusals--
		return r.err
	}
	return r.LogsSink.ConsumeLogs(ctx, ld)
}

func TestRefusedRecordsAreOfferedAgainUntilTaken(t *testing.T) {
	dir := t.TempDir()
	next := &refusingLogs{refusals: 2, err: errors.New("sending queue is full")}
	h := newHarnessOn(t, custodytest.FileStorage(t, dir), next, stored)
	h.consumeLogs(logsOf(rec{service: "x", at: t0, name: "waits for its span", attrs: reqIDAttr(reqA)}))
	h.consumeTraces(tracesOf(rootA))
	h.tick(100 * time.Millisecond)
	h.tick(100 * time.Millisecond)
	require.Zero(t, next.LogRecordCount(), "refused twice")

	crashed := newHarnessOn(t, custodytest.FileStorage(t, custodytest.Snapshot(t, dir)), nil, stored)
	require.Len(t, crashed.outLogs(), 1, "kept in storage while refused: a crash now passes it on at start")

	h.tick(100 * time.Millisecond)
	require.Equal(t, 1, next.LogRecordCount(), "taken at the third offer")
	assert.Equal(t, traceID(1), next.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).TraceID(), "stitched once")
	h.tick(100 * time.Millisecond)
	assert.Equal(t, 1, next.LogRecordCount(), "and not offered again")
	assert.Zero(t, h.counter("processor_reqidstitch_hold_dropped"))
	h.shutdown()
	again := newHarnessOn(t, custodytest.FileStorage(t, dir), nil, stored)
	assert.Empty(t, again.outLogs(), "deleted from storage once taken")
}

func TestRecordsRefusedForGoodAreDroppedCounted(t *testing.T) {
	for name, tc := range map[string]struct {
		err       error
		configure func(*Config)
		cause     string
		// dropped of the two held records; the rest stay in storage.
		dropped int64
	}{
		"permanent": {consumererror.NewPermanent(errors.New("bad data")), stored, "refused", 2},
		"too many waiting": {errors.New("sending queue is full"), func(c *Config) {
			stored(c)
			c.Hold.MaxRecords = 1 // the first is pushed out of the hold by the second, and waits for a retry
		}, "retries_full", 1},
		"still refused at shutdown without storage": {errors.New("sending queue is full"), nil, "shutdown", 2},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			next := &refusingLogs{refusals: 100, err: tc.err}
			h := newHarnessOn(t, custodytest.FileStorage(t, dir), next, tc.configure)
			h.consumeLogs(logsOf(rec{service: "x", at: t0, name: "waits for its span", attrs: reqIDAttr(reqA)}))
			h.consumeLogs(logsOf(rec{service: "x", at: t0, name: "waits too", attrs: reqIDAttr(reqA)}))
			h.consumeTraces(tracesOf(rootA))
			h.tick(100 * time.Millisecond)
			h.shutdown()
			assert.Equal(t, tc.dropped, h.counter("processor_reqidstitch_hold_dropped", "cause", tc.cause))
			assert.Zero(t, next.LogRecordCount())
			again := newHarnessOn(t, custodytest.FileStorage(t, dir), nil, tc.configure)
			kept := 0
			if tc.configure != nil {
				kept = 2 - int(tc.dropped)
			}
			assert.Len(t, again.outLogs(), kept, "what was not dropped is in storage for the next start")
		})
	}
}
