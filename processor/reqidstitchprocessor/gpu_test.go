package reqidstitchprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/golden"
)

const enginePID = 4242

// engineSpan is a model/forward span of request id on gpu-node-0's engine, thread tid.
func engineSpan(id string, trace, span byte, tid int64, from, to time.Duration) rec {
	attrs := reqIDAttr(id)
	if tid != 0 {
		attrs[string(semconv.ThreadIDKey)] = tid
	}
	return rec{service: "model", host: "gpu-node-0", pid: enginePID, trace: traceID(trace), span: spanID(span), parent: spanID(1),
		at: t0.Add(from), end: t0.Add(to), name: "model/forward", attrs: attrs}
}

// gpuEvent is a driver event of the gpu receiver about pid on gpu-node-0.
func gpuEvent(pid, tid int64, at time.Duration) rec {
	attrs := map[string]any{string(semconv.ProcessPIDKey): pid, "nv.escape": "RM_ALLOC", "nv.status": "NO_MEMORY"}
	if tid != 0 {
		attrs[string(semconv.ThreadIDKey)] = tid
	}
	return rec{service: "loom-gpu", host: "gpu-node-0", scope: golden.GPUEventScope, at: t0.Add(at), name: "ioctl", attrs: attrs}
}

func TestGPUEventsAreAttributedByHostPidThreadAndTime(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(
		engineSpan(reqA, 1, 10, 7, 0, time.Second),
		engineSpan(reqB, 2, 20, 8, 100*time.Millisecond, 900*time.Millisecond),
	))
	h.consumeLogs(logsOf(
		gpuEvent(enginePID, 7, 500*time.Millisecond), // A's thread
		gpuEvent(enginePID, 8, 500*time.Millisecond), // B's thread
	))
	logs := h.outLogs()
	require.Len(t, logs, 2)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
	assert.Equal(t, traceID(1), logs[0].TraceID())
	assert.Equal(t, spanID(10), logs[0].SpanID())
	assert.Equal(t, reqB, str(logs[1].Attributes(), golden.ReqID))
	assert.Equal(t, spanID(20), logs[1].SpanID())
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_records_filled", "direction", "gpu"))
}

// TestGPUEventsOfContainersMeetTheirOwnSpans: two engines in containers on
// one node are both pid 1 and thread 1 to themselves, which their spans
// report; the gpu receiver sees host pids and names the container and the
// namespaced pids beside them.
func TestGPUEventsOfContainersMeetTheirOwnSpans(t *testing.T) {
	const containerA, containerB = "aaaa", "bbbb"
	inContainer := func(r rec, container string) rec {
		r.pid, r.container = 1, container
		return r
	}
	containerEvent := func(hostPID, hostTID int64, container string) rec {
		e := gpuEvent(hostPID, hostTID, 500*time.Millisecond)
		e.attrs[string(semconv.ProcessVpidKey)] = int64(1)
		e.attrs[golden.ThreadVID] = int64(1)
		e.attrs[string(semconv.ContainerIDKey)] = container
		return e
	}
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(
		inContainer(engineSpan(reqA, 1, 10, 1, 0, time.Second), containerA),
		inContainer(engineSpan(reqB, 2, 20, 1, 0, time.Second), containerB),
	))
	h.consumeLogs(logsOf(containerEvent(9001, 9001, containerA), containerEvent(9002, 9002, containerB)))
	logs := h.outLogs()
	require.Len(t, logs, 2)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
	assert.Equal(t, reqB, str(logs[1].Attributes(), golden.ReqID))

	// Spans that name no container are found by host and pid alone.
	h = newHarness(t, nil)
	noContainer := engineSpan(reqA, 1, 10, 1, 0, time.Second)
	noContainer.pid = 1
	h.consumeTraces(tracesOf(noContainer))
	h.consumeLogs(logsOf(containerEvent(9001, 9001, containerA)))
	logs = h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
}

func TestGPUEventCoveredByTwoRequestsIsNeverGuessed(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(
		engineSpan(reqA, 1, 10, 0, 0, time.Second),
		engineSpan(reqB, 2, 20, 0, 100*time.Millisecond, 900*time.Millisecond),
	))
	h.consumeLogs(logsOf(
		gpuEvent(enginePID, 0, 500*time.Millisecond),  // both cover it: it waits for a span on its thread
		gpuEvent(enginePID, 0, 950*time.Millisecond),  // only A covers it
		gpuEvent(enginePID, 9, 50*time.Millisecond),   // the spans name no thread: A
		gpuEvent(enginePID+1, 0, 50*time.Millisecond), // another process: waits
	))
	logs := h.outLogs()
	require.Len(t, logs, 2)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
	assert.Equal(t, reqA, str(logs[1].Attributes(), golden.ReqID))
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_records_held"))

	h.tick(10 * time.Second) // gpu_attribution::wait
	logs = h.outLogs()
	require.Len(t, logs, 4)
	assert.Empty(t, str(logs[2].Attributes(), golden.ReqID), "never a guess")
	assert.Empty(t, str(logs[3].Attributes(), golden.ReqID))
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_hold_released", "outcome", "expired"))
}

func TestGPUEventWaitsForItsSpan(t *testing.T) {
	h := newHarness(t, nil)
	// Spans of the same process that name no thread, or another thread, are not the event's.
	h.consumeTraces(tracesOf(engineSpan(reqB, 2, 20, 0, 0, time.Second), engineSpan(reqB, 2, 21, 8, 0, time.Second)))
	// A span is exported when it ends: the driver events of its request come first.
	h.consumeLogs(logsOf(gpuEvent(enginePID, 7, 500*time.Millisecond), gpuEvent(enginePID, 3, 500*time.Millisecond)))
	assert.Empty(t, h.outLogs())
	h.consumeTraces(tracesOf(engineSpan(reqA, 1, 10, 7, 0, time.Second)))
	h.tick(100 * time.Millisecond)
	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
	h.tick(2 * time.Second)
	require.Len(t, h.outLogs(), 1, "a GPU event waits longer than hold::duration")
	h.tick(8 * time.Second)
	logs = h.outLogs()
	require.Len(t, logs, 2, "another thread's event is never attributed to A: it expires as it was")
	assert.Empty(t, str(logs[1].Attributes(), golden.ReqID))
}

func TestOnlyGPUEventsAreAttributed(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(engineSpan(reqA, 1, 10, 0, 0, time.Second)))
	noise := gpuEvent(enginePID, 0, 500*time.Millisecond)
	noise.scope = "engine.scheduler" // the engine's own chatter, same host and pid
	h.consumeLogs(logsOf(noise))
	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Empty(t, str(logs[0].Attributes(), golden.ReqID))

	off := newHarness(t, func(c *Config) { c.GPUAttribution.Enabled = false })
	off.consumeTraces(tracesOf(engineSpan(reqA, 1, 10, 0, 0, time.Second)))
	off.consumeLogs(logsOf(gpuEvent(enginePID, 0, 500*time.Millisecond)))
	require.Len(t, off.outLogs(), 1)
	assert.Empty(t, str(off.outLogs()[0].Attributes(), golden.ReqID))
}

// An SDK exports a span once it ended and its batch is due (5s by default),
// all of a busy engine's spans of those seconds in one batch: the driver
// event waits for them, and its span is found however many came with it.
func TestGPUEventFindsItsSpanInALateBigBatch(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeLogs(logsOf(gpuEvent(enginePID, 7, 500*time.Millisecond)))
	h.tick(6 * time.Second)
	require.Empty(t, h.outLogs())
	spans := []rec{engineSpan(reqA, 1, 10, 7, 0, time.Second)}
	for i := range 2000 {
		from := time.Second + time.Duration(i)*2*time.Millisecond
		spans = append(spans, engineSpan(reqB, 2, byte(20+i%200), 7, from, from+time.Millisecond))
	}
	h.consumeTraces(tracesOf(spans...))
	h.tick(100 * time.Millisecond)
	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
	assert.Equal(t, spanID(10), logs[0].SpanID())
	assert.Zero(t, h.counter("processor_reqidstitch_evicted", "table", "gpu_spans"))
}

func TestGPUIndexBounds(t *testing.T) {
	var c tally
	g := newGPUIndex(2, 3, time.Hour)
	for pid := range int64(3) {
		g.observe(procKey{host: "h", pid: pid + 1}, gpuSpan{start: 0, end: 10, reqID: reqA}, &c)
	}
	assert.Len(t, g.procs, 2)
	assert.Equal(t, int64(1), c.evicted[tableGPUProcesses][evictCapacity])
	_, out := g.attribute(procKey{host: "h", pid: 1}, 0, 5)
	assert.Equal(t, uncovered, out, "the first process was evicted")

	k := procKey{host: "h", pid: 3}
	for i := range 5 {
		g.observe(k, gpuSpan{start: pcommon.Timestamp(100 * i), end: pcommon.Timestamp(100*i + 50), reqID: reqB}, &c)
	}
	assert.Len(t, g.procs[k].spans[g.procs[k].first:], 3)
	assert.Equal(t, int64(3), c.evicted[tableGPUSpans][evictCapacity], "its first span and two of these")
	_, out = g.attribute(k, 0, 120)
	assert.Equal(t, uncovered, out, "the oldest spans leave first")
	s, out := g.attribute(k, 0, 420)
	assert.Equal(t, attributed, out)
	assert.Equal(t, reqB, s.reqID)
}

// A span leaves once its process has a span that ended a window after it,
// uncounted: nothing waits for it any more.
func TestGPUSpansLeaveAWindowAfterTheyEnded(t *testing.T) {
	var c tally
	g := newGPUIndex(1, 100, 10*time.Second)
	k := procKey{host: "h", pid: 1}
	at := func(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t0.Add(d)) }
	g.observe(k, gpuSpan{start: at(0), end: at(time.Second), reqID: reqA}, &c)
	g.observe(k, gpuSpan{start: at(5 * time.Second), end: at(11 * time.Second), reqID: reqB}, &c)
	_, out := g.attribute(k, 0, at(500*time.Millisecond))
	assert.Equal(t, attributed, out, "10s after its end, the first span is still there")
	for i := range 40 {
		g.observe(k, gpuSpan{start: at(12 * time.Second), end: at(12*time.Second + time.Duration(i)*time.Millisecond), reqID: reqC}, &c)
	}
	_, out = g.attribute(k, 0, at(500*time.Millisecond))
	assert.Equal(t, uncovered, out)
	s, out := g.attribute(k, 0, at(6*time.Second))
	assert.Equal(t, attributed, out)
	assert.Equal(t, reqB, s.reqID)
	assert.Len(t, g.procs[k].spans[g.procs[k].first:], 41)
	assert.LessOrEqual(t, len(g.procs[k].spans), 2*41, "the spans that left do not pile up")
	assert.Zero(t, c.evicted[tableGPUSpans][evictCapacity])
}

func TestGPUPrefersTheInnermostSpanOfARequest(t *testing.T) {
	var c tally
	g := newGPUIndex(1, 8, time.Hour)
	k := procKey{host: "h", pid: 1}
	g.observe(k, gpuSpan{start: 0, end: 100, reqID: reqA, span: spanID(1)}, &c)
	g.observe(k, gpuSpan{start: 40, end: 60, reqID: reqA, span: spanID(2)}, &c)
	s, out := g.attribute(k, 0, 50)
	assert.Equal(t, attributed, out)
	assert.Equal(t, spanID(2), s.span)
}
