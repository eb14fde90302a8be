package gpureceiver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadatatest"
)

// blockedLogs is a logs pipeline that hands each batch to the test on
// batches and answers with what the test sends on results.
type blockedLogs struct {
	batches chan plog.Logs
	results chan error
}

func (b *blockedLogs) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (b *blockedLogs) ConsumeLogs(_ context.Context, ld plog.Logs) error {
	b.batches <- ld
	return <-b.results
}

var failedCall = ioctltrace.Event{
	Time: time.Now(), Latency: time.Millisecond, PID: 48211, TID: 48236, ProcessComm: "python3",
	Kind: ioctltrace.KindRM, Escape: "NV_ESC_RM_ALLOC", Outcome: ioctltrace.Outcome{Status: 0x51, StatusKnown: true},
}

func xidRecord() plog.Logs {
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().SetEventName("gpu.xid")
	return ld
}

// startFlushLoopOnly starts a receiver whose parts are all off: the test
// is the ring reader and the kernel log watcher, calling onEvent and addLogs.
// Without logs it is a metrics-only receiver.
func startFlushLoopOnly(t *testing.T, logs consumer.Logs) (*gpuReceiver, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := createDefaultConfig().(*Config)
	cfg.NVML.Enabled, cfg.Ioctl.Enabled, cfg.Kmsg.Enabled = false, false, false
	cfg.HostName = "gpu-node-1"
	r, err := newGPUReceiver(cfg, metadatatest.NewSettings(tel))
	require.NoError(t, err)
	if logs != nil {
		r.setLogs(logs)
	}
	r.start(componenttest.NewNopHost())
	return r, tel
}

// produce runs fn as a producer would, and fails the test if fn waits for
// the pipeline (the timeout only passes when it does).
func produce(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a producer is waiting for the blocked pipeline")
	}
}

// blockOnFirstBatch sends logFlushRecords events, which ask for a flush,
// and returns the batch the pipeline then holds without answering. The
// flush ticker may have sent it before all of them came: the rest wait.
func blockOnFirstBatch(t *testing.T, r *gpuReceiver, logs *blockedLogs) plog.Logs {
	t.Helper()
	produce(t, func() {
		for range logFlushRecords {
			r.onEvent(failedCall)
		}
	})
	return <-logs.batches
}

func pendingRecords(r *gpuReceiver) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pendingRecords
}

// receiverRecords sums a receiverhelper counter of log records.
func receiverRecords(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	require.NoError(t, err)
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		n += dp.Value
	}
	return n
}

// TestABlockedPipelineDoesNotStallTheProducers: while the pipeline holds a
// batch, ioctl events and XIDs are still taken into the next one, which
// goes out once the pipeline answers; the refused batch counts as refused
// and the next as accepted.
func TestABlockedPipelineDoesNotStallTheProducers(t *testing.T) {
	logs := &blockedLogs{batches: make(chan plog.Logs), results: make(chan error)}
	r, tel := startFlushLoopOnly(t, logs)
	firstRecords := blockOnFirstBatch(t, r, logs).LogRecordCount()

	produce(t, func() {
		for range 2 * logFlushRecords {
			r.onEvent(failedCall)
		}
		r.addLogs(xidRecord())
	})
	waiting := logFlushRecords - firstRecords + 2*logFlushRecords + 1
	assert.Equal(t, waiting, pendingRecords(r), "every record that came while the pipeline was blocked waits")

	logs.results <- errors.New("pipeline refused the batch")
	second := <-logs.batches
	logs.results <- nil
	assert.Equal(t, waiting, second.LogRecordCount())
	require.Equal(t, 2, second.ResourceLogs().Len(), "the ioctl records share a resource; the XID has its own")
	assert.Equal(t, "gpu.xid", second.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords().At(0).EventName(),
		"records go out in the order they came")
	require.NoError(t, r.shutdown(context.Background()))

	assert.Equal(t, int64(firstRecords), receiverRecords(t, tel, "otelcol_receiver_refused_log_records"))
	assert.Equal(t, int64(waiting), receiverRecords(t, tel, "otelcol_receiver_accepted_log_records"))
}

// TestIoctlEventsBeyondTheLimitAreDroppedWhileThePipelineIsBlocked: the
// records waiting for a blocked pipeline are bounded, as the ring buffer
// was when the reader waited; the events past the bound are counted.
func TestIoctlEventsBeyondTheLimitAreDroppedWhileThePipelineIsBlocked(t *testing.T) {
	logs := &blockedLogs{batches: make(chan plog.Logs), results: make(chan error)}
	r, tel := startFlushLoopOnly(t, logs)
	firstRecords := blockOnFirstBatch(t, r, logs).LogRecordCount()

	produce(t, func() {
		for range maxPendingRecords + 3 {
			r.onEvent(failedCall)
		}
	})
	assert.Equal(t, maxPendingRecords, pendingRecords(r))
	dropped := int64(logFlushRecords - firstRecords + 3)
	metadatatest.AssertEqualReceiverGpuIoctlEventsDropped(t, tel, []metricdata.DataPoint[int64]{{Value: dropped}},
		metricdatatest.IgnoreTimestamp())

	logs.results <- nil
	second := <-logs.batches
	logs.results <- nil
	assert.Equal(t, maxPendingRecords, second.LogRecordCount())
	require.NoError(t, r.shutdown(context.Background()))
}

func TestWithoutALogsPipelineNothingWaits(t *testing.T) {
	r, _ := startFlushLoopOnly(t, nil)
	defer func() { require.NoError(t, r.shutdown(context.Background())) }()
	r.addLogs(xidRecord()) // a metrics-only receiver's memory-high records
	r.onEvent(failedCall)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Zero(t, r.pendingRecords, "no logs pipeline would ever flush them")
	assert.Zero(t, r.pending.LogRecordCount())
}
