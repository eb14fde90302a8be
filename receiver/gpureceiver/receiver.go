package gpureceiver // import "github.com/loom-otel/loom/receiver/gpureceiver"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/kmsg"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/nvmlsource"
)

// Log records are sent at least this often, and sooner when this many wait.
// While the pipeline does not take them, ioctl events beyond
// maxPendingRecords waiting records are dropped and counted, as the ring
// buffer drops them when the reader falls behind.
const (
	logFlushInterval  = time.Second
	logFlushRecords   = 512
	maxPendingRecords = 16 * logFlushRecords
)

// gpuReceiver is shared by the metrics and logs receivers of one
// component ID: one NVML session and one set of BPF programs serve both.
type gpuReceiver struct {
	cfg       *Config
	set       receiver.Settings
	telemetry *metadata.TelemetryBuilder
	obsrecv   *receiverhelper.ObsReport
	hostName  string

	// partsInUse is held for reading while a scrape uses the tracer or NVML
	// outside mu, and for writing while they are detached and closed: a
	// scrape never reads a closed tracer's maps. Never taken under mu.
	partsInUse sync.RWMutex
	mu         sync.Mutex
	started    bool
	// hosts are those of the components sharing r (the logs and the metrics
	// receiver): each gets the parts' status, again whenever it changes.
	hosts []component.Host
	// nvmlProblem and ioctlProblem say why a part does not run (nil: it runs).
	nvmlProblem, ioctlProblem error
	logs                      consumer.Logs
	nvml                      *nvmlsource.Source
	tracer                    *ioctltrace.Tracer
	calls                     *callTable
	lost                      lostCounts
	// procDevices and newTicker are /proc/devices and the poll's ticker;
	// tests set their own.
	procDevices func() (io.ReadCloser, error)
	newTicker   func(time.Duration) (ticks <-chan time.Time, stop func())
	// pending waits for the next flush; the ioctl records in it are in one
	// resource, eventRecords, while hasEventBatch.
	pending        plog.Logs
	pendingRecords int
	eventRecords   plog.LogRecordSlice
	hasEventBatch  bool
	// flushNow asks the flush loop to send pending before its next tick.
	flushNow chan struct{}
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

func newGPUReceiver(cfg *Config, set receiver.Settings) (*gpuReceiver, error) {
	telemetry, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	obsrecv, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "ebpf", ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	hostName := cfg.HostName
	if hostName == "" {
		if hostName, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("host_name: not set and the OS host name is unreadable (%w); set host_name", err)
		}
	}
	return &gpuReceiver{
		cfg: cfg, set: set, telemetry: telemetry, obsrecv: obsrecv, hostName: hostName,
		calls: newCallTable(cfg.Ioctl.MaxProcesses), pending: plog.NewLogs(), flushNow: make(chan struct{}, 1),
		newTicker: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
	}, nil
}

// start opens the NVML session and the tracer on the first Start. A part
// that cannot run is reported as a recoverable error and left out; the
// other part and the collector keep running. The tracer attaches only while
// a configured device is registered in /proc/devices, looked at every
// ioctl.device_poll_interval.
func (r *gpuReceiver) start(host component.Host) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts = append(r.hosts, host)
	if r.started {
		// The logs and the metrics receiver are two components: each
		// reports the shared parts' status.
		componentstatus.ReportStatus(host, r.statusLocked())
		return
	}
	r.started = true
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	if r.cfg.NVML.Enabled {
		src, err := nvmlsource.Open(nvmlsource.Options{
			MIG: r.cfg.NVML.MIG, GPM: r.cfg.NVML.GPM, XIDEvents: r.cfg.NVML.XIDEvents,
			MemoryHighRatio: r.cfg.NVML.MemoryHighRatio, HostName: r.hostName,
			Telemetry: r.telemetry, Logger: r.set.Logger,
		})
		if err != nil {
			r.nvmlProblem = fmt.Errorf("nvml: %w; GPU metrics and XID events are off (nvml.enabled: false silences this)", err)
			r.set.Logger.Warn("GPU receiver part unavailable", zap.Error(r.nvmlProblem))
		} else {
			r.nvml = src
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				if err := src.WatchXID(ctx, r.addLogs); err != nil {
					r.set.Logger.Warn("XID events are off", zap.Error(err))
				}
			}()
		}
	}
	if r.cfg.Ioctl.Enabled {
		tracer, err := r.startTracer()
		if r.attachTracerLocked(tracer, err) {
			ticks, stopTicks := r.newTicker(r.cfg.Ioctl.DevicePollInterval)
			r.wg.Add(1)
			go r.watchDevices(ctx, ticks, stopTicks)
		}
	}
	if r.cfg.Kmsg.Enabled {
		r.wg.Add(1)
		go r.watchKmsg(ctx)
	}
	r.wg.Add(1)
	go r.flushLoop(ctx)
	r.reportLocked()
}

func (r *gpuReceiver) startTracer() (*ioctltrace.Tracer, error) {
	return ioctltrace.Start(ioctltrace.Options{
		Devices: r.cfg.Ioctl.Devices, SlowThreshold: r.cfg.Ioctl.SlowThreshold,
		RingBufferSize: r.cfg.Ioctl.RingBufferSize, DriverVersion: r.cfg.Ioctl.DriverVersion,
		Logger: r.set.Logger, ProcDevices: r.procDevices,
	}, r.onEvent)
}

// attachTracerLocked takes what startTracer returned: the tracer, or why
// there is none. It logs the change and reports whether the devices are
// still to be watched (not after an error other than that no configured
// device is registered: privileges and kernel support do not come later).
func (r *gpuReceiver) attachTracerLocked(tracer *ioctltrace.Tracer, err error) (watch bool) {
	switch {
	case errors.Is(err, ioctltrace.ErrNoDevices):
		waiting := errors.Is(r.ioctlProblem, ioctltrace.ErrNoDevices)
		r.ioctlProblem = r.waitingFor(err)
		if !waiting {
			r.set.Logger.Info("No NVIDIA device registered: driver ioctls are not traced until one is",
				zap.Error(err), zap.Duration("device_poll_interval", r.cfg.Ioctl.DevicePollInterval))
		}
		return true
	case err != nil:
		r.ioctlProblem = fmt.Errorf("ioctl tracing: %w; driver ioctls are not traced (ioctl.enabled: false silences this)", err)
		r.set.Logger.Warn("GPU receiver part unavailable", zap.Error(r.ioctlProblem))
		return false
	}
	r.tracer, r.lost, r.ioctlProblem = tracer, lostCounts{}, nil
	r.set.Logger.Info("Tracing NVIDIA driver ioctls",
		zap.String("attach", string(tracer.Attach())), zap.Stringer("parameter_layouts", tracer.Layouts()),
		zap.Strings("not_registered", tracer.Missing()))
	return true
}

// waitingFor is the ioctl part's problem while no configured device is
// registered (err, an ErrNoDevices, names them).
func (r *gpuReceiver) waitingFor(err error) error {
	return fmt.Errorf("ioctl tracing: %w; it attaches when one is (checked every %s; ioctl.enabled: false silences this)",
		err, r.cfg.Ioctl.DevicePollInterval)
}

// watchDevices attaches the tracer when a configured device is registered
// and detaches it when none is left, until ctx ends or tracing cannot start.
func (r *gpuReceiver) watchDevices(ctx context.Context, ticks <-chan time.Time, stopTicks func()) {
	defer r.wg.Done()
	defer stopTicks()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			if !r.checkDevices() {
				return
			}
		}
	}
}

// checkDevices looks at /proc/devices once; false when there is no point
// looking again. The tracer starts and closes outside r.mu: its reader
// calls onEvent, which takes it.
func (r *gpuReceiver) checkDevices() (watch bool) {
	r.mu.Lock()
	tracer := r.tracer
	r.mu.Unlock()
	if tracer == nil {
		tracer, err := r.startTracer()
		r.mu.Lock()
		defer r.mu.Unlock()
		watch = r.attachTracerLocked(tracer, err)
		if tracer != nil || !watch {
			r.reportLocked()
		}
		return watch
	}
	before := tracer.Missing()
	traced, missing, err := tracer.Refresh()
	switch {
	case err != nil:
		r.set.Logger.Warn("Looking for NVIDIA devices", zap.Error(err))
	case traced == 0:
		r.partsInUse.Lock()
		r.mu.Lock()
		r.tracer = nil
		r.mu.Unlock()
		closeErr := tracer.Close()
		r.partsInUse.Unlock()
		r.set.Logger.Info("The NVIDIA devices are gone: ioctl tracing is detached until one is registered again",
			zap.Strings("not_registered", missing), zap.NamedError("close", closeErr))
		r.mu.Lock()
		r.ioctlProblem = r.waitingFor(ioctltrace.NoDevicesError(missing))
		r.reportLocked()
		r.mu.Unlock()
	case !slices.Equal(before, missing):
		r.set.Logger.Info("Traced NVIDIA devices changed", zap.Int("traced", traced), zap.Strings("not_registered", missing))
	}
	return true
}

// statusLocked is the parts' status: OK, or a recoverable error naming
// every part that does not run and why.
func (r *gpuReceiver) statusLocked() *componentstatus.Event {
	if err := errors.Join(r.nvmlProblem, r.ioctlProblem); err != nil {
		return componentstatus.NewRecoverableErrorEvent(err)
	}
	return componentstatus.NewEvent(componentstatus.StatusOK)
}

// reportLocked reports the parts' status to every component sharing r.
func (r *gpuReceiver) reportLocked() {
	status := r.statusLocked()
	for _, host := range r.hosts {
		componentstatus.ReportStatus(host, status)
	}
}

// shutdown closes everything, after a final flush; the last of the
// receivers sharing r calls it.
func (r *gpuReceiver) shutdown(ctx context.Context) error {
	r.mu.Lock()
	stop := r.stop
	r.mu.Unlock()
	// The device watch first: it may be attaching a tracer.
	if stop != nil {
		stop()
	}
	r.wg.Wait()
	r.partsInUse.Lock()
	r.mu.Lock()
	tracer, src := r.tracer, r.nvml
	r.tracer, r.nvml = nil, nil
	r.mu.Unlock()
	var errs []error
	if tracer != nil {
		errs = append(errs, tracer.Close())
	}
	if src != nil {
		errs = append(errs, src.Close())
	}
	r.partsInUse.Unlock()
	r.flush(ctx)
	r.telemetry.Shutdown()
	return errors.Join(errs...)
}

func (r *gpuReceiver) setLogs(next consumer.Logs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = next
}

// onEvent turns a failed or slow call into a log record.
func (r *gpuReceiver) onEvent(e ioctltrace.Event) {
	ctx := context.Background()
	if e.Malformed {
		r.telemetry.ReceiverGpuIoctlEventsMalformed.Add(ctx, 1)
		return
	}
	r.telemetry.ReceiverGpuIoctlEvents.Add(ctx, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logs == nil {
		return
	}
	if r.pendingRecords >= maxPendingRecords {
		r.telemetry.ReceiverGpuIoctlEventsDropped.Add(ctx, 1)
		return
	}
	var gpuID string
	if r.nvml != nil && e.Kind == ioctltrace.KindRM && e.DeviceMajor == ioctltrace.NVIDIAMajor {
		gpuID = r.nvml.DeviceByMinor()[e.DeviceMinor]
	}
	if !r.hasEventBatch {
		// The ioctl records of one flush share one resource and scope.
		rl := r.pending.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr(string(semconv.HostNameKey), r.hostName)
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(metadata.ScopeName)
		r.eventRecords, r.hasEventBatch = sl.LogRecords(), true
	}
	appendEventRecord(r.eventRecords, gpuID, e)
	if r.pendingRecords++; r.pendingRecords >= logFlushRecords {
		select {
		case r.flushNow <- struct{}{}:
		default: // a flush is asked for already
		}
	}
}

func (r *gpuReceiver) addLogs(ld plog.Logs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logs == nil { // no logs pipeline: nothing would ever flush them
		return
	}
	r.pendingRecords += ld.LogRecordCount()
	ld.ResourceLogs().MoveAndAppendTo(r.pending.ResourceLogs())
}

// watchKmsg sends the kernel log's XIDs until ctx is done. The kernel log
// is opened here, not in start: a problem with it is logged, and the other
// parts are not held up.
func (r *gpuReceiver) watchKmsg(ctx context.Context) {
	defer r.wg.Done()
	var counts kmsg.Counts
	err := kmsg.Watch(ctx, kmsg.Options{
		Path: r.cfg.Kmsg.Path, ProcPath: r.cfg.Kmsg.ProcPath, FromStart: r.cfg.Kmsg.FromStart, HostName: r.hostName,
	}, r.addLogs, &counts)
	if err != nil {
		r.set.Logger.Warn("XID errors from the kernel log are off (kmsg.enabled: false silences this)", zap.Error(err))
	}
	if counts.Overwritten > 0 || counts.TooLong > 0 {
		r.set.Logger.Warn("Kernel log records lost before they were read",
			zap.Int64("overwritten", counts.Overwritten), zap.Int64("too_long", counts.TooLong))
	}
}

func (r *gpuReceiver) flushLoop(ctx context.Context) {
	defer r.wg.Done()
	tick := time.NewTicker(logFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.flush(ctx)
		case <-r.flushNow:
			r.flush(ctx)
		}
	}
}

// flush sends the pending records; a refusal is counted by the
// receiver's standard telemetry and the records are not retried (the
// pipeline's exporters own retries). The batch is taken under r.mu and
// sent outside it: the ring reader, the kernel log watcher and the scraper
// keep adding records while the pipeline is slow. Only the flush loop
// calls it, and shutdown once the loop is done, so batches go out one at a
// time and in order.
func (r *gpuReceiver) flush(ctx context.Context) {
	r.mu.Lock()
	next, ld, n := r.logs, r.pending, r.pendingRecords
	if n == 0 || next == nil {
		r.mu.Unlock()
		return
	}
	r.pending, r.pendingRecords, r.hasEventBatch = plog.NewLogs(), 0, false
	r.mu.Unlock()
	ctx = r.obsrecv.StartLogsOp(context.WithoutCancel(ctx))
	err := next.ConsumeLogs(ctx, ld)
	r.obsrecv.EndLogsOp(ctx, metadata.Type.String(), n, err)
}
