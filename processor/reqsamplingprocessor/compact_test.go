package reqsamplingprocessor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

// Records that wait for their decision pin a fraction of the heap when
// they wait encoded, and the kept ones come out as they went in.
func TestWaitingRecordsAreHeldEncoded(t *testing.T) {
	const batches, perBatch = 100, 100
	waitingHeap := func(compact bool) int {
		cfg := defaultConfig()
		cfg.CompactWaiting = compact
		cfg.BasePercentage = 100
		h := newHarness(t, cfg)
		before := heapInUse()
		for b := range batches {
			recs := make([]rec, perBatch)
			for i := range recs {
				n := b*perBatch + i
				recs[i] = rec{reqID: fmt.Sprintf("req-%06d", n/4), traceID: byte(n), stage: "model/forward", attrs: map[string]any{
					"gen_ai.request.model": "llama3-8b", "duration_ms": int64(n), "tenant": "acme", "route": "/v1/chat/completions",
					"tokens.in": int64(523), "tokens.out": int64(87), "cache.hit": n%3 == 0, "queue.depth": 3.5,
				}}
			}
			h.send(ptrace.NewTraces(), logsOf(recs...))
		}
		h.tick()
		held := heapInUse() - before
		h.wait(cfg.DecisionWait)

		o := h.out()
		require.Len(t, o.logs, batches*perBatch/4)
		first := o.logs["req-000001"]
		require.Len(t, first, 4)
		for i, attrs := range first {
			d, _ := attrs.Get("duration_ms")
			assert.EqualValues(t, 4+i, d.Int(), "records keep their order and values")
			hit, _ := attrs.Get("cache.hit")
			assert.Equal(t, (4+i)%3 == 0, hit.Bool())
			policy, _ := attrs.Get(golden.SamplingPolicy)
			assert.NotEmpty(t, policy.Str(), "kept records are annotated")
		}
		return held
	}
	decoded := waitingHeap(false)
	encoded := waitingHeap(true)
	t.Logf("heap pinned by %d waiting records: %d KiB decoded, %d KiB encoded", batches*perBatch, decoded>>10, encoded>>10)
	assert.Less(t, 3*encoded, decoded, "waiting encoded pins less than a third of the heap")
}

// Filtering encoded records keeps exactly what filtering decoded ones keeps,
// in the same order, scopes and resources left out alike; the records of a
// batch stay intact when the next batch reuses the filter's buffers.
func TestEncodedFilterMatchesDecodedFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var previous plog.Logs
	var previousWant []byte
	for round := range 200 {
		ld := randomLogs(rng)
		td := randomTraces(rng)
		keep := make([]bool, max(ld.LogRecordCount(), td.SpanCount()))
		for i := range keep {
			keep[i] = rng.IntN(4) == 0
		}
		keepIdx := func(i int, _ pcommon.Map) bool { return keep[i] }

		b := &batch{signal: signalLogs, logs: ld}
		b.compact()
		kept, err := b.expandKept(func(i int) bool { return keep[i] })
		require.NoError(t, err)
		filterLogs(ld, keepIdx)
		want, _ := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		got, _ := (&plog.ProtoMarshaler{}).MarshalLogs(b.logs)
		require.Equal(t, want, got, "round %d: logs", round)
		if round > 0 {
			again, _ := (&plog.ProtoMarshaler{}).MarshalLogs(previous)
			require.Equal(t, previousWant, again, "round %d: the last round's logs changed", round)
		}
		previous, previousWant = b.logs, want
		require.Len(t, kept, ld.LogRecordCount())
		for _, i := range kept {
			require.True(t, keep[i])
		}

		b = &batch{signal: signalTraces, traces: td}
		b.compact()
		_, err = b.expandKept(func(i int) bool { return keep[i] })
		require.NoError(t, err)
		filterTraces(td, keepIdx)
		wantT, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		gotT, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(b.traces)
		require.Equal(t, wantT, gotT, "round %d: traces", round)
	}
}

func randomLogs(rng *rand.Rand) plog.Logs {
	ld := plog.NewLogs()
	for r := range rng.IntN(4) {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", r))
		rl.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		for s := range rng.IntN(3) {
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(fmt.Sprintf("scope-%d", s))
			for i := range rng.IntN(6) {
				lr := sl.LogRecords().AppendEmpty()
				lr.Body().SetStr(fmt.Sprintf("record %d", i))
				lr.Attributes().PutInt("n", int64(i))
				lr.SetSeverityNumber(plog.SeverityNumberWarn)
			}
		}
	}
	return ld
}

func randomTraces(rng *rand.Rand) ptrace.Traces {
	td := ptrace.NewTraces()
	for r := range rng.IntN(4) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", r))
		for range rng.IntN(3) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.SetSchemaUrl("https://example.com/schema")
			for i := range rng.IntN(6) {
				span := ss.Spans().AppendEmpty()
				span.SetName(fmt.Sprintf("span %d", i))
				span.SetTraceID(pcommon.TraceID{byte(i + 1)})
				span.Events().AppendEmpty().SetName("event")
			}
		}
	}
	return td
}

// Whatever bytes it is given, the encoded filter returns an error or an
// encoding, never panics.
func FuzzEncodedFilter(f *testing.F) {
	seed, _ := (&plog.ProtoMarshaler{}).MarshalLogs(randomLogs(rand.New(rand.NewPCG(3, 4))))
	f.Add(seed, uint64(5))
	f.Fuzz(func(t *testing.T, data []byte, pattern uint64) {
		filter := wireFilter{keep: func(i int) bool { return pattern>>(i%64)&1 == 1 }}
		_, _, _ = filter.filter(nil, data, 0)
	})
}
