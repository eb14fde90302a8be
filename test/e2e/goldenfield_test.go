//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
)

// goldenRun is one pass of a workload through the default config's goldenfield.
type goldenRun struct {
	sent   workload.Summary
	truths []workload.Truth
	sink   *otlpsink.Sink
	col    *collector
}

func runThroughGoldenfield(t *testing.T, cfg workload.Config, action string) goldenRun {
	t.Helper()
	sink := startSink(t)
	col := startCollector(t, "distribution/config.yaml", withEdits(exportTo(sink, "logs", "traces"), keepEveryRequest, func(c map[string]any) {
		mapAt(c, "processors", "goldenfield", "action")["mode"] = action
		// The workload's services adopted the golden-field contract
		// (cmd/loomgen/README.md): every record of theirs is held to it,
		// not only to the fields its service has carried so far.
		mapAt(c, "processors", "goldenfield", "validation")["per_service"] = false
	}))
	sent, truths := sendWorkload(t, col, workload.GRPC, cfg)
	waitUntilStill(sink)
	return goldenRun{sent: sent, truths: truths, sink: sink, col: col}
}

// waitUntilStill waits until nothing more arrives for longer than
// reqidstitch holds records (2s): with drop, fewer records come out than
// went in.
func waitUntilStill(sink *otlpsink.Sink) {
	var last otlpsink.Counts
	for stable := 0; stable < 15; {
		time.Sleep(200 * time.Millisecond)
		if now := sink.Counts(); now == last {
			stable++
		} else {
			last, stable = now, 0
		}
	}
}

// leakedPrompts regenerates cfg's requests and returns the raw prompts their
// log lines carry (the gateway's debug line), which must never be exported.
func leakedPrompts(t *testing.T, cfg workload.Config) []string {
	t.Helper()
	gen, err := workload.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for range cfg.Requests {
		for _, l := range gen.Next(time.Now()).Logs {
			var body map[string]any
			if json.Unmarshal([]byte(l.Body), &body) == nil {
				if p, ok := body["prompt"].(string); ok {
					prompts = append(prompts, p)
				}
			}
		}
	}
	return prompts
}

func strAttr(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

func TestGoldenfieldOnTheWorkload(t *testing.T) {
	cfg := workload.Config{Scenarios: []workload.Scenario{workload.S1}, Affected: 0.12, Requests: 1500, Seed: 11}
	run := runThroughGoldenfield(t, cfg, "tag")
	healthy := map[string]bool{}
	for _, tr := range run.truths {
		if tr.Scenario == workload.Healthy {
			healthy[tr.ReqID] = true
		}
	}
	prompts := leakedPrompts(t, cfg)
	if len(prompts) == 0 {
		t.Fatal("the workload leaked no raw prompt: nothing to check redaction with")
	}

	var drifts []plog.LogRecord
	checkRecord := func(kind, name string, attrs pcommon.Map, text string) {
		for _, p := range prompts {
			if strings.Contains(text, p) {
				t.Fatalf("%s %q: a raw prompt left the collector: %s", kind, name, text)
			}
		}
		valid, _ := attrs.Get(golden.ValidAttr)
		_, hasStage := attrs.Get(golden.Stage)
		switch {
		case hasStage && healthy[strAttr(attrs, golden.ReqID)] && !valid.Bool():
			t.Errorf("%s %q of a healthy request lacks golden fields: missing %s invalid %s", kind, name, strAttr(attrs, golden.MissingAttr), strAttr(attrs, golden.InvalidAttr))
		case !hasStage && (valid.Bool() || !strings.Contains(strAttr(attrs, golden.MissingAttr), golden.Stage)):
			t.Errorf("%s %q names no stage but is not tagged as such: valid=%v missing=%s", kind, name, valid.Bool(), strAttr(attrs, golden.MissingAttr))
		}
	}
	for _, ld := range run.sink.Logs() {
		forEachLog(ld, func(lr plog.LogRecord) {
			if lr.EventName() == golden.SchemaDriftEvent {
				drifts = append(drifts, lr)
				return
			}
			raw, _ := json.Marshal(lr.Attributes().AsRaw())
			checkRecord("log", lr.Body().AsString(), lr.Attributes(), lr.Body().AsString()+string(raw))
		})
	}
	for _, td := range run.sink.Traces() {
		forEachSpan(td, func(span ptrace.Span) {
			raw, _ := json.Marshal(span.Attributes().AsRaw())
			checkRecord("span", span.Name(), span.Attributes(), string(raw))
		})
	}

	if len(drifts) == 0 {
		// goldenfield hands its findings to the next logs batch: one found
		// on the last spans waits for logs that come after them.
		sendWorkload(t, run.col, workload.GRPC, workload.Config{Requests: 3, Seed: 99})
		waitUntilStill(run.sink)
		for _, ld := range run.sink.Logs() {
			forEachLog(ld, func(lr plog.LogRecord) {
				if lr.EventName() == golden.SchemaDriftEvent {
					drifts = append(drifts, lr)
				}
			})
		}
	}
	if len(drifts) != 1 {
		t.Fatalf("%d schema.drift records, want exactly 1", len(drifts))
	}
	d := drifts[0].Attributes().AsRaw()
	lost, _ := d[golden.DriftFieldsLost].([]any)
	if len(lost) != 1 || lost[0] != "raw_output_hash" || d[golden.DriftOldModelVer] != "llama3-8b-v2.3.1" || d[golden.DriftNewModelVer] != "llama3-8b-v2.3.2" {
		t.Errorf("drift record %v: want raw_output_hash lost from llama3-8b-v2.3.1 to llama3-8b-v2.3.2", d)
	}
}

// TestGoldenfieldDropCutsNoise runs the healthy mix with action drop and
// reports the volume it removes; everything that is left honours the contract.
func TestGoldenfieldDropCutsNoise(t *testing.T) {
	cfg := workload.Config{Scenarios: []workload.Scenario{workload.Healthy}, Requests: 1000, Seed: 5}
	run := runThroughGoldenfield(t, cfg, "drop")
	got := run.sink.Counts()
	for _, ld := range run.sink.Logs() {
		forEachLog(ld, func(lr plog.LogRecord) {
			if v, _ := lr.Attributes().Get(golden.ValidAttr); !v.Bool() {
				t.Errorf("drop let an invalid record through: %q", lr.Body().AsString())
			}
		})
	}
	if got.LogRecords >= run.sent.Logs {
		t.Fatalf("drop removed nothing: %d of %d log records came out", got.LogRecords, run.sent.Logs)
	}
	in, out := run.sent.Logs+run.sent.Spans, got.LogRecords+got.Spans
	t.Logf("drop: log records %d -> %d (-%.0f%%), spans %d -> %d, all records %d -> %d (-%.0f%%)",
		run.sent.Logs, got.LogRecords, 100*float64(run.sent.Logs-got.LogRecords)/float64(run.sent.Logs),
		run.sent.Spans, got.Spans, in, out, 100*float64(in-out)/float64(in))
}
