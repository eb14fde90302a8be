//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"golang.org/x/sys/unix"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
)

// TestGPUDriverFailureJoinsItsRequest is the gpu receiver's story through
// the default config: a model server's thread makes a driver call that
// fails with NV_ERR_NO_MEMORY inside a request's span, and the receiver's
// log record of that call comes out carrying the request's req_id and trace
// context; the request, which nothing else marks as failing, is kept whole
// because of it while the sampler keeps no healthy request, and a slow
// driver call outside any request is kept as well (the gpu_events policy).
// The traced device is /dev/null here (no GPU), so the call also fails with
// ENOTTY; the status is the one the parameters hold.
func TestGPUDriverFailureJoinsItsRequest(t *testing.T) {
	const host = "e2e-gpu-node"
	sink := startSink(t)
	col := startCollector(t, "distribution/config.yaml", withEdits(exportTo(sink, "logs", "traces"), func(cfg map[string]any) {
		sampling := mapAt(cfg, "processors", "reqsampling")
		sampling["base_percentage"] = 0
		sampling["decision_wait"] = "2s"
		gpu := mapAt(cfg, "receivers", "gpu")
		gpu["host_name"] = host
		gpu["ioctl"] = map[string]any{
			"devices":        []any{map[string]any{"path": "/dev/null"}, map[string]any{"path": "/dev/urandom"}},
			"driver_version": "595.45.04",
			"slow_threshold": "1ns", // every traced call is slow: /dev/urandom's too
		}
	}))

	// Outside any request: a call that succeeds, slowly.
	urandom, err := unix.Open("/dev/urandom", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var entropy int32
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(urandom), unix.RNDGETENTCNT, uintptr(unsafe.Pointer(&entropy)))
	_ = unix.Close(urandom)
	time.Sleep(20 * time.Millisecond) // well before the request's span starts

	runtime.LockOSThread()
	tid := unix.Gettid()
	spanStart := time.Now()
	fd, err := unix.Open("/dev/null", unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	params := make([]byte, 56) // NVOS02 with fd: status at 40
	binary.NativeEndian.PutUint32(params[40:], 0x51)
	const rmAllocMemory = 0xC0384627
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), rmAllocMemory, uintptr(unsafe.Pointer(&params[0])))
	_ = unix.Close(fd)
	spanEnd := time.Now()
	runtime.UnlockOSThread()

	reqID := golden.NewReqID(spanStart, rand.New(rand.NewPCG(1, 2)))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm-worker")
	rs.Resource().Attributes().PutStr("host.name", host)
	rs.Resource().Attributes().PutInt("process.pid", int64(os.Getpid()))
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("model/forward")
	span.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	span.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(spanStart.Add(-time.Millisecond)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(spanEnd.Add(time.Millisecond)))
	span.Attributes().PutStr(golden.ReqID, reqID)
	span.Attributes().PutStr("stage", "model/forward")
	span.Attributes().PutInt("thread.id", int64(tid))

	conn := col.dialOTLP()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}

	var event, slow plog.LogRecord
	found := func() bool {
		for _, ld := range sink.Logs() {
			forEachLog(ld, func(lr plog.LogRecord) {
				pid, _ := lr.Attributes().Get("process.pid")
				if pid.Int() != int64(os.Getpid()) {
					return
				}
				switch lr.EventName() {
				case "gpu.ioctl.failed":
					event = lr
				case "gpu.ioctl.slow":
					slow = lr
				}
			})
		}
		return event != (plog.LogRecord{}) && slow != (plog.LogRecord{})
	}
	if _, err := sink.WaitFor(ctx, 30*time.Second, time.Second, func(otlpsink.Counts) bool { return found() }); err != nil {
		t.Fatalf("no gpu.ioctl.failed and gpu.ioctl.slow record: %v\ncollector log:\n%s", err, col.log())
	}
	attrs := event.Attributes()
	for key, want := range map[string]string{
		"nvidia.ioctl.escape": "NV_ESC_RM_ALLOC_MEMORY",
		"nvidia.ioctl.status": "NV_ERR_NO_MEMORY",
		"nvidia.ioctl.errno":  "ENOTTY",
		golden.ReqID:          reqID,
	} {
		if got := strAttr(attrs, key); got != want {
			t.Errorf("%s = %q, want %q (record: %v)", key, got, want, attrs.AsRaw())
		}
	}
	if event.TraceID() != span.TraceID() || event.SpanID() != span.SpanID() {
		t.Errorf("trace context %s/%s, want the request span's %s/%s", event.TraceID(), event.SpanID(), span.TraceID(), span.SpanID())
	}
	if got := strAttr(attrs, golden.SamplingPolicy); got != "errors" {
		t.Errorf("the request was kept by policy %q, want errors (the failed driver call)", got)
	}
	if got := strAttr(slow.Attributes(), golden.SamplingPolicy); got != "gpu_events" {
		t.Errorf("the slow call outside any request was kept by policy %q, want gpu_events (record: %v)", got, slow.Attributes().AsRaw())
	}
	counts, err := sink.WaitFor(ctx, 10*time.Second, 500*time.Millisecond, func(c otlpsink.Counts) bool { return c.Spans >= 1 })
	if err != nil || counts.Spans != 1 {
		t.Errorf("%d spans came out (%v), want the request's one", counts.Spans, err)
	}
}
