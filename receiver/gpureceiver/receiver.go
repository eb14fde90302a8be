package gpureceiver // import "github.com/loom-otel/loom/receiver/gpureceiver"

import (
	"context"
	"errors"
	"fmt"
	"os"
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
const (
	logFlushInterval = time.Second
	logFlushRecords  = 512
)

// gpuReceiver is shared by the metrics and logs receivers of one
// component ID: one NVML session and one set of BPF programs serve both.
type gpuReceiver struct {
	cfg       *Config
	set       receiver.Settings
	telemetry *metadata.TelemetryBuilder
	obsrecv   *receiverhelper.ObsReport
	hostName  string

	mu      sync.Mutex
	started bool
	status  *componentstatus.Event // of the parts, reported by every Start
	logs    consumer.Logs
	nvml    *nvmlsource.Source
	tracer  *ioctltrace.Tracer
	calls   *callTable
	lost    lostCounts
	// pending waits for the next flush; the ioctl records in it are in one
	// resource, eventRecords, while hasEventBatch.
	pending        plog.Logs
	pendingRecords int
	eventRecords   plog.LogRecordSlice
	hasEventBatch  bool
	stop           context.CancelFunc
	wg             sync.WaitGroup
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
		calls: newCallTable(cfg.Ioctl.MaxProcesses), pending: plog.NewLogs(),
	}, nil
}

// start opens the NVML session and the tracer on the first Start. A part
// that cannot run is reported as a recoverable error and left out; the
// other part keeps working and the collector keeps running.
func (r *gpuReceiver) start(host component.Host) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		// The logs and the metrics receiver are two components: each
		// reports the shared parts' status.
		componentstatus.ReportStatus(host, r.status)
		return
	}
	r.started = true
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	var problems []error
	if r.cfg.NVML.Enabled {
		src, err := nvmlsource.Open(nvmlsource.Options{
			MIG: r.cfg.NVML.MIG, GPM: r.cfg.NVML.GPM, XIDEvents: r.cfg.NVML.XIDEvents,
			MemoryHighRatio: r.cfg.NVML.MemoryHighRatio, HostName: r.hostName,
			Telemetry: r.telemetry, Logger: r.set.Logger,
		})
		if err != nil {
			problems = append(problems, fmt.Errorf("nvml: %w; GPU metrics and XID events are off (nvml.enabled: false silences this)", err))
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
		tracer, err := ioctltrace.Start(ioctltrace.Options{
			Devices: r.cfg.Ioctl.Devices, SlowThreshold: r.cfg.Ioctl.SlowThreshold,
			RingBufferSize: r.cfg.Ioctl.RingBufferSize, DriverVersion: r.cfg.Ioctl.DriverVersion,
			Logger: r.set.Logger,
		}, r.onEvent)
		if err != nil {
			problems = append(problems, fmt.Errorf("ioctl tracing: %w; driver ioctls are not traced (ioctl.enabled: false silences this)", err))
		} else {
			r.tracer = tracer
			r.set.Logger.Info("Tracing NVIDIA driver ioctls",
				zap.String("attach", string(tracer.Attach())), zap.Stringer("parameter_layouts", tracer.Layouts()))
		}
	}
	if r.cfg.Kmsg.Enabled {
		r.wg.Add(1)
		go r.watchKmsg(ctx)
	}
	r.wg.Add(1)
	go r.flushLoop(ctx)
	for _, err := range problems {
		r.set.Logger.Warn("GPU receiver part unavailable", zap.Error(err))
	}
	r.status = componentstatus.NewEvent(componentstatus.StatusOK)
	if len(problems) > 0 {
		r.status = componentstatus.NewRecoverableErrorEvent(errors.Join(problems...))
	}
	componentstatus.ReportStatus(host, r.status)
}

// shutdown closes everything, after a final flush; the last of the
// receivers sharing r calls it.
func (r *gpuReceiver) shutdown(ctx context.Context) error {
	r.mu.Lock()
	stop, tracer, src := r.stop, r.tracer, r.nvml
	r.tracer, r.nvml = nil, nil
	r.mu.Unlock()
	var errs []error
	if tracer != nil {
		errs = append(errs, tracer.Close())
	}
	if stop != nil {
		stop()
	}
	r.wg.Wait()
	if src != nil {
		errs = append(errs, src.Close())
	}
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
		r.flushLocked(ctx)
	}
}

func (r *gpuReceiver) addLogs(ld plog.Logs) {
	r.mu.Lock()
	defer r.mu.Unlock()
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
		}
	}
}

func (r *gpuReceiver) flush(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked(ctx)
}

// flushLocked sends the pending records; a refusal is counted by the
// receiver's standard telemetry and the records are not retried (the
// pipeline's exporters own retries).
func (r *gpuReceiver) flushLocked(ctx context.Context) {
	n := r.pendingRecords
	if n == 0 || r.logs == nil {
		return
	}
	ld := r.pending
	r.pending, r.pendingRecords, r.hasEventBatch = plog.NewLogs(), 0, false
	ctx = r.obsrecv.StartLogsOp(context.WithoutCancel(ctx))
	err := r.logs.ConsumeLogs(ctx, ld)
	r.obsrecv.EndLogsOp(ctx, metadata.Type.String(), n, err)
}
