//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"golang.org/x/sys/unix"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
)

// uptime is the kernel clock's time since boot, as /dev/kmsg stamps its records.
func uptime(t *testing.T) time.Duration {
	t.Helper()
	raw, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(secs * float64(time.Second))
}

// TestKernelXIDsThroughTheCollector feeds the default config's gpu receiver
// a kernel log (a FIFO in /dev/kmsg's format) with an XID naming this
// process, twice, during a request's span in this process on this host: both
// come out as gpu.xid records with the process resolved, reqidstitch gives
// them the request's req_id, and the request is kept as failed.
func TestKernelXIDsThroughTheCollector(t *testing.T) {
	const host = "e2e-xid-node"
	fifo := filepath.Join(t.TempDir(), "kmsg")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sink := startSink(t)
	col := startCollector(t, "distribution/config.yaml", withEdits(exportTo(sink, "logs", "traces"), func(cfg map[string]any) {
		sampling := mapAt(cfg, "processors", "reqsampling")
		sampling["base_percentage"] = 0
		sampling["decision_wait"] = "2s"
		gpu := mapAt(cfg, "receivers", "gpu")
		gpu["host_name"] = host
		gpu["ioctl"] = map[string]any{"enabled": false}
		gpu["kmsg"] = map[string]any{"path": fifo}
	}))

	start := time.Now()
	sinceBoot := uptime(t)
	pid := os.Getpid()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	line := fmt.Sprintf("3,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=%d, name=e2e.test, GPU has fallen off the bus.\n", 1800, sinceBoot.Microseconds(), pid)
	if _, err := w.WriteString(line + " SUBSYSTEM=pci\n" + line); err != nil {
		t.Fatal(err)
	}

	reqID := golden.NewReqID(start, rand.New(rand.NewPCG(3, 4)))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm-worker")
	rs.Resource().Attributes().PutStr("host.name", host)
	rs.Resource().Attributes().PutInt("process.pid", int64(pid))
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("model/forward")
	span.SetTraceID(pcommon.TraceID{9, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	span.SetSpanID(pcommon.SpanID{9, 2, 3, 4, 5, 6, 7, 8})
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(-2 * time.Second)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(2 * time.Second)))
	span.Attributes().PutStr(golden.ReqID, reqID)
	span.Attributes().PutStr("stage", "model/forward")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := ptraceotlp.NewGRPCClient(col.dialOTLP()).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}

	var xids []plog.LogRecord
	found := func() bool {
		xids = xids[:0]
		for _, ld := range sink.Logs() {
			forEachLog(ld, func(lr plog.LogRecord) {
				if lr.EventName() == "gpu.xid" && strAttr(lr.Attributes(), "nvidia.xid.source") == "kmsg" {
					xids = append(xids, lr)
				}
			})
		}
		return len(xids) >= 2
	}
	if _, err := sink.WaitFor(ctx, 30*time.Second, time.Second, func(otlpsink.Counts) bool { return found() }); err != nil {
		t.Fatalf("no two gpu.xid records from the kernel log: %v\ncollector log:\n%s", err, col.log())
	}
	if len(xids) != 2 {
		t.Errorf("%d gpu.xid records, want 2: a repeat is a record of its own", len(xids))
	}
	for _, lr := range xids {
		a := lr.Attributes()
		if got := strAttr(a, "process.pid"); got != strconv.Itoa(pid) {
			t.Errorf("process.pid %s, want %d", got, pid)
		}
		if got := strAttr(a, "process.vpid"); got == "" {
			t.Errorf("the pid was not resolved in /proc: %v", a.AsRaw())
		}
		if d := lr.Timestamp().AsTime().Sub(start); d < -2*time.Second || d > 2*time.Second {
			t.Errorf("the record's time is %s away from when the line was written", d)
		}
		if got := strAttr(a, golden.ReqID); got != reqID {
			t.Errorf("req_id %q, want the request whose span ran in that process then, %s", got, reqID)
		}
		if got := strAttr(a, golden.SamplingPolicy); got != "errors" {
			t.Errorf("kept by %q, want errors: the XID fails the request it joined (%v)", got, a.AsRaw())
		}
	}
}
