package reqidstitchprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/golden"
)

func TestLateBinding(t *testing.T) {
	h := newHarness(t, nil)
	// Logs arrive before the spans that bind them.
	h.consumeLogs(logsOf(
		rec{service: "model", at: t0.Add(500 * time.Millisecond), name: "forward done", attrs: reqIDAttr(reqA)},
		rec{service: "auth", trace: traceID(1), span: spanID(5), at: t0, name: "token verified"},
		rec{service: "gateway", at: t0, name: "heartbeat ok"}, // no id at all: nothing to wait for
	))
	require.Len(t, h.outLogs(), 1, "only the record without ids passes at once")
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_records_held"))

	h.tick(100 * time.Millisecond)
	require.Len(t, h.outLogs(), 1, "still unbound: still held")

	h.consumeTraces(tracesOf(rootA, modelA))
	h.tick(100 * time.Millisecond)
	logs := h.outLogs()
	require.Len(t, logs, 3)
	assert.Equal(t, traceID(1), logs[1].TraceID())
	assert.Equal(t, reqA, str(logs[2].Attributes(), golden.ReqID))
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_hold_released", "outcome", "bound"))
}

func TestHoldExpiry(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rec{service: "auth", trace: traceID(3), span: spanID(3), parent: spanID(1), at: t0, end: t0}))
	h.consumeLogs(logsOf(rec{service: "x", at: t0, name: "orphan", attrs: reqIDAttr(reqB)}))
	assert.Empty(t, h.outSpans())

	h.tick(1999 * time.Millisecond)
	assert.Empty(t, h.outSpans())
	h.tick(time.Millisecond)
	spans, logs := h.outSpans(), h.outLogs()
	require.Len(t, spans, 1, "nothing is dropped")
	require.Len(t, logs, 1)
	assert.Equal(t, golden.TraceKey(traceID(3)), str(spans[0].Attributes(), golden.ReqID),
		"no record of its trace carried a req_id: its trace keys its request")
	assert.Equal(t, golden.ReqIDFromTrace, str(spans[0].Attributes(), golden.ReqIDFrom))
	assert.Equal(t, reqB, str(logs[0].Attributes(), golden.ReqID), "a record without trace context leaves as it was")
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_hold_released", "outcome", "expired"))
	assert.Equal(t, int64(1), h.counter("processor_reqidstitch_records_filled", "direction", "trace_key"))
	// It still got its event.id.
	assert.NotEmpty(t, str(spans[0].Attributes(), golden.EventID))
}

func TestHoldBounds(t *testing.T) {
	orphan := func(i int) rec {
		return rec{service: "x", trace: traceID(byte(10 + i)), at: t0, name: "orphan"}
	}
	h := newHarness(t, func(c *Config) { c.Hold.MaxRecords = 2 })
	h.consumeLogs(logsOf(orphan(0), orphan(1)))
	assert.Empty(t, h.outLogs())
	h.consumeLogs(logsOf(orphan(2)))
	logs := h.outLogs()
	require.Len(t, logs, 1, "the oldest was pushed out to make room")
	assert.Equal(t, traceID(10), logs[0].TraceID())
	assert.Equal(t, int64(1), h.counter("processor_reqidstitch_hold_released", "outcome", "overflow"))

	small := newHarness(t, func(c *Config) { c.Hold.MaxBytes = 10 })
	small.consumeLogs(logsOf(orphan(0)))
	refused := small.outLogs()
	require.Len(t, refused, 1, "a record larger than the hold passes at once")
	assert.Equal(t, traceID(10), refused[0].TraceID(), "as it was")
	assert.Equal(t, "orphan", refused[0].Body().Str())
	assert.Equal(t, int64(1), small.counter("processor_reqidstitch_hold_released", "outcome", "overflow"))

	off := newHarness(t, func(c *Config) { c.Hold.Duration = 0 })
	off.consumeLogs(logsOf(orphan(0)))
	require.Len(t, off.outLogs(), 1)
	assert.Zero(t, off.counter("processor_reqidstitch_records_held"))
}

func TestShutdownFlushesTheHold(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeLogs(logsOf(rec{service: "x", trace: traceID(1), at: t0, name: "waiting"}))
	h.consumeTraces(tracesOf(rec{service: "x", trace: traceID(2), span: spanID(2), parent: spanID(1), at: t0, end: t0}))
	h.shutdown()
	assert.Len(t, h.outLogs(), 1)
	assert.Len(t, h.outSpans(), 1)
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_hold_released", "outcome", "shutdown"))
}

func TestHoldQueue(t *testing.T) {
	q := newHoldQueue[int](HoldConfig{Duration: time.Second, MaxRecords: 3, MaxBytes: 100})
	var out []int
	pushOut := func(p parked[int]) { out = append(out, p.data) }
	push := func(v, size int) bool { return q.push(parked[int]{data: v, bytes: size}, 0, pushOut) }
	for i := range 3 {
		require.True(t, push(i, 30))
	}
	require.True(t, push(3, 30))
	assert.Equal(t, []int{0}, out, "count bound")
	require.True(t, push(4, 70))
	assert.Equal(t, []int{0, 1, 2}, out, "byte bound")
	assert.False(t, push(5, 101))
	assert.Equal(t, 2, q.len())
	assert.Equal(t, 100, q.bytes)

	q.sweep(func(p parked[int]) bool { return false })
	assert.Zero(t, q.len())
	assert.Zero(t, q.bytes)
}
