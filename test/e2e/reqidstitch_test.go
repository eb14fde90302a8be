//go:build e2e

package e2e

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
)

// TestReqidstitchTellsOneStoryPerRequest sends the S1–S3 mix through the
// default config and checks what reqidstitch promises: records of a request
// carry its req_id and trace context, async spans link to their request's
// primary trace, every record has an event.id, and the default causal rules
// stay silent on traffic that holds none of their causes.
func TestReqidstitchTellsOneStoryPerRequest(t *testing.T) {
	sink := startSink(t)
	col := startCollector(t, "distribution/config.yaml", withEdits(exportTo(sink, "logs", "traces"), keepEveryRequest))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sent, truths := sendWorkload(t, col, workload.GRPC, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12,
		Requests:  1000,
		Seed:      13,
	})
	if _, err := sink.WaitFor(ctx, time.Minute, 3*time.Second, func(c otlpsink.Counts) bool {
		return c.LogRecords >= sent.Logs && c.Spans >= sent.Spans
	}); err != nil {
		t.Fatalf("%v\ncollector log:\n%s", err, col.log())
	}

	primary := map[string]string{} // trace id -> primary trace id of its request
	known := map[string]bool{}
	for _, tr := range truths {
		known[tr.ReqID] = true
		for _, id := range tr.TraceIDs {
			primary[id] = tr.TraceIDs[0]
		}
	}
	var requestRecords, bound, withoutEventID, withCauses int
	check := func(attrs pcommon.Map, traceID pcommon.TraceID, text string) {
		if _, ok := attrs.Get(golden.EventID); !ok {
			withoutEventID++
		}
		if _, ok := attrs.Get(golden.CausalParents); ok {
			withCauses++
		}
		var mentioned []string
		for _, id := range reqIDsIn(text) {
			if known[id] {
				mentioned = append(mentioned, id)
			}
		}
		if len(mentioned) != 1 {
			return
		}
		requestRecords++
		if strAttr(attrs, golden.ReqID) == mentioned[0] && !traceID.IsEmpty() {
			bound++
		}
	}
	asyncSpans := 0
	for _, td := range sink.Traces() {
		forEachSpan(td, func(span ptrace.Span) {
			check(span.Attributes(), span.TraceID(), span.Name()+" "+strAttr(span.Attributes(), golden.ReqID))
			root, ok := primary[span.TraceID().String()]
			if !ok || root == span.TraceID().String() {
				return
			}
			asyncSpans++
			detached, _ := span.Attributes().Get(golden.StitchDetached)
			linked := false
			for _, link := range span.Links().All() {
				linked = linked || link.TraceID().String() == root
			}
			if !detached.Bool() || !linked {
				t.Errorf("async span %q of trace %s: detached=%v, linked to primary trace %s: %v", span.Name(), span.TraceID(), detached.Bool(), root, linked)
			}
		})
	}
	for _, ld := range sink.Logs() {
		forEachLog(ld, func(lr plog.LogRecord) {
			if lr.EventName() == golden.SchemaDriftEvent {
				return
			}
			check(lr.Attributes(), lr.TraceID(), lr.Body().AsString()+" "+strAttr(lr.Attributes(), golden.ReqID))
		})
	}

	share := float64(bound) / float64(requestRecords)
	t.Logf("%d of %d records of requests carry their req_id and trace context (%.3f%%); %d async spans", bound, requestRecords, 100*share, asyncSpans)
	if share < 0.999 {
		t.Errorf("only %.3f%% of the records of requests carry both req_id and trace context, want >= 99.9%%", 100*share)
	}
	if asyncSpans == 0 {
		t.Error("the workload produced no async span: nothing checked the detached links")
	}
	if withoutEventID > 0 {
		t.Errorf("%d records left without event.id", withoutEventID)
	}
	if withCauses > 0 {
		t.Errorf("%d records got causal parents from traffic without causes", withCauses)
	}
}

// TestReqidstitchCacheMissTriggersInference sends a cache miss and, 100 ms
// later, the model forward pass of the same request, plus a forward pass of
// another request without a miss: only the first gets a causal parent.
func TestReqidstitchCacheMissTriggersInference(t *testing.T) {
	sink := startSink(t)
	col := startCollector(t, "distribution/config.yaml", withEdits(exportTo(sink, "logs"), keepEveryRequest))

	now := time.Now()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "cache")
	records := rl.ScopeLogs().AppendEmpty().LogRecords()
	add := func(reqID, stage string, at time.Time) {
		lr := records.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lr.Body().SetStr("stage " + stage)
		lr.Attributes().PutStr(golden.ReqID, reqID)
		lr.Attributes().PutStr(golden.Stage, stage)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	missed, other := golden.NewReqID(now, rng), golden.NewReqID(now, rng)
	add(missed, "cache/miss", now)
	add(missed, "model/forward", now.Add(100*time.Millisecond))
	add(other, "model/forward", now.Add(100*time.Millisecond))

	conn := col.dialOTLP()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld)); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.WaitFor(ctx, 30*time.Second, time.Second, func(c otlpsink.Counts) bool { return c.LogRecords >= 3 }); err != nil {
		t.Fatalf("%v\ncollector log:\n%s", err, col.log())
	}

	eventIDs := map[string]string{} // req_id/stage -> event.id
	parents := map[string]string{}
	for _, out := range sink.Logs() {
		forEachLog(out, func(lr plog.LogRecord) {
			key := strAttr(lr.Attributes(), golden.ReqID) + " " + strAttr(lr.Attributes(), golden.Stage)
			eventIDs[key] = strAttr(lr.Attributes(), golden.EventID)
			parents[key] = strAttr(lr.Attributes(), golden.CausalParents)
		})
	}
	miss := eventIDs[missed+" cache/miss"]
	if miss == "" || !strings.Contains(parents[missed+" model/forward"], miss+":triggered") {
		t.Errorf("the forward pass after the miss has causal.parents %q, want the miss %q:triggered", parents[missed+" model/forward"], miss)
	}
	if p := parents[other+" model/forward"]; p != "" {
		t.Errorf("a forward pass without a cache miss got causal.parents %q", p)
	}
	if p := parents[missed+" cache/miss"]; p != "" {
		t.Errorf("the cache miss itself got causal.parents %q", p)
	}
}
