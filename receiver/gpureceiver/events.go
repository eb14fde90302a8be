package gpureceiver // import "github.com/loom-otel/loom/receiver/gpureceiver"

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
)

// Event names of the ioctl log records.
const (
	eventIoctlFailed = "gpu.ioctl.failed"
	eventIoctlSlow   = "gpu.ioctl.slow"
)

// appendEventRecord adds a failed or slow call to records as a log record
// that reqidstitch attributes to the request whose span covers it on the
// same host, container, process and thread.
func appendEventRecord(records plog.LogRecordSlice, gpuID string, e ioctltrace.Event) {
	lr := records.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(e.Time))
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(time.Now()))

	outcome := "took " + e.Latency.String()
	if e.Outcome.Failed() {
		lr.SetEventName(eventIoctlFailed)
		lr.SetSeverityNumber(plog.SeverityNumberError)
		lr.SetSeverityText("ERROR")
		outcome = "failed: " + failure(e.Outcome) + " after " + e.Latency.String()
	} else {
		lr.SetEventName(eventIoctlSlow)
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
		lr.SetSeverityText("WARN")
	}
	lr.Body().SetStr(fmt.Sprintf("%s %s (pid %d %s, tid %d)", e.Escape, outcome, e.PID, e.ProcessComm, e.TID))

	a := lr.Attributes()
	a.PutInt(string(semconv.ProcessPIDKey), int64(e.PID))
	a.PutInt(string(semconv.ThreadIDKey), int64(e.TID))
	// The pids the process sees itself under, which its own telemetry
	// reports: reqidstitch joins on these.
	a.PutInt(string(semconv.ProcessVpidKey), int64(e.NSPID))
	a.PutInt(golden.ThreadVID, int64(e.NSTID))
	if e.ContainerID != "" {
		a.PutStr(string(semconv.ContainerIDKey), e.ContainerID)
	}
	if e.PodUID != "" {
		a.PutStr(string(semconv.K8SPodUIDKey), e.PodUID)
	}
	a.PutStr(string(semconv.ProcessCommandKey), e.ProcessComm)
	a.PutStr(string(semconv.ThreadNameKey), e.Comm)
	a.PutStr("nvidia.ioctl.escape", e.Escape)
	a.PutStr("nvidia.ioctl.status", e.Outcome.StatusName())
	a.PutStr("nvidia.ioctl.errno", e.Outcome.ErrnoName())
	a.PutStr("nvidia.ioctl.cmd", fmt.Sprintf("0x%08X", e.Cmd))
	a.PutInt("nvidia.ioctl.params_size", int64(e.Size))
	a.PutBool("nvidia.ioctl.xfer", e.XFER)
	a.PutDouble("nvidia.ioctl.duration", e.Latency.Seconds())
	a.PutStr("nvidia.device", fmt.Sprintf("%d:%d", e.DeviceMajor, e.DeviceMinor))
	a.PutInt("linux.cgroup.id", int64(e.CgroupID))
	if gpuID != "" {
		a.PutStr(golden.GPUID, gpuID)
	}
}

// failure names what failed: the driver's status, the syscall's errno, or
// both.
func failure(o ioctltrace.Outcome) string {
	switch {
	case o.Errno != 0 && o.StatusKnown:
		return o.ErrnoName() + " (status in params " + o.StatusName() + ")"
	case o.Errno != 0:
		return o.ErrnoName()
	default:
		return o.StatusName()
	}
}
