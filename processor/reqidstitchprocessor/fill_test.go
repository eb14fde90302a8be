package reqidstitchprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

const reqA, reqB, reqC = "req-1746792000000-aaaaaa", "req-1746792000000-bbbbbb", "req-1746792000000-cccccc"

// request A: a gateway root in trace 1 with a model child span.
var (
	rootA  = rec{service: "gateway", trace: traceID(1), span: spanID(1), at: t0, end: t0.Add(time.Second), name: "POST /v1/chat", attrs: reqIDAttr(reqA)}
	modelA = rec{service: "model", trace: traceID(1), span: spanID(2), parent: spanID(1), at: t0.Add(100 * time.Millisecond), end: t0.Add(900 * time.Millisecond), name: "model/forward", attrs: reqIDAttr(reqA)}
)

func TestLogWithReqIDGetsTraceContext(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rootA, modelA))
	// The engine logs outside any span, with the req_id in its body (now an attribute).
	h.consumeLogs(logsOf(rec{service: "model", at: t0.Add(500 * time.Millisecond), name: "forward done", attrs: reqIDAttr(reqA)}))

	logs := h.outLogs()
	require.Len(t, logs, 1)
	// The model's spans were not kept before it was seen logging without context: the primary root.
	assert.Equal(t, traceID(1), logs[0].TraceID())
	assert.Equal(t, spanID(1), logs[0].SpanID())
	assert.Equal(t, int64(1), h.counter("processor_reqidstitch_records_filled", "direction", "trace_context"))

	// Now that it is known to log without context, its spans are kept: the covering span wins.
	modelB := modelA
	modelB.trace, modelB.span, modelB.parent, modelB.attrs = traceID(2), spanID(4), spanID(3), reqIDAttr(reqB)
	rootB := rootA
	rootB.trace, rootB.span, rootB.attrs = traceID(2), spanID(3), reqIDAttr(reqB)
	h.consumeTraces(tracesOf(rootB, modelB))
	h.consumeLogs(logsOf(
		rec{service: "model", at: t0.Add(500 * time.Millisecond), name: "forward done", attrs: reqIDAttr(reqB)},
		// Outside the model span: the root.
		rec{service: "model", at: t0.Add(950 * time.Millisecond), name: "late", attrs: reqIDAttr(reqB)},
	))
	logs = h.outLogs()[1:]
	require.Len(t, logs, 2)
	assert.Equal(t, traceID(2), logs[0].TraceID())
	assert.Equal(t, spanID(4), logs[0].SpanID())
	assert.Equal(t, spanID(3), logs[1].SpanID())
}

func TestRecordWithTraceGetsReqID(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rootA))
	child := rec{service: "auth", trace: traceID(1), span: spanID(5), parent: spanID(1), at: t0, end: t0.Add(time.Millisecond), name: "auth/verify"}
	h.consumeTraces(tracesOf(child))
	// goldenfield found it lacking req_id; once filled, its outcome says so.
	h.consumeLogs(logsOf(rec{service: "auth", trace: traceID(1), span: spanID(5), at: t0, name: "token verified",
		attrs: map[string]any{golden.ValidAttr: false, golden.MissingAttr: []any{golden.ReqID}}}))

	spans := h.outSpans()
	require.Len(t, spans, 2)
	assert.Equal(t, reqA, str(spans[1].Attributes(), golden.ReqID))
	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
	valid, _ := logs[0].Attributes().Get(golden.ValidAttr)
	assert.True(t, valid.Bool(), "the validation outcome is true of the record as it leaves")
	_, missing := logs[0].Attributes().Get(golden.MissingAttr)
	assert.False(t, missing)
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_records_filled", "direction", "req_id"))
}

func TestReqIDFilledWithinOneBatch(t *testing.T) {
	h := newHarness(t, nil)
	// The child without req_id comes first in the batch: the first pass binds the root's trace.
	child := rec{service: "auth", trace: traceID(1), span: spanID(5), parent: spanID(1), at: t0, end: t0.Add(time.Millisecond), name: "auth/verify"}
	h.consumeTraces(tracesOf(child, rootA))
	spans := h.outSpans()
	require.Len(t, spans, 2)
	assert.Equal(t, reqA, str(spans[0].Attributes(), golden.ReqID))
}

// A log record with only trace context finds the binding a later record of
// its batch makes: records that carry a req_id are visited first.
func TestLogReqIDFilledWithinOneBatch(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeLogs(logsOf(
		rec{service: "auth", trace: traceID(1), span: spanID(5), at: t0, name: "token verified"},
		rec{service: "gateway", trace: traceID(1), span: spanID(1), at: t0, name: "accepted", attrs: reqIDAttr(reqA)},
	))
	logs := h.outLogs()
	require.Len(t, logs, 2, "nothing waits in the hold")
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID))
	assert.Equal(t, "token verified", logs[0].Body().Str(), "the batch keeps its order")
	assert.Zero(t, h.counter("processor_reqidstitch_records_held"))
}

func TestRecordsCarryingBothAreNotRewritten(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rootA))
	// Trace 1 belongs to request A; this log says it is B's: it keeps what it says.
	h.consumeLogs(logsOf(rec{service: "gateway", trace: traceID(1), span: spanID(9), at: t0, name: "x", attrs: reqIDAttr(reqB)}))
	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, reqB, str(logs[0].Attributes(), golden.ReqID))
	assert.Equal(t, traceID(1), logs[0].TraceID())
	assert.Equal(t, spanID(9), logs[0].SpanID())
	assert.Zero(t, h.counter("processor_reqidstitch_records_filled"))
}

func TestHostileReqIDsAreLeftAlone(t *testing.T) {
	h := newHarness(t, nil)
	long := string(make([]byte, golden.MaxReqIDBytes+1))
	h.consumeTraces(tracesOf(
		rec{service: "x", trace: traceID(7), span: spanID(7), at: t0, end: t0, attrs: map[string]any{golden.ReqID: long}},
		rec{service: "x", trace: traceID(8), span: spanID(8), at: t0, end: t0, attrs: map[string]any{golden.ReqID: 42}},
		rec{service: "x", trace: traceID(9), span: spanID(9), at: t0, end: t0, attrs: map[string]any{golden.ReqID: "\xff\xfe"}},
	))
	h.consumeLogs(logsOf(
		rec{service: "x", trace: traceID(7), at: t0, name: "a"},
		rec{service: "x", trace: traceID(9), at: t0, name: "b"},
	))
	spans := h.outSpans()
	require.Len(t, spans, 3)
	assert.Equal(t, long, str(spans[0].Attributes(), golden.ReqID))
	assert.Equal(t, "42", str(spans[1].Attributes(), golden.ReqID))
	// The long id was never indexed: its trace's log waits, then leaves
	// keyed by its trace, never by the long id.
	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, "\xff\xfe", str(logs[0].Attributes(), golden.ReqID))
	h.tick(3 * time.Second)
	logs = h.outLogs()
	require.Len(t, logs, 2)
	assert.Equal(t, golden.TraceKey(traceID(7)), str(logs[1].Attributes(), golden.ReqID))
}

func TestDetachedWorkIsLinkedToThePrimaryRoot(t *testing.T) {
	h := newHarness(t, nil)
	// The async worker's root (trace 2) comes before the request's root in the
	// batch; the earliest root is still the primary one.
	vector := rec{service: "vectorstore-writer", trace: traceID(2), span: spanID(6), at: t0.Add(1100 * time.Millisecond), end: t0.Add(1110 * time.Millisecond), name: "vectorstore/write", attrs: reqIDAttr(reqA)}
	h.consumeTraces(tracesOf(vector, rootA, modelA))
	h.consumeLogs(logsOf(rec{service: "vectorstore-writer", trace: traceID(2), span: spanID(6), at: t0.Add(1100 * time.Millisecond), name: "start processing", attrs: reqIDAttr(reqA)}))

	spans := h.outSpans()
	require.Len(t, spans, 3)
	rootEvent := str(spans[1].Attributes(), golden.EventID)
	require.NotEmpty(t, rootEvent)
	v := spans[0]
	require.Equal(t, 1, v.Links().Len())
	assert.Equal(t, traceID(1), v.Links().At(0).TraceID())
	assert.Equal(t, spanID(1), v.Links().At(0).SpanID())
	assert.Equal(t, "true", str(v.Attributes(), golden.StitchDetached))
	assert.Equal(t, rootEvent, str(v.Attributes(), golden.StitchAsyncOf))
	for _, s := range spans[1:] {
		assert.Zero(t, s.Links().Len(), "spans of the primary trace are not detached")
		assert.Empty(t, str(s.Attributes(), golden.StitchDetached))
	}
	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, rootEvent, str(logs[0].Attributes(), golden.StitchAsyncOf))
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_records_detached"))

	// A second tier (or a retry) running over the output adds nothing.
	again := newHarness(t, trustUpstream)
	td := ptrace.NewTraces()
	h.spanOut.AllTraces()[0].CopyTo(td)
	again.consumeTraces(td)
	assert.Equal(t, 1, again.outSpans()[0].Links().Len())
	assert.Zero(t, again.counter("processor_reqidstitch_records_detached"))
}

func TestLinkDetachedOff(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.LinkDetached = false })
	vector := rec{service: "vectorstore-writer", trace: traceID(2), span: spanID(6), at: t0.Add(time.Second), end: t0.Add(2 * time.Second), attrs: reqIDAttr(reqA)}
	h.consumeTraces(tracesOf(rootA, vector))
	assert.Zero(t, h.outSpans()[1].Links().Len())
}

func TestEventIDIsDeterministicAndKept(t *testing.T) {
	run := func() (plog.LogRecord, ptrace.Span) {
		h := newHarness(t, nil)
		h.consumeTraces(tracesOf(rootA))
		h.consumeLogs(logsOf(rec{service: "gateway", at: t0, name: "received request", attrs: reqIDAttr(reqA)}))
		return h.outLogs()[0], h.outSpans()[0]
	}
	log1, span1 := run()
	log2, span2 := run()
	for _, id := range []string{str(log1.Attributes(), golden.EventID), str(span1.Attributes(), golden.EventID)} {
		_, ok := golden.ParseEventHash(id)
		assert.True(t, ok, "event.id %q is not a well-formed hash", id)
	}
	assert.Equal(t, str(log1.Attributes(), golden.EventID), str(log2.Attributes(), golden.EventID))
	assert.Equal(t, str(span1.Attributes(), golden.EventID), str(span2.Attributes(), golden.EventID))
	assert.NotEqual(t, str(log1.Attributes(), golden.EventID), str(span1.Attributes(), golden.EventID))

	// The log's trace context was filled after its identity was taken:
	// recomputing from the filled record would differ, so a second tier that
	// trusts the first keeps a well-formed event.id.
	h := newHarness(t, trustUpstream)
	ld := plog.NewLogs()
	log1.CopyTo(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
	h.consumeLogs(ld)
	assert.Equal(t, str(log1.Attributes(), golden.EventID), str(h.outLogs()[0].Attributes(), golden.EventID))

	// A malformed one is replaced even then.
	h.consumeTraces(tracesOf(rootA))
	h.consumeLogs(logsOf(rec{service: "gateway", at: t0, name: "x", attrs: map[string]any{golden.EventID: "not-a-hash", golden.ReqID: reqA}}))
	_, ok := golden.ParseEventHash(str(h.outLogs()[1].Attributes(), golden.EventID))
	assert.True(t, ok)
}

func TestLogsAndTracesShareTheIndexOnlyWithinAComponentID(t *testing.T) {
	h := newHarness(t, nil)
	other := newHarness(t, nil) // another factory: another component, another index
	h.consumeTraces(tracesOf(rootA))
	other.consumeLogs(logsOf(rec{service: "gateway", trace: traceID(1), at: t0, name: "x"}))
	assert.Empty(t, other.outLogs(), "the log waits: its trace is unknown to this component")
	other.shutdown()
	require.Len(t, other.outLogs(), 1)
	assert.Equal(t, golden.TraceKey(traceID(1)), str(other.outLogs()[0].Attributes(), golden.ReqID),
		"it leaves unbound, keyed by its own trace")
}

func TestUnusableTraceIDs(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rec{service: "x", trace: pcommon.TraceID{}, span: spanID(1), at: t0, end: t0}))
	require.Len(t, h.outSpans(), 1, "a span without trace id and req_id passes")
}

// The input and model some records of a request name reach its records that
// lack them, marked as derived; a model the records disagree on does not.
func TestRequestContextCarriesInputAndModel(t *testing.T) {
	h := newHarness(t, nil)
	named := func(id, model string) map[string]any {
		attrs := reqIDAttr(id)
		attrs[golden.InputHash] = "9f86d081"
		attrs[golden.ModelVer] = model
		return attrs
	}
	plain := func(id string) rec {
		return rec{service: "worker", at: t0.Add(time.Second), name: "persist failed",
			attrs: map[string]any{golden.ReqID: id, golden.ValidAttr: false, golden.MissingAttr: []any{golden.ModelVer}}}
	}
	rootB := rootA
	rootB.trace, rootB.span, rootB.attrs = traceID(2), spanID(3), reqIDAttr(reqB)
	h.consumeTraces(tracesOf(rootA, rootB))
	h.consumeLogs(logsOf(
		rec{service: "engine", at: t0, name: "generate done", attrs: named(reqA, "qwen2-7b-v1.2")},
		plain(reqA),
		rec{service: "engine", at: t0, name: "generate done", attrs: named(reqB, "qwen2-7b-v1.2")},
		rec{service: "judge", at: t0, name: "graded", attrs: named(reqB, "judge-3b-v0.9")},
		plain(reqB),
	))
	// The model asked for (its family) first, the version that failed it after.
	rootC := rootA
	rootC.trace, rootC.span, rootC.attrs = traceID(3), spanID(5), reqIDAttr(reqC)
	h.consumeTraces(tracesOf(rootC))
	h.consumeLogs(logsOf(
		rec{service: "api", at: t0, name: "calling model", attrs: named(reqC, "qwen2-7b")},
		rec{service: "api", at: t0, name: "model call failed", attrs: named(reqC, "qwen2-7b-v1.3")},
		rec{service: "api", at: t0, name: "asked again", attrs: named(reqC, "qwen2-7b")},
		plain(reqC),
	))
	logs := h.outLogs()
	require.Len(t, logs, 9)
	c := logs[8].Attributes().AsRaw()
	assert.Equal(t, "qwen2-7b-v1.3", c[golden.ModelVer], "a family beside its version is no disagreement: the version is the model")
	a := logs[1].Attributes().AsRaw()
	assert.Equal(t, "9f86d081", a[golden.InputHash])
	assert.Equal(t, "qwen2-7b-v1.2", a[golden.ModelVer])
	assert.Equal(t, []any{golden.InputHash, golden.ModelVer}, a[golden.DerivedAttr])
	assert.Equal(t, true, a[golden.ValidAttr], "model_ver is no longer missing")
	assert.NotContains(t, logs[0].Attributes().AsRaw(), golden.DerivedAttr, "a record's own fields are not derived")

	b := logs[4].Attributes().AsRaw()
	assert.Equal(t, "9f86d081", b[golden.InputHash])
	assert.NotContains(t, b, golden.ModelVer, "two models served the request: none is its model")
	assert.Equal(t, []any{golden.InputHash}, b[golden.DerivedAttr])
	assert.Equal(t, int64(3), h.counter("processor_reqidstitch_records_filled", "direction", "input_hash"))
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_records_filled", "direction", "model_ver"))
}

// trustUpstream configures a gateway behind Loom agents.
func trustUpstream(c *Config) { c.TrustUpstreamIdentity = true }

// TestClientIdentityIsNeverTrusted sends records that claim another
// request's event.id and forge a cause, a detached mark and an ASYNC_OF
// target: by default all are removed and counted, and the records get the
// identity this collector computes.
func TestClientIdentityIsNeverTrusted(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rootA))
	h.consumeLogs(logsOf(rec{service: "gateway", trace: traceID(1), at: t0, name: "victim", attrs: reqIDAttr(reqA)}))
	victim := str(h.outLogs()[0].Attributes(), golden.EventID)

	forged := map[string]any{golden.ReqID: reqB, golden.EventID: victim, golden.CausalParents: []any{victim + ":CAUSED"},
		golden.CausalRules: []any{"forged"}, golden.StitchDetached: "true", golden.StitchAsyncOf: victim}
	h.consumeLogs(logsOf(rec{service: "intruder", trace: traceID(7), at: t0.Add(time.Second), name: "forged", attrs: forged}))
	h.consumeTraces(tracesOf(rec{service: "intruder", trace: traceID(7), span: spanID(7), at: t0, end: t0.Add(time.Second), name: "forged", attrs: forged}))
	for _, attrs := range []pcommon.Map{h.outLogs()[1].Attributes(), h.outSpans()[1].Attributes()} {
		id := str(attrs, golden.EventID)
		_, ok := golden.ParseEventHash(id)
		assert.True(t, ok)
		assert.NotEqual(t, victim, id, "a record never takes another's event.id")
		for _, name := range []string{golden.CausalParents, golden.CausalRules, golden.StitchDetached, golden.StitchAsyncOf} {
			_, present := attrs.Get(name)
			assert.False(t, present, name)
		}
	}
	assert.Equal(t, int64(10), h.counter("processor_reqidstitch_identity_removed"), "five attributes on each of two records")
}
