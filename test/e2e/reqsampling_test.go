//go:build e2e

package e2e

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
)

// waitQuiet returns once the sink received nothing new for quiet.
func waitQuiet(sink *otlpsink.Sink, quiet time.Duration) otlpsink.Counts {
	const poll = 200 * time.Millisecond
	last := sink.Counts()
	for still := time.Duration(0); still < quiet; still += poll {
		time.Sleep(poll)
		if now := sink.Counts(); now != last {
			last, still = now, 0
		}
	}
	return last
}

// keepEmptyAnswers adds the workload's own contract for an empty answer to
// reqsampling's policies, as a user adds one (reqsampling README). S1's empty
// answers are there from the first request of a run sent in a few seconds:
// value drift alone keeps all but the first couple (360 of 362 measured),
// which come before any baseline exists; tests that want every failing
// request configure this.
func keepEmptyAnswers(cfg map[string]any) {
	rs := mapAt(cfg, "processors", "reqsampling")
	rs["policies"] = append(rs["policies"].([]any), map[string]any{"name": "empty_output", "type": "failure_condition",
		"failure_condition": map[string]any{"conditions": []any{
			`Int(attributes["output_length"]) == 0`,
			`attributes["filter_reason"] != nil and attributes["filter_reason"] != "none"`,
		}}})
}

// TestReqsamplingKeepsEveryFailingRequestWhole sends the S1–S3 mix through the
// default config and scores what comes out against the ground truth: every
// failing request is kept with all of its logs and spans, healthy requests at
// about the base rate, and every kept record says which policy kept it.
func TestReqsamplingKeepsEveryFailingRequestWhole(t *testing.T) {
	sink := startSink(t)
	col := startCollector(t, "distribution/config.yaml", withEdits(exportTo(sink, "logs", "traces"), func(cfg map[string]any) {
		mapAt(cfg, "processors", "reqsampling")["decision_wait"] = "2s"
		keepEmptyAnswers(cfg)
	}))
	sent, truths := sendWorkload(t, col, workload.GRPC, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12,
		Requests:  3000,
		Seed:      21,
	})
	got := waitQuiet(sink, 5*time.Second) // longer than decision_wait plus reqidstitch's hold

	spansByReq := map[string]int{}
	policyOf := map[string]string{}
	var texts []string
	unannotated := 0
	for _, td := range sink.Traces() {
		forEachSpan(td, func(span ptrace.Span) {
			spansByReq[strAttr(span.Attributes(), golden.ReqID)]++
			policyOf[strAttr(span.Attributes(), golden.ReqID)] = strAttr(span.Attributes(), golden.SamplingPolicy)
			if strAttr(span.Attributes(), golden.SamplingPolicy) == "" {
				unannotated++
			}
		})
	}
	for _, ld := range sink.Logs() {
		forEachLog(ld, func(lr plog.LogRecord) {
			texts = append(texts, lr.Body().AsString()+" "+strAttr(lr.Attributes(), golden.ReqID))
			if lr.EventName() != golden.SchemaDriftEvent && strAttr(lr.Attributes(), golden.SamplingPolicy) == "" {
				unannotated++
			}
		})
	}
	logsByReq := countMentions(texts, truths)

	var failing, failingWhole, healthy, healthyKept int
	healthyBy := map[string]int{}
	for _, tr := range truths {
		kept := spansByReq[tr.ReqID] > 0 || logsByReq[tr.ReqID] > 0
		if tr.Failed {
			failing++
			if spansByReq[tr.ReqID] == tr.Spans && logsByReq[tr.ReqID] == tr.Logs {
				failingWhole++
			} else {
				t.Errorf("failing %s request %s kept %d/%d spans, %d/%d logs", tr.Scenario, tr.ReqID, spansByReq[tr.ReqID], tr.Spans, logsByReq[tr.ReqID], tr.Logs)
			}
			continue
		}
		healthy++
		if kept {
			healthyKept++
			healthyBy[policyOf[tr.ReqID]]++
			if spansByReq[tr.ReqID] != tr.Spans || logsByReq[tr.ReqID] != tr.Logs {
				t.Errorf("healthy request %s kept in part: %d/%d spans, %d/%d logs", tr.ReqID, spansByReq[tr.ReqID], tr.Spans, logsByReq[tr.ReqID], tr.Logs)
			}
		}
	}
	healthyRate := float64(healthyKept) / float64(healthy)
	t.Logf("failing requests kept whole: %d of %d; healthy kept: %d of %d (%.2f%%, by policy %v); records out %d of %d",
		failingWhole, failing, healthyKept, healthy, 100*healthyRate, healthyBy, got.LogRecords+got.Spans, sent.Logs+sent.Spans)
	if failing == 0 {
		t.Fatal("the workload produced no failing request")
	}
	if healthyRate > 0.05 {
		t.Errorf("healthy requests kept at %.2f%%, want about the 1%% base rate (at most 5%%)", 100*healthyRate)
	}
	if unannotated > 0 {
		t.Errorf("%d kept records lack %s", unannotated, golden.SamplingPolicy)
	}
}
