package eventgraphexporter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor"
)

// Names of the test's causal rule, as reqidstitch would write them.
const (
	testRule     = "normalize_triggers_forward"
	testEdgeType = "triggered"
)

// workloadData is the S1–S3 workload as the exporter receives it in the real
// pipeline: sent over OTLP by the generator, through the goldenfield processor,
// then stitched as reqidstitch does (event.id, stitch.async_of, causal.parents).
type workloadData struct {
	logs   []plog.Logs
	traces []ptrace.Traces
	truth  []workload.Truth
	want   graphCounts
	// failing are the requests with an ERROR record or an Error span.
	failing map[string]bool
	// perRequest counts each request's events.
	perRequest map[string]int
}

func generateWorkload(tb testing.TB, requests int) *workloadData {
	tb.Helper()
	ctx := context.Background()
	sink, err := otlpsink.Start(true)
	require.NoError(tb, err)
	defer sink.Close()
	var truth bytes.Buffer
	_, err = workload.Run(ctx, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3}, Affected: 0.12, Requests: requests, Seed: 1,
	}, workload.Target{Endpoint: sink.GRPCEndpoint, Protocol: workload.GRPC, Insecure: true}, &truth)
	require.NoError(tb, err)

	gf := goldenfieldprocessor.NewFactory()
	cfg := gf.CreateDefaultConfig().(*goldenfieldprocessor.Config)
	cfg.Validation.ReqIDFormats = []string{"req-celery-{uuid}"} // as the default collector config
	logsOut, tracesOut := new(consumertest.LogsSink), new(consumertest.TracesSink)
	set := processortest.NewNopSettings(gf.Type())
	lp, err := gf.CreateLogs(ctx, set, cfg, logsOut)
	require.NoError(tb, err)
	tp, err := gf.CreateTraces(ctx, set, cfg, tracesOut)
	require.NoError(tb, err)
	for _, ld := range sink.Logs() {
		require.NoError(tb, lp.ConsumeLogs(ctx, ld))
	}
	for _, td := range sink.Traces() {
		require.NoError(tb, tp.ConsumeTraces(ctx, td))
	}
	require.NoError(tb, lp.Shutdown(ctx))
	require.NoError(tb, tp.Shutdown(ctx))

	w := &workloadData{logs: logsOut.AllLogs(), traces: tracesOut.AllTraces()}
	scanner := bufio.NewScanner(&truth)
	for scanner.Scan() {
		var t workload.Truth
		require.NoError(tb, json.Unmarshal(scanner.Bytes(), &t))
		w.truth = append(w.truth, t)
	}
	w.stitch()
	w.count()
	return w
}

// flat is what the reference model needs of a record.
type flat struct {
	attrs                      pcommon.Map
	id, reqID, traceID, spanID string
	parentSpanID, stage        string
	service, host              string
	isSpan, failed             bool
	at                         pcommon.Timestamp
}

func (w *workloadData) records() []*flat {
	var out []*flat
	for _, td := range w.traces {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					f := newFlat(s.Attributes(), rs.Resource().Attributes())
					f.id = golden.SpanEventHash(rs.Resource(), ss.Scope(), s).String()
					f.isSpan, f.at = true, s.StartTimestamp()
					f.traceID, f.spanID = s.TraceID().String(), s.SpanID().String()
					if !s.ParentSpanID().IsEmpty() {
						f.parentSpanID = s.ParentSpanID().String()
					}
					f.failed = s.Status().Code() == ptrace.StatusCodeError
					out = append(out, f)
				}
			}
		}
	}
	for _, ld := range w.logs {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					f := newFlat(lr.Attributes(), rl.Resource().Attributes())
					f.id = golden.LogEventHash(rl.Resource(), sl.Scope(), lr).String()
					f.at = lr.Timestamp()
					if !lr.TraceID().IsEmpty() {
						f.traceID, f.spanID = lr.TraceID().String(), lr.SpanID().String()
					}
					f.failed = lr.SeverityNumber() >= plog.SeverityNumberError
					out = append(out, f)
				}
			}
		}
	}
	return out
}

func newFlat(attrs, resource pcommon.Map) *flat {
	str := func(m pcommon.Map, k string) string { return text(m, k) }
	_, hasErrorType := attrs.Get(string(semconv.ErrorTypeKey))
	return &flat{
		attrs: attrs, reqID: str(attrs, golden.ReqID), stage: str(attrs, golden.Stage), failed: hasErrorType,
		service: str(resource, string(semconv.ServiceNameKey)), host: str(resource, string(semconv.HostNameKey)),
	}
}

// stitch does what reqidstitch does for the exporter: every record with a
// req_id gets its event.id (records without one keep none: the exporter must
// compute it), records of a request's later traces point at its primary root
// span, and each model/forward span is caused by its request's normalization.
func (w *workloadData) stitch() {
	all := w.records()
	roots := map[string]*flat{} // req_id -> the primary root span: the request's earliest root
	normalize := map[string]*flat{}
	for _, f := range all {
		if f.reqID == "" {
			continue
		}
		f.attrs.PutStr(golden.EventID, f.id)
		if f.isSpan && f.parentSpanID == "" && (roots[f.reqID] == nil || f.at < roots[f.reqID].at) {
			roots[f.reqID] = f
		}
		if f.isSpan && f.stage == "preproc/normalize" {
			normalize[f.reqID] = f
		}
	}
	for _, f := range all {
		root := roots[f.reqID]
		if root != nil && f.traceID != "" && f.traceID != root.traceID {
			f.attrs.PutBool(golden.StitchDetached, true)
			f.attrs.PutStr(golden.StitchAsyncOf, root.id)
		}
		if cause := normalize[f.reqID]; cause != nil && f.isSpan && f.stage == "model/forward" {
			f.attrs.PutEmptySlice(golden.CausalParents).AppendEmpty().SetStr(cause.id + ":" + testEdgeType)
			f.attrs.PutEmptySlice(golden.CausalRules).AppendEmpty().SetStr(testRule)
		}
	}
}

// graphCounts are the nodes and edges the graph must hold, by label and type.
type graphCounts map[string]int64

// count derives the expected graph from the records with the model's rules.
func (w *workloadData) count() {
	all := w.records()
	c := graphCounts{}
	w.failing, w.perRequest = map[string]bool{}, map[string]int{}
	spans := map[string]bool{}
	distinct := map[string]map[string]bool{}
	add := func(label, v string) {
		if v == "" {
			return
		}
		if distinct[label] == nil {
			distinct[label] = map[string]bool{}
		}
		distinct[label][v] = true
	}
	for _, f := range all {
		if f.isSpan {
			spans[f.traceID+"/"+f.spanID] = true
		}
	}
	for _, f := range all {
		add("Event", f.id)
		str := func(k string) string { return text(f.attrs, k) }
		if f.reqID != "" {
			add("Request", f.reqID)
			c["IN_REQUEST"]++
			w.perRequest[f.reqID]++
			w.failing[f.reqID] = w.failing[f.reqID] || f.failed
		}
		for label, v := range map[string]string{"Service": f.service, "Host": f.host, "Model": str(golden.ModelVer),
			"InputHash": str(golden.InputHash), "GPU": str(golden.GPUID)} {
			if v != "" {
				add(label, v)
				c[membership[label]]++
			}
		}
		parent := f.parentSpanID
		if !f.isSpan {
			parent = f.spanID
		}
		if parent != "" && spans[f.traceID+"/"+parent] {
			c["CHILD_OF"]++
		}
		if _, ok := f.attrs.Get(golden.StitchAsyncOf); ok {
			c["ASYNC_OF"]++
		}
		if v, ok := f.attrs.Get(golden.CausalParents); ok {
			c["CAUSED"] += int64(v.Slice().Len())
		}
	}
	for label, set := range distinct {
		c[label] = int64(len(set))
	}
	for _, n := range w.perRequest {
		c["NEXT"] += int64(n - 1)
	}
	w.want = c
}

// membership is the edge from an event to each dimension's node.
var membership = map[string]string{
	"Model": "USES_MODEL", "InputHash": "HAS_INPUT", "GPU": "ON_GPU", "Service": "FROM_SERVICE", "Host": "ON_HOST",
}

// send writes the workload through the pipeline: logs first, so that many
// spans arrive after the records that point at them.
func (w *workloadData) send(tb testing.TB, p *pipeline) {
	tb.Helper()
	ctx := context.Background()
	for _, ld := range w.logs {
		require.NoError(tb, p.logs.ConsumeLogs(ctx, ld))
	}
	for _, td := range w.traces {
		require.NoError(tb, p.traces.ConsumeTraces(ctx, td))
	}
}

// requestIDs returns the workload's request ids, sorted.
func (w *workloadData) requestIDs() []string {
	out := make([]string, 0, len(w.perRequest))
	for id := range w.perRequest {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func (w *workloadData) failingIDs() []string {
	var out []string
	for id, failed := range w.failing {
		if failed {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func reqIDs(reqs []eventgraph.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.ReqID
	}
	sort.Strings(out)
	return out
}

func text(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return ""
}
