//go:build linux && amd64

package gpureceiver

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

type statusHost struct {
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *statusHost) GetExtensions() map[component.ID]component.Component { return nil }

func (h *statusHost) Report(e *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

// TestIoctlEventsAndMetricsThroughTheReceiver runs both halves of the
// receiver, as a collector with logs and metrics pipelines would, on
// /dev/null: the ioctl part traces for real; the NVML part is absent (no
// GPU here, or no nvml build tag) and must say so without stopping the rest.
func TestIoctlEventsAndMetricsThroughTheReceiver(t *testing.T) {
	require.Zero(t, os.Geteuid(), "the eBPF tests need root (CAP_BPF, CAP_PERFMON)")
	cfg := createDefaultConfig().(*Config)
	cfg.CollectionInterval = 100 * time.Millisecond
	cfg.HostName = "gpu-node-1"
	cfg.Ioctl.Devices = []ioctltrace.DeviceMatch{{Path: "/dev/null"}}
	cfg.Ioctl.DriverVersion = "595.45.04"
	require.NoError(t, cfg.Validate())

	f := NewFactory()
	set := receivertest.NewNopSettings(metadata.Type)
	logs, metrics := new(consumertest.LogsSink), new(consumertest.MetricsSink)
	lr, err := f.CreateLogs(context.Background(), set, cfg, logs)
	require.NoError(t, err)
	mr, err := f.CreateMetrics(context.Background(), set, cfg, metrics)
	require.NoError(t, err)
	host := &statusHost{}
	require.NoError(t, lr.Start(context.Background(), host))
	require.NoError(t, mr.Start(context.Background(), host))

	runtime.LockOSThread()
	tid := unix.Gettid()
	fd, err := unix.Open("/dev/null", unix.O_RDWR, 0)
	require.NoError(t, err)
	params := make([]byte, 56)
	binary.NativeEndian.PutUint32(params[40:], 0x51) // NVOS02 status
	const rmAllocMemory = 0xC0384627
	for range 3 {
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), rmAllocMemory, uintptr(unsafe.Pointer(&params[0])))
	}
	_ = unix.Close(fd)
	runtime.UnlockOSThread()

	// Other test binaries trace /dev/null too: this process's records only.
	var rec plog.LogRecord
	var rl plog.ResourceLogs
	ownRecords := func() int {
		n := 0
		for _, ld := range logs.AllLogs() {
			for i := 0; i < ld.ResourceLogs().Len(); i++ {
				r := ld.ResourceLogs().At(i)
				records := r.ScopeLogs().At(0).LogRecords()
				for j := 0; j < records.Len(); j++ {
					if pid, _ := records.At(j).Attributes().Get("process.pid"); pid.Int() == int64(os.Getpid()) {
						rec, rl = records.At(j), r
						n++
					}
				}
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return ownRecords() >= 3 }, 5*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return callsOf(metrics.AllMetrics(), os.Getpid()) >= 3 }, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, mr.Shutdown(context.Background()))
	require.NoError(t, lr.Shutdown(context.Background()))

	host0, _ := rl.Resource().Attributes().Get("host.name")
	assert.Equal(t, "gpu-node-1", host0.Str())
	assert.Equal(t, golden.GPUEventScope, rl.ScopeLogs().At(0).Scope().Name(),
		"reqidstitch selects GPU events by this scope")
	assert.Equal(t, eventIoctlFailed, rec.EventName())
	assert.Equal(t, plog.SeverityNumberError, rec.SeverityNumber())
	attrs := rec.Attributes().AsRaw()
	assert.Equal(t, int64(os.Getpid()), attrs["process.pid"])
	assert.Equal(t, int64(tid), attrs["thread.id"])
	assert.Equal(t, int64(os.Getpid()), attrs["process.vpid"], "this process is in the host's pid namespace")
	assert.Equal(t, int64(tid), attrs["thread.vid"])
	assert.NotContains(t, attrs, "container.id")
	assert.Equal(t, "NV_ESC_RM_ALLOC_MEMORY", attrs["nvidia.ioctl.escape"])
	assert.Equal(t, "NV_ERR_NO_MEMORY", attrs["nvidia.ioctl.status"])
	assert.Equal(t, "ENOTTY", attrs["nvidia.ioctl.errno"])
	assert.Equal(t, "0xC0384627", attrs["nvidia.ioctl.cmd"])
	assert.Equal(t, "1:3", attrs["nvidia.device"])
	assert.Positive(t, attrs["nvidia.ioctl.duration"])
	assert.Contains(t, rec.Body().Str(), "NV_ESC_RM_ALLOC_MEMORY failed: ENOTTY (status in params NV_ERR_NO_MEMORY)")
	assert.WithinDuration(t, time.Now(), rec.Timestamp().AsTime(), 10*time.Second)

	host.mu.Lock()
	defer host.mu.Unlock()
	require.Len(t, host.events, 2, "the logs and the metrics receiver each report")
	for _, e := range host.events {
		assert.Equal(t, componentstatus.StatusRecoverableError, e.Status())
		assert.Contains(t, e.Err().Error(), "nvml: ")
		assert.NotContains(t, e.Err().Error(), "ioctl tracing")
	}
}

// callsOf sums nvidia.ioctl.calls of a process in the latest scrape that
// has them, checking the duration histogram beside it.
func callsOf(all []pmetric.Metrics, pid int) int64 {
	var calls int64
	for _, md := range all {
		var scrape int64
		var histogramCount uint64
		forEachMetric(md, func(m pmetric.Metric) {
			switch m.Name() {
			case "nvidia.ioctl.calls":
				for i := 0; i < m.Sum().DataPoints().Len(); i++ {
					dp := m.Sum().DataPoints().At(i)
					if v, _ := dp.Attributes().Get("process.pid"); v.Int() == int64(pid) {
						scrape += dp.IntValue()
					}
				}
			case "nvidia.ioctl.duration":
				for i := 0; i < m.Histogram().DataPoints().Len(); i++ {
					dp := m.Histogram().DataPoints().At(i)
					if v, _ := dp.Attributes().Get("process.pid"); v.Int() == int64(pid) {
						histogramCount += dp.Count()
						var inBuckets uint64
						for _, n := range dp.BucketCounts().AsRaw() {
							inBuckets += n
						}
						if inBuckets != dp.Count() || dp.Sum() <= 0 {
							return
						}
					}
				}
			}
		})
		if scrape > 0 && uint64(scrape) == histogramCount {
			calls = scrape
		}
	}
	return calls
}

func forEachMetric(md pmetric.Metrics, fn func(pmetric.Metric)) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				fn(ms.At(k))
			}
		}
	}
}

// TestReceiversOfAnIDShareUntilTheLastShutdown: the logs and metrics
// receivers of one ID share a gpuReceiver; after both shut down (a config
// reload) the next ones get a new one with the new config.
func TestReceiversOfAnIDShareUntilTheLastShutdown(t *testing.T) {
	f := &factory{}
	cfg := createDefaultConfig().(*Config)
	cfg.NVML.Enabled = false
	cfg.Ioctl.Devices = []ioctltrace.DeviceMatch{{Path: "/dev/null"}}
	set := receivertest.NewNopSettings(metadata.Type)
	ctx := context.Background()
	lr, err := f.createLogs(ctx, set, cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	mr, err := f.createMetrics(ctx, set, cfg, new(consumertest.MetricsSink))
	require.NoError(t, err)
	first := lr.(*logsReceiver).r
	require.NoError(t, lr.Start(ctx, &statusHost{}))
	require.NoError(t, mr.Start(ctx, &statusHost{}))
	require.NoError(t, lr.Shutdown(ctx))
	require.NoError(t, lr.Shutdown(ctx), "a second Shutdown releases nothing more")
	first.mu.Lock()
	assert.NotNil(t, first.tracer, "the metrics receiver still runs")
	first.mu.Unlock()
	require.NoError(t, mr.Shutdown(ctx))
	assert.Nil(t, first.tracer)

	reloaded, err := f.createLogs(ctx, set, cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	assert.NotSame(t, first, reloaded.(*logsReceiver).r)
	require.NoError(t, reloaded.Shutdown(ctx))
}

// TestTracerAttachesWhileADeviceIsRegistered: on a host where no configured
// device is registered the receiver loads nothing and says so (status and
// log); when one is registered it attaches at the next look and its calls
// come out; when none is left it detaches and says so again. The devices
// are the default ones and mem's major (1), which the test's own
// /proc/devices, a temporary file, registers and unregisters; the ticker is
// the test's.
func TestTracerAttachesWhileADeviceIsRegistered(t *testing.T) {
	require.Zero(t, os.Geteuid(), "the eBPF tests need root (CAP_BPF, CAP_PERFMON)")
	cfg := createDefaultConfig().(*Config)
	cfg.NVML.Enabled = false
	mem := uint32(1)
	cfg.Ioctl.Devices = append(cfg.Ioctl.Devices, ioctltrace.DeviceMatch{Major: &mem})
	cfg.Ioctl.DriverVersion = "595.45.04"
	require.NoError(t, cfg.Validate())

	core, logged := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	f := NewFactory()
	logs := new(consumertest.LogsSink)
	lr, err := f.CreateLogs(context.Background(), set, cfg, logs)
	require.NoError(t, err)
	mr, err := f.CreateMetrics(context.Background(), set, cfg, new(consumertest.MetricsSink))
	require.NoError(t, err)
	r := lr.(*logsReceiver).r
	procDevices := filepath.Join(t.TempDir(), "devices")
	register := func(drivers string) {
		require.NoError(t, os.WriteFile(procDevices, []byte("Character devices:\n"+drivers+"\nBlock devices:\n  7 loop\n"), 0o600))
	}
	register("  4 tty\n")
	ticks := make(chan time.Time)
	r.procDevices = func() (io.ReadCloser, error) { return os.Open(procDevices) }
	r.newTicker = func(d time.Duration) (<-chan time.Time, func()) {
		assert.Equal(t, 10*time.Second, d, "the documented default")
		return ticks, func() {}
	}
	// look runs the receiver's look at /proc/devices: the second tick is
	// taken only once the first one's look is done.
	look := func() {
		ticks <- time.Now()
		ticks <- time.Now()
	}
	host := &statusHost{}
	require.NoError(t, lr.Start(context.Background(), host))
	require.NoError(t, mr.Start(context.Background(), host))
	defer func() {
		require.NoError(t, mr.Shutdown(context.Background()))
		require.NoError(t, lr.Shutdown(context.Background()))
	}()

	lastStatus := func(n int) []*componentstatus.Event {
		host.mu.Lock()
		defer host.mu.Unlock()
		require.Len(t, host.events, n)
		return host.events[n-2:]
	}
	for _, e := range lastStatus(2) {
		assert.Equal(t, componentstatus.StatusRecoverableError, e.Status())
		assert.ErrorContains(t, e.Err(), "ioctl tracing: no device to trace: none of the configured devices is registered in /proc/devices (major 195, nvidia-uvm, major 1); it attaches when one is (checked every 10s")
	}
	assert.Equal(t, 1, logged.FilterMessageSnippet("No NVIDIA device registered").Len())
	r.mu.Lock()
	assert.Nil(t, r.tracer, "nothing is loaded")
	r.mu.Unlock()

	look()
	lastStatus(2) // no change, no report
	assert.Equal(t, 1, logged.FilterMessageSnippet("No NVIDIA device registered").Len(), "said once")

	register("  1 mem\n")
	look()
	for _, e := range lastStatus(4) {
		assert.Equal(t, componentstatus.StatusOK, e.Status())
	}
	attached := logged.FilterMessage("Tracing NVIDIA driver ioctls").All()
	require.Len(t, attached, 1)
	assert.Equal(t, []any{"major 195", "nvidia-uvm"}, attached[0].ContextMap()["not_registered"])

	fd, err := unix.Open("/dev/null", unix.O_RDWR, 0)
	require.NoError(t, err)
	params := make([]byte, 32)
	binary.NativeEndian.PutUint32(params[28:], 0x51)
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), 0xC020462B, uintptr(unsafe.Pointer(&params[0])))
	_ = unix.Close(fd)
	require.Eventually(t, func() bool {
		for _, ld := range logs.AllLogs() {
			for i := 0; i < ld.ResourceLogs().Len(); i++ {
				records := ld.ResourceLogs().At(i).ScopeLogs().At(0).LogRecords()
				for j := 0; j < records.Len(); j++ {
					if pid, _ := records.At(j).Attributes().Get("process.pid"); pid.Int() == int64(os.Getpid()) {
						return true
					}
				}
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "the attached tracer's event")

	register("  4 tty\n")
	look()
	for _, e := range lastStatus(6) {
		assert.Equal(t, componentstatus.StatusRecoverableError, e.Status())
		assert.ErrorContains(t, e.Err(), "(major 195, nvidia-uvm, major 1)")
	}
	assert.Equal(t, 1, logged.FilterMessageSnippet("ioctl tracing is detached").Len())
	assert.Equal(t, 1, logged.FilterMessageSnippet("No NVIDIA device registered").Len(), "the detach said it already")
	look()
	lastStatus(6) // still none: no report, no log
	r.mu.Lock()
	assert.Nil(t, r.tracer)
	r.mu.Unlock()
}
