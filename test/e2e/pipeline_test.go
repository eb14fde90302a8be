//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
)

// sinkExporter is the name of the exporter the harness adds to send a pipeline's output to the test.
const sinkExporter = "otlp_grpc/e2e_sink"

// exportTo sends the named pipelines' output to sink as well as to their own exporters.
func exportTo(sink *otlpsink.Sink, pipelines ...string) func(map[string]any) {
	return func(cfg map[string]any) {
		mapAt(cfg, "exporters")[sinkExporter] = map[string]any{
			"endpoint": sink.GRPCEndpoint,
			"tls":      map[string]any{"insecure": true},
		}
		for _, name := range pipelines {
			pipeline := mapAt(cfg, "service", "pipelines", name)
			exporters, _ := pipeline["exporters"].([]any)
			pipeline["exporters"] = append(exporters, sinkExporter)
		}
	}
}

func readTruth(t *testing.T, raw []byte) []workload.Truth {
	t.Helper()
	var truths []workload.Truth
	scanner := bufio.NewScanner(bytes.NewReader(raw))
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		var tr workload.Truth
		if err := json.Unmarshal(scanner.Bytes(), &tr); err != nil {
			t.Fatalf("ground truth line %q: %v", scanner.Text(), err)
		}
		truths = append(truths, tr)
	}
	return truths
}

// TestDefaultPipelineDeliversEveryRecordOnce sends the S1–S3 mix through the
// default config (its sampler set to keep every request) over both OTLP
// transports and checks that every span and log record arrives exactly once,
// with its req_id intact.
func TestDefaultPipelineDeliversEveryRecordOnce(t *testing.T) {
	for _, protocol := range []workload.Protocol{"grpc", "http"} {
		t.Run(string(protocol), func(t *testing.T) {
			sink := startSink(t)
			col := startCollector(t, "distribution/config.yaml", withEdits(exportTo(sink, "logs", "traces"), keepEveryRequest))

			sent, truths := sendWorkload(t, col, protocol, workload.Config{
				Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
				Affected:  0.12,
				Requests:  1500,
				Seed:      42,
			})
			if sent.Requests != 1500 {
				t.Fatalf("sent %d requests, want 1500", sent.Requests)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			got, err := sink.WaitFor(ctx, time.Minute, 3*time.Second, func(c otlpsink.Counts) bool {
				return c.LogRecords >= sent.Logs && c.Spans >= sent.Spans
			})
			if err != nil {
				t.Fatalf("sent %d logs and %d spans: %v\ncollector log:\n%s", sent.Logs, sent.Spans, err, col.log())
			}
			if got.Spans != sent.Spans {
				t.Fatalf("received %d spans, sent %d: duplicates", got.Spans, sent.Spans)
			}
			// Beside what was sent, the collector may add its own findings (schema drift).
			workloadLogs := 0
			for _, ld := range sink.Logs() {
				forEachLog(ld, func(lr plog.LogRecord) {
					if lr.EventName() != golden.SchemaDriftEvent {
						workloadLogs++
					}
				})
			}
			if workloadLogs != sent.Logs {
				t.Fatalf("received %d log records of the workload, sent %d", workloadLogs, sent.Logs)
			}
			checkPerRequest(t, sink, truths)
		})
	}
}

// checkPerRequest matches what arrived against the ground truth request by
// request: spans by req_id attribute and unique span id, logs by the req_id in
// their attributes or body text.
func checkPerRequest(t *testing.T, sink *otlpsink.Sink, truths []workload.Truth) {
	t.Helper()
	spansByReq := map[string]int{}
	seenSpans := map[pcommon.SpanID]bool{}
	for _, td := range sink.Traces() {
		forEachSpan(td, func(span ptrace.Span) {
			if seenSpans[span.SpanID()] {
				t.Errorf("span %s %q received twice", span.SpanID(), span.Name())
			}
			seenSpans[span.SpanID()] = true
			if id, ok := span.Attributes().Get(golden.ReqID); ok {
				spansByReq[id.Str()]++
			}
		})
	}
	var bodies []string
	for _, ld := range sink.Logs() {
		forEachLog(ld, func(lr plog.LogRecord) {
			text := lr.Body().AsString()
			if id, ok := lr.Attributes().Get(golden.ReqID); ok {
				text += " " + id.Str()
			}
			bodies = append(bodies, text)
		})
	}
	logsByReq := countMentions(bodies, truths)
	for _, tr := range truths {
		if spansByReq[tr.ReqID] != tr.Spans {
			t.Errorf("%s (%s): %d spans arrived, %d sent", tr.ReqID, tr.Scenario, spansByReq[tr.ReqID], tr.Spans)
		}
		if logsByReq[tr.ReqID] != tr.Logs {
			t.Errorf("%s (%s): %d log records name it, %d sent", tr.ReqID, tr.Scenario, logsByReq[tr.ReqID], tr.Logs)
		}
	}
}

// countMentions counts, per ground-truth req_id, the texts that contain it.
func countMentions(texts []string, truths []workload.Truth) map[string]int {
	counts := map[string]int{}
	for _, text := range texts {
		for _, id := range reqIDsIn(text) {
			counts[id]++
		}
	}
	known := map[string]bool{}
	for _, tr := range truths {
		known[tr.ReqID] = true
	}
	for id := range counts {
		if !known[id] {
			delete(counts, id)
		}
	}
	return counts
}

func forEachSpan(td ptrace.Traces, fn func(ptrace.Span)) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				fn(span)
			}
		}
	}
}

func forEachLog(ld plog.Logs, fn func(plog.LogRecord)) {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				fn(lr)
			}
		}
	}
}

var reqIDPattern = regexp.MustCompile(`req-(?:\d{13}-[a-z0-9]{6}|celery-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)

// reqIDsIn returns the distinct req_ids a text mentions.
func reqIDsIn(text string) []string {
	var ids []string
	seen := map[string]bool{}
	for _, id := range reqIDPattern.FindAllString(text, -1) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}
