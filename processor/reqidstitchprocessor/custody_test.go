package reqidstitchprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
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
