package reqidstitchprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

// otelSpan is a root span of a service that writes no req_id, in trace n.
func otelSpan(service string, n int) rec {
	tr := pcommon.TraceID{0xa0, byte(n >> 8), byte(n), 1}
	return rec{service: service, trace: tr, span: pcommon.SpanID{0xa0, byte(n >> 8), byte(n)}, at: t0, end: t0.Add(time.Millisecond), name: "GET /orders"}
}

// learnUnbound sends unboundInARow spans of service, each of a trace no
// record with a req_id binds, and lets them expire.
func learnUnbound(h *harness, service string) {
	for n := range unboundInARow {
		h.consumeTraces(tracesOf(otelSpan(service, n)))
	}
	h.tick(3 * time.Second)
}

func TestAServiceWithoutReqIDIsKeyedByTrace(t *testing.T) {
	h := newHarness(t, nil)
	learnUnbound(h, "orders")
	spans := h.outSpans()
	require.Len(t, spans, unboundInARow, "every record leaves, after the hold")
	for i, span := range spans {
		assert.Equal(t, golden.TraceKey(span.TraceID()), str(span.Attributes(), golden.ReqID), "span %d", i)
		assert.Equal(t, golden.ReqIDFromTrace, str(span.Attributes(), golden.ReqIDFrom))
	}
	held := h.counter("processor_reqidstitch_records_held")

	// Learned: its records no longer wait, but one in probeEvery does.
	first := unboundInARow + 100
	for n := first; n < first+4*probeEvery; n++ {
		h.consumeTraces(tracesOf(otelSpan("orders", n)))
	}
	assert.Equal(t, int64(4), h.counter("processor_reqidstitch_records_held")-held, "one in probeEvery waits")
	require.Len(t, h.outSpans(), unboundInARow+4*probeEvery-4)

	// A log of a trace keys its request; its trace's span joins it.
	next := otelSpan("orders", first+4*probeEvery)
	h.consumeLogs(logsOf(rec{service: "orders", trace: next.trace, span: next.span, at: t0, name: "looking up order"}))
	h.consumeTraces(tracesOf(next))
	logs, spans := h.outLogs(), h.outSpans()
	require.Len(t, logs, 1)
	key := str(logs[0].Attributes(), golden.ReqID)
	assert.Equal(t, golden.TraceKey(next.trace), key)
	assert.Equal(t, key, str(spans[len(spans)-1].Attributes(), golden.ReqID))
	assert.Equal(t, golden.ReqIDFromTrace, str(spans[len(spans)-1].Attributes(), golden.ReqIDFrom))
	assert.Equal(t, int64(unboundInARow+4*probeEvery-4+2), h.counter("processor_reqidstitch_records_filled", "direction", "trace_key"))

	// Another service has learned nothing: its records still wait.
	before := len(h.outSpans())
	h.consumeTraces(tracesOf(otelSpan("payments", 9999)))
	assert.Len(t, h.outSpans(), before)
}

func TestAProbeThatIsBoundMakesTheServiceWaitAgain(t *testing.T) {
	h := newHarness(t, nil)
	learnUnbound(h, "orders")
	// A deploy: the gateway now writes req_id. The service's probe waits
	// and is bound by the gateway's span of its trace.
	var probe rec
	for n := 1000; ; n++ {
		probe = otelSpan("orders", n)
		probe.parent = spanID(1)
		before := len(h.outSpans())
		h.consumeTraces(tracesOf(probe))
		if len(h.outSpans()) == before {
			break
		}
	}
	h.consumeTraces(tracesOf(rec{service: "gateway", trace: probe.trace, span: spanID(1), at: t0, end: t0.Add(time.Second), attrs: reqIDAttr(reqA)}))
	h.tick(100 * time.Millisecond)
	spans := h.outSpans()
	assert.Equal(t, reqA, str(spans[len(spans)-1].Attributes(), golden.ReqID))

	// So the next record of the service waits for its binding too.
	late := otelSpan("orders", 5000)
	h.consumeTraces(tracesOf(late))
	assert.Len(t, h.outSpans(), len(spans), "it waits")
	h.consumeTraces(tracesOf(rec{service: "gateway", trace: late.trace, span: spanID(7), at: t0, end: t0.Add(time.Second), attrs: reqIDAttr(reqB)}))
	h.tick(100 * time.Millisecond)
	spans = h.outSpans()
	assert.Equal(t, reqB, str(spans[len(spans)-1].Attributes(), golden.ReqID), "bound, not keyed by its trace")
}

// linkedTo is a span of trace 9 (detached work) that links to the span of trace.
func linkedTo(trace pcommon.TraceID, span pcommon.SpanID) ptrace.Traces {
	return detached(rec{service: "indexer", trace: traceID(9), span: spanID(9), at: t0.Add(2 * time.Second), end: t0.Add(3 * time.Second), name: "embed"}, trace, span)
}

// detached is the span of r, linking to the span of trace.
func detached(r rec, trace pcommon.TraceID, span pcommon.SpanID) ptrace.Traces {
	td := tracesOf(r)
	link := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Links().AppendEmpty()
	link.SetTraceID(trace)
	link.SetSpanID(span)
	return td
}

func TestDetachedWorkJoinsItsRequestThroughItsLink(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rootA))
	h.consumeTraces(linkedTo(traceID(1), spanID(1)))
	spans := h.outSpans()
	require.Len(t, spans, 2, "bound at once through its link: it never waits")
	detached := spans[1]
	assert.Equal(t, reqA, str(detached.Attributes(), golden.ReqID))
	assert.Empty(t, str(detached.Attributes(), golden.ReqIDFrom))
	assert.Equal(t, true, detached.Attributes().AsRaw()[golden.StitchDetached])
	assert.Equal(t, 1, detached.Links().Len(), "the link it came with is the one to its primary root")

	// Its trace is now bound: a log of the detached work follows.
	h.consumeLogs(logsOf(rec{service: "indexer", trace: traceID(9), span: spanID(9), at: t0.Add(2 * time.Second), name: "embedded 3 chunks"}))
	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
}

func TestDetachedWorkJoinsARequestKeyedByTrace(t *testing.T) {
	h := newHarness(t, nil)
	learnUnbound(h, "orders")
	var root rec
	for n := 2000; ; n++ { // not a probe
		root = otelSpan("orders", n)
		before := len(h.outSpans())
		h.consumeTraces(tracesOf(root))
		if len(h.outSpans()) > before {
			break
		}
	}
	h.consumeTraces(linkedTo(root.trace, root.span))
	spans := h.outSpans()
	detached := spans[len(spans)-1]
	assert.Equal(t, traceID(9), detached.TraceID())
	assert.Equal(t, golden.TraceKey(root.trace), str(detached.Attributes(), golden.ReqID), "the request its link names, keyed by that trace")
	assert.Equal(t, golden.ReqIDFromTrace, str(detached.Attributes(), golden.ReqIDFrom))
	assert.Equal(t, true, detached.Attributes().AsRaw()[golden.StitchDetached])
}

func TestAClientCannotClaimItsReqIDWasMadeFromATrace(t *testing.T) {
	h := newHarness(t, nil)
	claimed := rootA
	claimed.attrs = map[string]any{golden.ReqID: reqA, golden.ReqIDFrom: golden.ReqIDFromTrace}
	h.consumeTraces(tracesOf(claimed))
	require.Len(t, h.outSpans(), 1)
	assert.Empty(t, str(h.outSpans()[0].Attributes(), golden.ReqIDFrom))
}

// Without a hold nothing waits: an unbound record is keyed by its trace at
// once, and a span that links to a trace its own batch keys joins it,
// wherever it sits in the batch.
func TestWithoutAHoldARecordIsKeyedByItsTraceAtOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Hold.Duration = 0 })
	root := otelSpan("orders", 1)
	td := linkedTo(root.trace, root.span)
	tracesOf(root).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	h.consumeTraces(td)
	spans := h.outSpans()
	require.Len(t, spans, 2)
	for _, span := range spans {
		assert.Equal(t, golden.TraceKey(root.trace), str(span.Attributes(), golden.ReqID), span.Name())
		assert.Equal(t, golden.ReqIDFromTrace, str(span.Attributes(), golden.ReqIDFrom))
	}
	assert.Equal(t, true, spans[0].Attributes().AsRaw()[golden.StitchDetached], "the linked span, first in its batch, is detached work")

	// Work detached from detached work, the last first in its batch.
	root = otelSpan("orders", 2)
	first := detached(rec{service: "indexer", trace: traceID(11), span: spanID(11), name: "embed"}, root.trace, root.span)
	second := detached(rec{service: "notifier", trace: traceID(12), span: spanID(12), name: "notify"}, traceID(11), spanID(11))
	first.ResourceSpans().MoveAndAppendTo(second.ResourceSpans())
	tracesOf(root).ResourceSpans().MoveAndAppendTo(second.ResourceSpans())
	h.consumeTraces(second)
	spans = h.outSpans()[2:]
	require.Len(t, spans, 3)
	for _, span := range spans {
		assert.Equal(t, golden.TraceKey(root.trace), str(span.Attributes(), golden.ReqID), span.Name())
	}
}

// A record bound only to a request keyed by its trace waited in vain: its
// service learns to key by trace as well, though another service's records
// bound it.
func TestWaitingForATraceKeyIsWaitingInVain(t *testing.T) {
	h := newHarness(t, nil)
	learnUnbound(h, "front")
	for n := 1000; n < 1000+unboundInARow+unboundInARow/probeEvery+1; n++ { // a probe of front waits too
		back := otelSpan("back", n)
		back.parent, back.span = back.span, pcommon.SpanID{0xb0, byte(n >> 8), byte(n)}
		h.consumeTraces(tracesOf(back)) // waits: its service has learned nothing
		h.consumeTraces(tracesOf(otelSpan("front", n)))
	}
	h.tick(100 * time.Millisecond)
	assert.Positive(t, h.counter("processor_reqidstitch_hold_released", "outcome", "bound"))
	held := h.counter("processor_reqidstitch_records_held")
	h.consumeTraces(tracesOf(otelSpan("back", 9000)))
	assert.Equal(t, held, h.counter("processor_reqidstitch_records_held"), "keyed at once: not held")
}

// A detached worker's lines reach the collector before the span that links
// its trace to the request: they wait, its span's link binds them to the
// request, and its service keeps waiting, for that is not in vain.
func TestDetachedWorkKeepsWaitingForItsLink(t *testing.T) {
	h := newHarness(t, nil)
	learnUnbound(h, "orders")
	for n := 3000; n < 3000+2*unboundInARow; n++ {
		root := otelSpan("orders", n)
		worker := rec{service: "indexer", trace: pcommon.TraceID{0xd0, byte(n >> 8), byte(n), 1}, span: pcommon.SpanID{0xd0, byte(n >> 8), byte(n)}}
		h.consumeTraces(tracesOf(root))
		h.consumeLogs(logsOf(rec{service: "indexer", trace: worker.trace, span: worker.span, at: t0, name: "embedding"}))
		h.consumeTraces(detached(worker, root.trace, root.span))
		h.tick(100 * time.Millisecond)
	}
	h.tick(3 * time.Second)
	logs := h.outLogs()
	require.Len(t, logs, 2*unboundInARow)
	joined := 0
	for _, lr := range logs {
		if str(lr.Attributes(), golden.ReqID) != golden.TraceKey(lr.TraceID()) {
			joined++
		}
	}
	assert.Equal(t, len(logs), joined, "every line joined the request its worker's span links to")

	held := h.counter("processor_reqidstitch_records_held")
	h.consumeLogs(logsOf(rec{service: "indexer", trace: traceID(77), span: spanID(77), at: t0, name: "embedding"}))
	assert.Equal(t, held+1, h.counter("processor_reqidstitch_records_held"), "the worker's lines still wait")
}
