package reqidstitchprocessor

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

// FuzzConsume feeds arbitrary OTLP payloads (hostile ids, huge values, invalid
// UTF-8, odd attribute types) to both pipelines of one component, whose state
// carries over from input to input: nothing may panic, and every record that
// goes in comes out.
func FuzzConsume(f *testing.F) {
	td, ld := (&mixBatches{}).build(generateMix(f, 3))
	hostile := strings.Repeat("\xff", 300)
	td2 := tracesOf(
		rec{service: hostile, host: hostile, pid: -1, trace: traceID(1), span: spanID(1), at: t0, end: t0.Add(-time.Hour), attrs: map[string]any{golden.ReqID: hostile, golden.EventID: hostile}},
		rec{trace: traceID(1), span: spanID(2), parent: spanID(1), at: t0, end: t0, attrs: map[string]any{golden.ReqID: int64(7), golden.CausalParents: "x"}},
	)
	ld2 := logsOf(
		rec{scope: golden.GPUEventScope, host: "h", at: t0, attrs: map[string]any{"process.pid": "not a number", "thread.id": 1.5}},
		rec{scope: golden.GPUEventScope, pid: 1, at: t0, attrs: map[string]any{"hw.gpu.memory.usage": "a lot", golden.Stage: "cache/miss", golden.ReqID: ""}},
	)
	for _, pair := range []struct {
		td ptrace.Traces
		ld plog.Logs
	}{{td, ld}, {td2, ld2}, {ptrace.NewTraces(), plog.NewLogs()}} {
		tb, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(pair.td)
		if err != nil {
			f.Fatal(err)
		}
		lb, err := (&plog.ProtoMarshaler{}).MarshalLogs(pair.ld)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tb, lb)
	}
	h := newHarness(f, nil) // one per worker: building the OTTL parsers is slow
	f.Fuzz(func(t *testing.T, traces, logs []byte) {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(traces)
		if err != nil {
			td = ptrace.NewTraces()
		}
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(logs)
		if err != nil {
			ld = plog.NewLogs()
		}
		spans, records := td.SpanCount(), ld.LogRecordCount()
		h.tb = t
		h.spanOut.Reset()
		h.logOut.Reset()
		h.consumeTraces(td)
		h.consumeLogs(ld)
		h.tick(time.Minute) // every hold expires
		if got := len(h.outSpans()); got != spans {
			t.Fatalf("%d spans in, %d out", spans, got)
		}
		if got := len(h.outLogs()); got != records {
			t.Fatalf("%d log records in, %d out", records, got)
		}
	})
}
