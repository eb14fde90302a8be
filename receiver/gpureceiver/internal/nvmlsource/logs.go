package nvmlsource // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/nvmlsource"

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// Event names of the log records; reqidstitch's rules match on their attributes.
const (
	EventXID        = "gpu.xid"
	EventMemoryHigh = "gpu.memory.high"
)

// identity is what a log record's resource says about the device it is
// about: few attributes, but the join keys of reqidstitch's GPU rules
// (host.name, gpu.id) among them.
type identity struct {
	host  string
	id    string // UUID: GPU-… or MIG-…
	name  string // nvidia<minor>, nvidia<minor>/gi<gi>/ci<ci>
	model string
}

func (id identity) putResource(attrs pcommon.Map) {
	for _, kv := range [][2]string{{"host.name", id.host}, {"hw.id", id.id}, {golden.GPUID, id.id}, {"hw.name", id.name}, {"hw.model", id.model}} {
		if kv[1] != "" {
			attrs.PutStr(kv[0], kv[1])
		}
	}
}

func (id identity) newRecord(logs plog.Logs, event string, ts pcommon.Timestamp) plog.LogRecord {
	rl := logs.ResourceLogs().AppendEmpty()
	id.putResource(rl.Resource().Attributes())
	sl := rl.ScopeLogs().AppendEmpty()
	// reqidstitch selects GPU events by this scope name.
	sl.Scope().SetName(metadata.ScopeName)
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(ts)
	lr.SetObservedTimestamp(ts)
	lr.SetEventName(event)
	lr.Attributes().PutStr(golden.GPUID, id.id)
	return lr
}

// appendXID adds a gpu.xid record for an XID error on the device.
func appendXID(logs plog.Logs, id identity, xid uint64, ts pcommon.Timestamp) {
	lr := id.newRecord(logs, EventXID, ts)
	desc := XIDDescription(xid)
	sev, text := XIDSeverity(xid)
	lr.SetSeverityNumber(sev)
	lr.SetSeverityText(text)
	lr.Body().SetStr(fmt.Sprintf("XID %d on %s: %s", xid, id.id, desc))
	lr.Attributes().PutInt("nvidia.xid", int64(xid))
	lr.Attributes().PutStr("nvidia.xid.description", desc)
}

// appendMemoryHigh adds a gpu.memory.high record. Usage and limit go on the
// record because reqidstitch's gpu_oom_cause_timeout rule compares them there.
func appendMemoryHigh(logs plog.Logs, id identity, used, total uint64, ts pcommon.Timestamp) {
	lr := id.newRecord(logs, EventMemoryHigh, ts)
	lr.SetSeverityNumber(plog.SeverityNumberWarn)
	lr.SetSeverityText("WARN")
	lr.Body().SetStr(fmt.Sprintf("GPU memory %.1f%% used on %s: %d of %d bytes",
		100*float64(used)/float64(total), id.id, used, total))
	lr.Attributes().PutInt(golden.GPUMemoryUsage, int64(used))
	lr.Attributes().PutInt(golden.GPUMemoryLimit, int64(total))
}

// applicationXIDs are raised when an application misbehaves (or is cleaned
// up after doing so), or record a repair that worked; the GPU keeps working,
// so they are warnings. Every other XID is an error: it points at the
// hardware, the firmware or the driver.
var applicationXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 63: true}

// xids are the meanings of well-known XIDs, after NVIDIA's XID catalog and
// nverror.h in open-gpu-kernel-modules.
var xids = map[uint64]string{
	8:   "GPU stopped processing (channel idle timeout)",
	13:  "Graphics engine exception (usually an application error such as an out-of-range access)",
	31:  "GPU memory page fault (usually an application accessing an invalid address)",
	32:  "Invalid or corrupted push buffer stream",
	43:  "GPU stopped processing: a channel was reset after an application fault",
	45:  "Preemptive cleanup of a channel after earlier errors",
	48:  "Double-bit ECC error",
	61:  "Internal micro-controller (PMU) breakpoint",
	62:  "Internal micro-controller (PMU) halt",
	63:  "ECC page retirement or row remapping recorded",
	64:  "ECC page retirement or row remapping failed",
	68:  "Video decoder (NVDEC0) exception",
	69:  "Graphics engine class error",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "High single-bit ECC error rate",
	94:  "Contained ECC error: the affected application was stopped",
	95:  "Uncontained ECC error: the GPU must be reset",
	109: "Context switch timeout",
	119: "Timeout waiting for the GSP firmware (GSP RPC timeout)",
	120: "GSP firmware error",
	121: "C2C (chip-to-chip) link error",
	140: "Unrecovered ECC error",
	143: "GPU initialization error",
	154: "GPU recovery action changed (nvidia-smi -q shows the action needed)",
}

// XIDSeverity is WARN for the XIDs an application causes and ERROR for the others.
func XIDSeverity(xid uint64) (plog.SeverityNumber, string) {
	if applicationXIDs[xid] {
		return plog.SeverityNumberWarn, "WARN"
	}
	return plog.SeverityNumberError, "ERROR"
}

// XIDDescription says what an XID means.
func XIDDescription(xid uint64) string {
	if d, ok := xids[xid]; ok {
		return d
	}
	return "see NVIDIA XID catalog"
}
