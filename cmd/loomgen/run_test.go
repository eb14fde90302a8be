package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/internal/workload/foundry"
)

// TestFoundryThroughLoomgen runs `loomgen -family foundry -scenario all`
// against an in-process OTLP receiver: every record the summary and the
// ground truth count arrives, each span in a trace of the request the truth
// lists, the late lines included, and every incident shows up with its root
// cause.
func TestFoundryThroughLoomgen(t *testing.T) {
	for _, protocol := range []string{"grpc", "http"} {
		t.Run(protocol, func(t *testing.T) {
			sink, err := otlpsink.Start(true)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sink.Close)
			endpoint := sink.GRPCEndpoint
			if protocol == "http" {
				endpoint = sink.HTTPEndpoint
			}
			truthPath := filepath.Join(t.TempDir(), "truth.jsonl")
			const requests = 800
			j, err := parseFlags([]string{"-family", "foundry", "-scenario", "all", "-affected", "0.5", "-warmup", "80",
				"-requests", fmt.Sprint(requests), "-seed", "3", "-protocol", protocol, "-endpoint", endpoint, "-truth", truthPath}, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			if err := run(context.Background(), j, &stdout); err != nil {
				t.Fatal(err)
			}
			var sent workload.Summary
			if _, err := fmt.Sscanf(stdout.String(), "requests=%d spans=%d logs=%d", &sent.Requests, &sent.Spans, &sent.Logs); err != nil {
				t.Fatalf("summary line %q: %v", stdout.String(), err)
			}
			got := sink.Counts()
			if sent.Requests != requests || got.Spans != sent.Spans || got.LogRecords != sent.Logs {
				t.Fatalf("loomgen says %+v; the receiver got %d spans and %d logs", sent, got.Spans, got.LogRecords)
			}

			truths := readTruth(t, truthPath)
			byTrace := map[string]*workload.Truth{}
			incidents := map[workload.Scenario]int{}
			spans, logs := 0, 0
			for i := range truths {
				tr := &truths[i]
				for _, id := range tr.TraceIDs {
					byTrace[id] = tr
				}
				spans += tr.Spans
				logs += tr.Logs + tr.TracedLogs + tr.NoiseLogs
				if tr.Failed {
					incidents[tr.Scenario]++
					if c := tr.RootCause; c == nil || c.Kind != workload.CauseAttribute || c.Attribute == "" || c.Value == "" {
						t.Fatalf("%s (%s) failed without an attribute=value root cause: %+v", tr.ReqID, tr.Scenario, c)
					}
				}
			}
			if len(truths) != requests || spans != got.Spans || logs != got.LogRecords {
				t.Fatalf("%d truth lines count %d spans and %d logs; the receiver got %d and %d", len(truths), spans, logs, got.Spans, got.LogRecords)
			}
			for _, sc := range foundry.Incidents() {
				if incidents[sc] == 0 {
					t.Errorf("no request failed of %s: %v", sc, incidents)
				}
			}
			spansOf := map[string]int{}
			for _, td := range sink.Traces() {
				for _, rs := range td.ResourceSpans().All() {
					for _, ss := range rs.ScopeSpans().All() {
						for _, s := range ss.Spans().All() {
							tr := byTrace[s.TraceID().String()]
							if tr == nil {
								t.Fatalf("span %s in trace %s that no truth line lists", s.Name(), s.TraceID())
							}
							spansOf[tr.ReqID]++
						}
					}
				}
			}
			late := 0
			for _, ld := range sink.Logs() {
				for _, rl := range ld.ResourceLogs().All() {
					for _, sl := range rl.ScopeLogs().All() {
						for _, l := range sl.LogRecords().All() {
							if strings.HasPrefix(l.Body().Str(), "ERROR flush of ") {
								late++
							}
						}
					}
				}
			}
			for _, tr := range truths {
				if spansOf[tr.ReqID] != tr.Spans {
					t.Fatalf("%s: received %d spans, the truth says %d", tr.ReqID, spansOf[tr.ReqID], tr.Spans)
				}
			}
			if late != incidents[foundry.LateWrite] {
				t.Fatalf("%d late write failures arrived for %d latewrite requests", late, incidents[foundry.LateWrite])
			}
		})
	}
}

func readTruth(t *testing.T, path string) []workload.Truth {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []workload.Truth
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var tr workload.Truth
		if err := json.Unmarshal(sc.Bytes(), &tr); err != nil {
			t.Fatalf("truth line %q: %v", sc.Text(), err)
		}
		out = append(out, tr)
	}
	return out
}
