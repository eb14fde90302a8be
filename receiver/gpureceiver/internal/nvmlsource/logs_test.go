package nvmlsource

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

func TestXIDDescription(t *testing.T) {
	assert.Equal(t, "GPU has fallen off the bus", XIDDescription(79))
	assert.Equal(t, "Double-bit ECC error", XIDDescription(48))
	assert.Equal(t, "see NVIDIA XID catalog", XIDDescription(4242))
	for _, xid := range []uint64{13, 31, 32, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120, 121, 140} {
		assert.Contains(t, xids, xid)
	}
}

func TestAppendXID(t *testing.T) {
	id := identity{host: "node-1", id: "GPU-1", name: "nvidia0"} // no model: left out
	logs := plog.NewLogs()
	appendXID(logs, id, 31, pcommon.Timestamp(42))
	appendXID(logs, id, 4242, pcommon.Timestamp(43))
	require.Equal(t, 2, logs.LogRecordCount())

	rl := logs.ResourceLogs().At(0)
	assert.Equal(t, map[string]any{"host.name": "node-1", "hw.id": "GPU-1", "gpu.id": "GPU-1", "hw.name": "nvidia0"},
		rl.Resource().Attributes().AsRaw())
	assert.Equal(t, "github.com/loom-otel/loom/receiver/gpureceiver", rl.ScopeLogs().At(0).Scope().Name())
	lr := rl.ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "gpu.xid", lr.EventName())
	assert.Equal(t, plog.SeverityNumberWarn, lr.SeverityNumber(), "XID 31 is an application's page fault")
	assert.Equal(t, "WARN", lr.SeverityText())
	assert.Equal(t, pcommon.Timestamp(42), lr.Timestamp())
	assert.Equal(t, "XID 31 on GPU-1: GPU memory page fault (usually an application accessing an invalid address)", lr.Body().Str())

	lr = logs.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, plog.SeverityNumberError, lr.SeverityNumber())
	assert.Equal(t, "ERROR", lr.SeverityText())
	assert.Equal(t, map[string]any{"nvidia.xid": int64(4242), "nvidia.xid.description": "see NVIDIA XID catalog", "gpu.id": "GPU-1"},
		lr.Attributes().AsRaw())
}

func TestAppendMemoryHigh(t *testing.T) {
	logs := plog.NewLogs()
	appendMemoryHigh(logs, identity{host: "node-1", id: "MIG-1"}, 96, 100, pcommon.Timestamp(7))
	lr := logs.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "gpu.memory.high", lr.EventName())
	assert.Equal(t, "GPU memory 96.0% used on MIG-1: 96 of 100 bytes", lr.Body().Str())
	assert.Equal(t, map[string]any{"hw.gpu.memory.usage": int64(96), "hw.gpu.memory.limit": int64(100), "gpu.id": "MIG-1"},
		lr.Attributes().AsRaw())
}
