package reqidstitchprocessor

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
)

// Test-only attributes that ride along with every record of the mix, so that
// output records can be told apart and traced back to their request.
const (
	testRecord = "test.record" // a number unique in the run
	testReq    = "test.req"    // the req_id the record belongs to; absent on noise
)

// mixRequest is one generated request with the records the test adds to it:
// driver events of the gpu receiver during its model/forward spans.
type mixRequest struct {
	*workload.Request
	tid       int64 // the engine thread that ran its model/forward
	gpuEvents []workload.Log
}

// generateMix returns n requests of the S1–S3 mix, one every 2 ms.
func generateMix(tb testing.TB, n int) []*mixRequest {
	tb.Helper()
	gen, err := workload.NewGenerator(workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12, Requests: n, Seed: 1,
	})
	require.NoError(tb, err)
	out := make([]*mixRequest, n)
	for i := range out {
		r := &mixRequest{Request: gen.Next(t0.Add(time.Duration(i) * 2 * time.Millisecond)), tid: int64(i + 1)}
		for _, s := range r.Spans {
			if s.Name == "model/forward" {
				r.gpuEvents = append(r.gpuEvents, gpuEventDuring(s, r.tid))
			}
		}
		out[i] = r
	}
	return out
}

// gpuService stands for the gpu receiver on a node.
func gpuService(host string) *workload.Service {
	return &workload.Service{Name: "loom-gpu", Instance: "loom-gpu@" + host, Host: host}
}

func gpuEventDuring(s workload.Span, tid int64) workload.Log {
	return workload.Log{
		Service: gpuService(s.Service.Host),
		Time:    s.Start.Add(s.End.Sub(s.Start) / 2),
		Body:    "ioctl RM_ALLOC",
		Attrs: []attribute.KeyValue{
			semconv.ProcessPID(s.Service.PID), attribute.Int64(string(semconv.ThreadIDKey), tid),
			attribute.String("nv.escape", "RM_ALLOC"), attribute.Int64("nv.latency_us", 310),
		},
	}
}

// mixBatches builds pdata from requests: one resource per service instance.
type mixBatches struct {
	// logsInSpansLackReqID drops the req_id from every log record logged inside a
	// span, as if those services printed only their trace context.
	logsInSpansLackReqID bool
	// keep selects the hosts whose records are built (an agent's node); nil keeps all.
	keep func(host string) bool

	next int // the next test.record number
}

func (m *mixBatches) build(reqs []*mixRequest) (ptrace.Traces, plog.Logs) {
	td, ld := ptrace.NewTraces(), plog.NewLogs()
	spanRes := map[*workload.Service]ptrace.SpanSlice{}
	logRes := map[*workload.Service]plog.LogRecordSlice{}
	for _, r := range reqs {
		for i := range r.Spans {
			s := &r.Spans[i]
			if m.keep != nil && !m.keep(s.Service.Host) {
				continue
			}
			spans, ok := spanRes[s.Service]
			if !ok {
				rs := td.ResourceSpans().AppendEmpty()
				workload.PutResource(s.Service, rs.Resource())
				ss := rs.ScopeSpans().AppendEmpty()
				ss.Scope().SetName(workload.ScopeName)
				spans = ss.Spans()
				spanRes[s.Service] = spans
			}
			m.span(r, s, spans.AppendEmpty())
		}
		for _, logs := range [][]workload.Log{r.Logs, r.gpuEvents} {
			for i := range logs {
				l := &logs[i]
				if m.keep != nil && !m.keep(l.Service.Host) {
					continue
				}
				records, ok := logRes[l.Service]
				if !ok {
					rl := ld.ResourceLogs().AppendEmpty()
					workload.PutResource(l.Service, rl.Resource())
					sl := rl.ScopeLogs().AppendEmpty()
					sl.Scope().SetName(workload.ScopeName)
					if l.Service.Name == "loom-gpu" {
						sl.Scope().SetName(golden.GPUEventScope)
					}
					records = sl.LogRecords()
					logRes[l.Service] = records
				}
				m.log(r, l, records.AppendEmpty())
			}
		}
	}
	return td, ld
}

func (m *mixBatches) span(r *mixRequest, s *workload.Span, out ptrace.Span) {
	workload.PutSpan(s, out)
	if s.Name == "model/forward" {
		// The engine thread that ran it and its GPU: what the gpu receiver reports too.
		out.Attributes().PutInt(string(semconv.ThreadIDKey), r.tid)
		out.Attributes().PutStr(golden.GPUID, "0")
	}
	m.tag(out.Attributes(), r.Truth.ReqID)
}

var stageInBody = regexp.MustCompile(`"stage":"([^"]+)"|\bstage=(\S+)`)

// log converts a log record and does goldenfield's part: the req_id found in
// an attribute or in the body becomes the req_id attribute, and so does the stage.
func (m *mixBatches) log(r *mixRequest, l *workload.Log, out plog.LogRecord) {
	workload.PutLog(l, out)
	attrs := out.Attributes()
	id := r.Truth.ReqID
	belongs := strings.Contains(l.Body, id) || hasValue(l.Attrs, id)
	printsReqID := !m.logsInSpansLackReqID || !l.Context.IsValid()
	if belongs && printsReqID {
		attrs.PutStr(golden.ReqID, id)
	} else {
		attrs.Remove(golden.ReqID)
	}
	if m := stageInBody.FindStringSubmatch(l.Body); m != nil {
		attrs.PutStr(golden.Stage, m[1]+m[2])
	}
	if l.Service.Name == "loom-gpu" {
		belongs = true // the span it happened in is the request's
	}
	if !belongs {
		id = ""
	}
	m.tag(attrs, id)
}

func (m *mixBatches) tag(attrs pcommon.Map, reqID string) {
	attrs.PutInt(testRecord, int64(m.next))
	m.next++
	if reqID != "" {
		attrs.PutStr(testReq, reqID)
	}
}

func hasValue(kvs []attribute.KeyValue, v string) bool {
	for _, kv := range kvs {
		if kv.Value.AsString() == v {
			return true
		}
	}
	return false
}

// primaryRoot returns the root span of a request's first trace.
func primaryRoot(r *workload.Request) (trace.TraceID, trace.SpanID) {
	for _, s := range r.Spans {
		if !s.Parent.IsValid() && s.Context.TraceID().String() == r.Truth.TraceIDs[0] {
			return s.Context.TraceID(), s.Context.SpanID()
		}
	}
	panic("request " + r.Truth.ReqID + " has no primary root")
}

func recordNumber(attrs pcommon.Map) int {
	v, _ := attrs.Get(testRecord)
	return int(v.Int())
}
