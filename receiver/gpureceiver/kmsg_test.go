package gpureceiver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// TestKernelXIDsThroughTheReceiver runs the logs receiver with only the
// kernel log part on a file of kernel lines.
func TestKernelXIDsThroughTheReceiver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	xid := "3,1843,5678901234,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus.\n"
	require.NoError(t, os.WriteFile(path, []byte(xid+xid), 0o600))
	cfg := createDefaultConfig().(*Config)
	cfg.NVML.Enabled, cfg.Ioctl.Enabled = false, false
	cfg.HostName = "gpu-node-1"
	cfg.Kmsg.Path, cfg.Kmsg.ProcPath, cfg.Kmsg.FromStart = path, t.TempDir(), true
	require.NoError(t, cfg.Validate())

	sink := new(consumertest.LogsSink)
	rcv, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { return sink.LogRecordCount() >= 2 }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, rcv.Shutdown(context.Background()))

	ld := sink.AllLogs()[0]
	rl := ld.ResourceLogs().At(0)
	assert.Equal(t, golden.GPUEventScope, rl.ScopeLogs().At(0).Scope().Name(), "reqidstitch and reqsampling select GPU events by scope")
	host, _ := rl.Resource().Attributes().Get("host.name")
	assert.Equal(t, "gpu-node-1", host.Str())
	assert.Equal(t, 2, sink.LogRecordCount(), "a repeated XID is a record of its own")
}
